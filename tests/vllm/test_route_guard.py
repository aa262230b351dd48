"""The route guard in front of vLLM's API server, through the ASGI interface vLLM's server
(uvicorn) calls it with, and the leader's start that writes it for vLLM to import."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cdk_llm_serving.vllm import VllmConfig
from cdk_llm_serving.vllm.config import VllmConfigError
from cdk_llm_serving.vllm.multinode import (
    ROUTE_GUARD_DIR,
    ROUTE_GUARD_MIDDLEWARE,
    ROUTE_GUARD_MODULE,
    leader_command,
    route_guard_source,
    with_api_key_file,
    with_route_guard,
)
from cdk_llm_serving.vllm.route_guard import RouteGuard, is_served, route_path
from tests.support.start_script import run_loading_middleware

#: Every path vLLM 0.33.0 documents as answering without the API key: vllm-project/vllm v0.33.0
#: ``docs/usage/security.md``, "API Key Authentication Limitations" / "Unprotected Endpoints".
UNPROTECTED = (
    "/invocations",
    "/generative_scoring",
    "/pooling",
    "/classify",
    "/score",
    "/rerank",
    "/pause",
    "/resume",
    "/is_paused",
    "/abort_requests",
    "/scale_elastic_ep",
    "/is_scaling_elastic_ep",
    "/init_weight_transfer_engine",
    "/update_weights",
    "/get_world_size",
    "/fault_tolerance/apply",
    "/fault_tolerance/status",
    "/metrics",
    "/kv_event_sources",
    "/tokenize",
    "/detokenize",
    "/health",
    "/ping",
    "/version",
    "/load",
    "/tokenizer_info",
    "/server_info",
    "/reset_prefix_cache",
    "/reset_mm_cache",
    "/reset_encoder_cache",
    "/sleep",
    "/wake_up",
    "/is_sleeping",
    "/collective_rpc",
    "/start_profile",
    "/stop_profile",
)
#: The two the service serves on purpose (probes, load balancer, scraper).
SERVED_OPEN = ("/health", "/metrics")
#: Key-checked by vLLM (``GUARDED_PREFIX``) but not the OpenAI API the service offers.
OTHER_KEYED = ("/v2/embed", "/v2/rerank", "/inference/v1/generate", "/cohere/v2/chat/render")


def test_the_list_is_vllms_documented_list():
    """Re-reads the list from an unpacked vLLM 0.33.0 sdist when one is at hand."""
    source = os.environ.get("CDK_LLM_SERVING_VLLM_SOURCE")
    if not source:
        pytest.skip("set CDK_LLM_SERVING_VLLM_SOURCE to an unpacked vLLM sdist to re-read its docs")
    doc = (Path(source) / "docs/usage/security.md").read_text()
    section = doc.split("### Unprotected Endpoints")[1].split("### Security Implications")[0]
    assert set(re.findall(r"^- `(/[a-z_/]+)`", section, re.M)) == set(UNPROTECTED)


class Inner:
    """The app behind the guard (vLLM's middlewares and router): records what reaches it."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scopes.append(dict(scope))
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"inner"})


def call(scope: dict[str, Any]) -> tuple[Inner, list[dict[str, Any]]]:
    inner, sent = Inner(), []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    asyncio.run(RouteGuard(inner)(scope, receive, send))
    return inner, sent


def http(path: str, root_path: str = "", method: str = "POST") -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "root_path": root_path, "headers": []}


def assert_not_found(sent: list[dict[str, Any]]) -> None:
    start, body = sent
    assert start["type"] == "http.response.start" and start["status"] == 404
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(body["body"])
    assert json.loads(body["body"]) == {"detail": "Not Found"}  # FastAPI's own 404 body
    assert body.get("more_body", False) is False


@pytest.mark.parametrize("path", sorted(set(UNPROTECTED) - set(SERVED_OPEN)))
@pytest.mark.parametrize("method", ["GET", "POST", "OPTIONS"])
def test_every_route_vllm_leaves_without_a_key_ends_at_the_guard(path, method):
    inner, sent = call(http(path, method=method))
    assert inner.scopes == []
    assert_not_found(sent)


@pytest.mark.parametrize(
    "path",
    [*OTHER_KEYED, "/", "/v1x", "/v10/models", "/health/", "/metricsx", "/docs", "/openapi.json"],
)
def test_anything_else_outside_v1_is_closed_too(path):
    inner, sent = call(http(path))
    assert inner.scopes == [] and sent[0]["status"] == 404


@pytest.mark.parametrize(
    "path", ["/v1", "/v1/models", "/v1/chat/completions", "/v1/load_lora_adapter", *SERVED_OPEN]
)
def test_v1_health_and_metrics_reach_vllm(path):
    inner, sent = call(http(path, method="GET"))
    assert [s["path"] for s in inner.scopes] == [path]
    assert sent[0]["status"] == 200


def test_root_path_is_removed_as_the_router_does():
    # vLLM --root-path /api: FastAPI sets scope["root_path"]; a proxy may or may not strip it.
    for path in ("/api/v1/models", "/api/health", "/v1/models"):
        inner, _ = call(http(path, root_path="/api"))
        assert len(inner.scopes) == 1, path
    for path in ("/api/invocations", "/invocations", "/apiv1/models", "/api"):
        inner, sent = call(http(path, root_path="/api"))
        assert inner.scopes == [] and sent[0]["status"] == 404, path


def test_websockets_outside_v1_are_refused_before_the_handshake():
    refused = {"type": "websocket", "path": "/invocations", "root_path": "", "headers": []}
    inner, sent = call(refused)
    assert inner.scopes == [] and sent == [{"type": "websocket.close", "code": 1008}]
    inner, sent = call({**refused, "path": "/v1/realtime"})
    assert [s["path"] for s in inner.scopes] == ["/v1/realtime"] and sent == []


def test_lifespan_passes_through():
    inner, sent = call({"type": "lifespan", "asgi": {"version": "3.0"}})
    assert [s["type"] for s in inner.scopes] == ["lifespan"] and sent == []


def test_the_middleware_flag_is_the_services():
    with pytest.raises(VllmConfigError, match=r"extra_flags\['middleware'\]"):
        leader_command(VllmConfig(model="m", extra_flags={"middleware": "my.Mw"}), 2)


def start(command, tmp_path: Path, pythonpath: str = "") -> str:
    guarded = with_route_guard(command, str(tmp_path / "guard"))
    return run_loading_middleware(guarded.command, guarded.args, tmp_path, pythonpath)


@pytest.mark.parametrize("startup", ["native", "ray"])
def test_the_start_writes_the_module_and_vllm_imports_it(tmp_path, startup):
    leader = leader_command(VllmConfig(model="m"), 2, startup)
    if startup == "ray":  # no ray here: the script's ray start is stubbed by `true`
        leader = leader.__class__(leader.command, [leader.args[0].replace("ray start", "true")])
    out = start(leader, tmp_path, "/image/lib")
    written = tmp_path / "guard" / f"{ROUTE_GUARD_MODULE}.py"
    assert out.startswith(f"rc=0\nmiddleware={ROUTE_GUARD_MIDDLEWARE} file={written}\n"), out
    assert f"\nPYTHONPATH={tmp_path / 'guard'}:/image/lib\n" in out  # the image's path kept
    assert written.read_text() == route_guard_source()
    args = [line[4:] for line in out.splitlines() if line.startswith("arg=")]
    assert args[-2:] == ["--middleware", ROUTE_GUARD_MIDDLEWARE] and "serve" in args


def test_the_written_module_works_on_its_own(tmp_path):
    start(leader_command(VllmConfig(model="m"), 1), tmp_path)
    spec = importlib.util.spec_from_file_location(
        "written_guard", tmp_path / "guard" / f"{ROUTE_GUARD_MODULE}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.is_served("/v1/models") and not module.is_served("/invocations")


def test_keys_and_guard_compose_and_every_dollar_is_escaped(tmp_path):
    key = tmp_path / "key"
    key.write_text("k1\n")
    both = with_api_key_file(
        with_route_guard(leader_command(VllmConfig(model="m"), 2)),
        str(key),
        str(tmp_path / "k.yaml"),
    )
    script = both.args[0]
    assert script.endswith(
        f'exec vllm "$$@" --middleware {ROUTE_GUARD_MIDDLEWARE} --config {tmp_path / "k.yaml"}'
    )
    assert re.search(r"(?<!\$)\$(?!\$)", script.replace("$$", "")) is None
    assert ROUTE_GUARD_DIR.startswith("/dev/shm/")
    out = run_loading_middleware(
        both.command,
        [script.replace(ROUTE_GUARD_DIR, str(tmp_path / "g")), *both.args[1:]],
        tmp_path,
    )
    assert out.startswith(f"rc=0\nmiddleware={ROUTE_GUARD_MIDDLEWARE} ") and "k1" not in out


#: Boundaries of the root path: a root that is a prefix of ``/v1`` (``/v``), the
#: root ``/v1`` itself, a root with a trailing slash. (root_path, path, the route path)
ROOT_PATH_BOUNDARIES = [
    ("/v", "/v1/models", "/v1/models"),  # "/v" is not a path segment of "/v1"
    ("/v", "/v/v1/models", "/v1/models"),
    ("/v1", "/v1/models", "/models"),  # vLLM under --root-path /v1: its routes are /v1/v1/...
    ("/v1", "/v1", ""),
    ("/api/", "/api/v1/models", "/api/v1/models"),  # "/api/" then "v1": no "/" after the root
    ("/api", "/api", ""),
]


@pytest.mark.parametrize(("root", "path", "expected"), ROOT_PATH_BOUNDARIES)
def test_root_path_boundaries(root, path, expected):
    assert route_path(http(path, root_path=root)) == expected
    inner, sent = call(http(path, root_path=root))
    assert bool(inner.scopes) == is_served(expected), (root, path)


def test_root_path_boundaries_match_starlettes_router():
    """The same table through Starlette's own ``get_route_path`` (what vLLM's router matches),
    in the deploy rehearsal's vLLM virtualenv (``make vllm-venv``)."""
    python = Path(__file__).resolve().parents[2] / ".venv" / "vllm" / "bin" / "python"
    if not python.exists():
        pytest.skip("needs .venv/vllm (make vllm-venv) for Starlette's router")
    program = (
        "import json, sys; from starlette._utils import get_route_path as g; "
        "print(json.dumps([g({'path': p, 'root_path': r}) for r, p, _ in json.load(sys.stdin)]))"
    )
    result = subprocess.run(
        [str(python), "-c", program],
        input=json.dumps(ROOT_PATH_BOUNDARIES),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(result.stdout) == [expected for _, _, expected in ROOT_PATH_BOUNDARIES]

"""The synthesized leader starts vLLM behind the route guard (``vllm/route_guard.py``): only
``/v1`` (key-checked), ``/health`` and ``/metrics`` reach it; the workers serve no API."""

from __future__ import annotations

import pytest

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.constants import VLLM_METRICS_PATH
from cdk_llm_serving.hyperpod.serving_security import API_KEY_FILE
from cdk_llm_serving.vllm import VllmConfig
from cdk_llm_serving.vllm.multinode import (
    API_KEYS_CONFIG,
    ROUTE_GUARD_DIR,
    ROUTE_GUARD_MIDDLEWARE,
    ROUTE_GUARD_MODULE,
    route_guard_source,
)
from cdk_llm_serving.vllm.route_guard import is_served
from tests.support.builders import new_stack
from tests.support.hyperpod import deepseek_service, small_cluster
from tests.support.start_script import run_loading_middleware
from tests.support.template_helpers import manifest_objects


def containers(lws: dict, role: str) -> list[dict]:
    return lws["spec"]["leaderWorkerTemplate"][role]["spec"]["containers"]


def test_the_leaders_start_writes_the_guard_and_vllm_loads_it(lws, tmp_path):
    (leader,) = containers(lws, "leaderTemplate")
    key_file, guard = tmp_path / "api-key", tmp_path / "guard"
    key_file.write_text("k1\n")
    script = leader["args"][0]
    for written, here in (
        (API_KEY_FILE, key_file),
        (API_KEYS_CONFIG, tmp_path / "k.yaml"),
        (ROUTE_GUARD_DIR, guard),
    ):
        assert written in script
        script = script.replace(written, str(here))
    out = run_loading_middleware(leader["command"], [script, *leader["args"][1:]], tmp_path)
    module = guard / f"{ROUTE_GUARD_MODULE}.py"
    assert out.startswith(f"rc=0\nmiddleware={ROUTE_GUARD_MIDDLEWARE} file={module}\n"), out
    assert module.read_text() == route_guard_source()
    args = [line[4:] for line in out.splitlines() if line.startswith("arg=")]
    assert args[0] == "serve" and args[-4:-2] == ["--middleware", ROUTE_GUARD_MIDDLEWARE]


def test_the_workers_serve_no_api_and_carry_no_guard(lws):
    (worker,) = containers(lws, "workerTemplate")
    assert "--headless" in worker["args"]
    assert ROUTE_GUARD_MODULE not in " ".join([*worker["command"], *worker["args"]])


def test_a_middleware_of_the_users_is_refused_at_synth():
    stack = new_stack("UserMiddleware")
    config = VllmConfig(model="x", max_model_len=32768, extra_flags={"middleware": "my.Mw"})
    with pytest.raises(ConfigurationError) as caught:
        deepseek_service(stack, *small_cluster(stack), config=config)
    assert [p.property for p in caught.value.problems] == ["config.extra_flags['middleware']"]


def test_probes_health_checks_and_the_scraper_use_paths_the_guard_serves(hyperpod, lws):
    (leader,) = containers(lws, "leaderTemplate")
    probes = [leader[p]["httpGet"]["path"] for p in leader if p.endswith("Probe")]
    checks = [
        value
        for obj in manifest_objects(hyperpod, "")
        if obj.get("kind") == "Service"
        for key, value in obj["metadata"].get("annotations", {}).items()
        if key.endswith("healthcheck-path")
    ]
    assert probes and checks
    assert all(is_served(path) for path in [*probes, *checks, VLLM_METRICS_PATH])

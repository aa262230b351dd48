"""The router's TLS front (deploy review B1): the real nginx, with the configuration the
router pods mount, forwards the OpenAI API and the router's probes and nothing else. The
router's worker-management routes take no credentials (vllm-router 0.1.17), so a request to
one must never reach it. Needs ``nginx`` (``make nginx``: Debian's nginx-light); skipped, with
the reason, without it."""

from __future__ import annotations

import http.server
import ssl
import threading
import urllib.error
import urllib.request

import pytest

from cdk_llm_serving.hyperpod.prefix_routing import (
    PROXIED_PROBES,
    ROUTER_PORT,
    ROUTER_TLS_PORT,
    PrefixRouting,
    RouterDeployment,
)
from tests.support.nginx import NGINX, free_port, running_nginx, wait_listening
from tests.support.tls import write_certificate

pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (make nginx)")

#: Routes of vllm-router 0.1.17 that manage or inspect workers (its binary's route table).
MANAGEMENT_ROUTES = [
    ("POST", "/add_worker?url=http://10.0.0.9:8000"),
    ("POST", "/remove_worker?url=https://leader-0:8000"),
    ("GET", "/workers"),
    ("POST", "/workers"),
    ("GET", "/list_workers"),
    ("POST", "/flush_cache"),
    ("GET", "/get_load"),
    ("GET", "/get_server_info"),
    ("GET", "/health"),
]


class _Router(http.server.BaseHTTPRequestHandler):
    """Stands in for the router on loopback: records every request it receives."""

    seen: list[tuple[str, str, str | None]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        type(self).seen.append((self.command, self.path, self.headers.get("Authorization")))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    work = tmp_path_factory.mktemp("router-proxy")
    write_certificate(work)
    router_port, tls_port = free_port(), free_port()
    deployment = RouterDeployment(
        routing=PrefixRouting(),
        name="svc",
        namespace="inference",
        ceiling=2,
        startup_timeout_seconds=600,
        vpc_cidr="10.0.0.0/16",
    )
    config = (
        deployment.proxy_config(tls_dir=str(work), tmp_dir=str(work))
        .replace(f"127.0.0.1:{ROUTER_PORT}", f"127.0.0.1:{router_port}")
        .replace(f"listen {ROUTER_TLS_PORT} ssl", f"listen 127.0.0.1:{tls_port} ssl")
    )
    (work / "nginx.conf").write_text(config)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", router_port), _Router)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with running_nginx(work / "nginx.conf"):
        wait_listening(tls_port)
        context = ssl.create_default_context(cafile=str(work / "tls.crt"))
        context.check_hostname = False
        yield f"https://127.0.0.1:{tls_port}", context
        server.shutdown()


def _request(proxy, method: str, path: str) -> int:
    base, context = proxy
    request = urllib.request.Request(
        base + path,
        method=method,
        data=b"{}" if method == "POST" else None,
        headers={"Authorization": "Bearer client-key", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


@pytest.mark.parametrize(("method", "path"), MANAGEMENT_ROUTES)
def test_a_worker_management_route_never_reaches_the_router(proxy, method, path):
    _Router.seen.clear()
    assert _request(proxy, method, path) == 404
    assert _Router.seen == []


def test_the_openai_api_reaches_the_router_with_the_clients_key(proxy):
    _Router.seen.clear()
    assert _request(proxy, "POST", "/v1/chat/completions") == 200
    assert _request(proxy, "GET", "/v1/models") == 200
    assert _Router.seen == [
        ("POST", "/v1/chat/completions", "Bearer client-key"),
        ("GET", "/v1/models", "Bearer client-key"),
    ]


@pytest.mark.parametrize("path", PROXIED_PROBES)
def test_the_routers_probes_reach_it(proxy, path):
    _Router.seen.clear()
    assert _request(proxy, "GET", path) == 200
    assert [seen[1] for seen in _Router.seen] == [path]

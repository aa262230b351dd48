"""The wake proxy (``WakeOnConnect``): the real nginx, with the stream configuration the
wake-proxy pods mount, passes TLS through untouched to the leader, closes a client's
connection at once when no leader runs, and answers the NLB's health check. Needs ``nginx``
with its stream module (``make nginx``: Debian's nginx-light and libnginx-mod-stream); skipped,
with the reason, without it."""

from __future__ import annotations

import re
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest

from cdk_llm_serving.hyperpod.wake_proxy import (
    WAKE_PROXY_HEALTH_PORT,
    WAKE_PROXY_PORT,
    WakeProxyDeployment,
)
from tests.support.nginx import NGINX, free_port, running_nginx, wait_listening
from tests.support.tls import write_certificate

#: Debian builds stream as a dynamic module (libnginx-mod-stream); the pods' image has it built in.
STREAM_MODULE = Path("/usr/lib/nginx/modules/ngx_stream_module.so")
pytestmark = pytest.mark.skipif(
    NGINX is None or not STREAM_MODULE.exists(),
    reason="nginx with its stream module is not installed (make nginx)",
)


class _Leader:
    """A TLS server on loopback standing in for vLLM's leader: answers ``pong`` to ``ping``."""

    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(work / "tls.crt", work / "tls.key")
        self.sock = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                with self.context.wrap_socket(conn, server_side=True) as tls:
                    if tls.recv(4) == b"ping":
                        tls.sendall(b"pong")
            except (OSError, ssl.SSLError):
                pass

    def close(self) -> None:
        self.sock.close()


def _deployment() -> WakeProxyDeployment:
    return WakeProxyDeployment(
        name="svc",
        namespace="inference",
        leader_labels=(("app.kubernetes.io/name", "svc"),),
        vpc_cidr="10.0.0.0/16",
        longest_request_seconds=300,
    )


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    work = tmp_path_factory.mktemp("wake-proxy")
    write_certificate(work, "leader")
    leader = _Leader(work)
    down = free_port()  # nothing listens: no leader runs
    tcp, health, tcp_down = free_port(), free_port(), free_port()
    deployment = _deployment()
    base = deployment.proxy_config(upstream=f"127.0.0.1:{leader.port}", tmp_dir=str(work))
    assert f"listen {WAKE_PROXY_PORT};" in base and f"listen {WAKE_PROXY_HEALTH_PORT};" in base
    # The pods' pass-through again, to an address where nothing listens: zero replicas.
    zero = deployment.proxy_config(upstream=f"127.0.0.1:{down}", tmp_dir=str(work))
    (zero_server,) = re.findall(r"  server \{\n    listen 8443;.*?\n  \}\n", zero, re.S)
    config = f"load_module {STREAM_MODULE};\n" + base.replace(
        f"listen {WAKE_PROXY_PORT};", f"listen 127.0.0.1:{tcp};"
    ).replace(f"listen {WAKE_PROXY_HEALTH_PORT};", f"listen 127.0.0.1:{health};").replace(
        "stream {\n",
        "stream {\n"
        + zero_server.replace(f"listen {WAKE_PROXY_PORT};", f"listen 127.0.0.1:{tcp_down};"),
    )
    (work / "nginx.conf").write_text(config)
    with running_nginx(work / "nginx.conf"):
        wait_listening(tcp)
        yield {"tcp": tcp, "health": health, "down": tcp_down, "work": work}
        leader.close()


def test_tls_passes_through_to_the_leader_untouched(proxy):
    """The client verifies the leader's own certificate through the proxy, and talks to it."""
    context = ssl.create_default_context(cafile=str(proxy["work"] / "tls.crt"))
    with (
        socket.create_connection(("127.0.0.1", proxy["tcp"]), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        peer = tls.getpeercert(binary_form=True)
        tls.sendall(b"ping")
        assert tls.recv(4) == b"pong"
    assert ssl.DER_cert_to_PEM_cert(peer).strip() == (
        (proxy["work"] / "tls.crt").read_text().strip()
    )


def test_at_zero_replicas_the_client_s_connection_closes_at_once(proxy):
    """No leader to dial: nginx accepts (the NLB counts the flow), then closes."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", proxy["down"]), timeout=5) as raw:
        raw.settimeout(5)
        try:
            assert raw.recv(1) == b""
        except ConnectionResetError:
            pass
    assert time.monotonic() - started < 2


def test_the_health_port_answers_without_a_leader(proxy):
    with socket.create_connection(("127.0.0.1", proxy["health"]), timeout=5) as raw:
        raw.settimeout(5)
        assert raw.recv(16) == b"ok"


def test_the_timeouts_cover_the_longest_request_and_connect_fast():
    config = _deployment().proxy_config()
    assert "proxy_timeout 300s;" in config
    assert "proxy_connect_timeout 5s;" in config
    assert "proxy_pass svc-leaders.inference.svc.cluster.local:8000;" in config
    assert "ssl" not in config  # no TLS termination: the leader's TLS and key check stay

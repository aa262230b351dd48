"""vLLM's router (vllm-project/router, ``vllm-router`` 0.1.17) dialling the leaders it lists.

What the router does with its command line, read from the release's wheel and run against a
TLS server (``cdk_llm_serving/hyperpod/prefix_routing.py``'s module doc):

* ``--worker-urls`` are dialled as given: ``http://`` in plaintext, ``https://`` with TLS
  verified against the trust store ``SSL_CERT_FILE`` names (rustls-native-certs). A leader that
  serves HTTPS only answers an ``http://`` worker with a TLS alert: the router never sees it
  healthy. Without the CA in ``SSL_CERT_FILE`` the leader's certificate is untrusted: the same.
* ``--service-discovery`` registers ``http://<pod IP>`` workers ("cannot be combined with service
  discovery, which registers http:// workers", the binary's message).
* A listed worker whose name does not resolve is unhealthy and gets no request; the router
  serves once one worker is healthy.

The model: for each running router pod, each worker URL is resolved with cluster DNS
(``dns.resolve``) to the pod behind it; that pod must be a LeaderWorkerSet leader (label
``leaderworkerset.sigs.k8s.io/worker-index: "0"``: only leaders serve the API), must serve TLS
when the URL says ``https`` (vLLM's ``--ssl-certfile``), and its certificate, as the kubelet
mounted it, must pass a real TLS handshake (Python's ``ssl``, OpenSSL's verifier) against the
router's mounted ``SSL_CERT_FILE`` for the URL's host name.
"""

from __future__ import annotations

import ssl
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rehearsal.controllers import dns, lws
from rehearsal.findings import Finding
from rehearsal.world import PodState, World

SOURCE = (
    "vllm-project/router (PyPI vllm-router 0.1.17: vllm_router/router_args.py, the binary's "
    "messages; run against a TLS server, cdk_llm_serving/hyperpod/prefix_routing.py)"
)
TLS_SOURCE = "rustls-native-certs README (SSL_CERT_FILE replaces the platform trust store)"


def _router_container(pod: PodState) -> dict[str, Any] | None:
    for container in pod.spec.get("containers") or []:
        if (container.get("command") or [""])[0] == "vllm-router":
            found: dict[str, Any] = container
            return found
    return None


def _worker_urls(args: list[str]) -> list[str]:
    urls: list[str] = []
    if "--worker-urls" in args:
        for value in args[args.index("--worker-urls") + 1 :]:
            if value.startswith("--"):
                break
            urls.append(value)
    return urls


def _file(pod: PodState, path: str) -> bytes | None:
    directory, _, name = path.rpartition("/")
    return (pod.files.get(directory) or {}).get(name)


def _leader_tls(pod: PodState) -> tuple[bytes, bytes] | None:
    """The leader's certificate and key as mounted, when its vLLM serves TLS."""
    for container in pod.spec.get("containers") or []:
        args = [*(container.get("command") or []), *(container.get("args") or [])]
        text = " ".join(args)
        if "--ssl-certfile" not in text:
            continue
        words = text.replace("=", " ").split()
        cert = words[words.index("--ssl-certfile") + 1]
        key = words[words.index("--ssl-keyfile") + 1] if "--ssl-keyfile" in words else ""
        cert_pem, key_pem = _file(pod, cert), _file(pod, key)
        if cert_pem and key_pem:
            return cert_pem, key_pem
    return None


def handshake(ca_pem: bytes, cert_pem: bytes, key_pem: bytes, host: str) -> str | None:
    """A TLS handshake in memory: ``None`` when the client trusting ``ca_pem`` accepts the
    server's ``cert_pem`` for ``host``, else OpenSSL's reason."""
    with tempfile.TemporaryDirectory() as tmp:
        cert_file, key_file = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert_file.write_bytes(cert_pem)
        key_file.write_bytes(key_pem)
        server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_context.load_cert_chain(cert_file, key_file)
    client_context = ssl.create_default_context(cadata=ca_pem.decode())
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_context.wrap_bio(client_in, client_out, server_hostname=host)
    server = server_context.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError as error:
                return getattr(error, "verify_message", None) or str(error)
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        try:
            client.do_handshake()
            return None
        except ssl.SSLWantReadError:
            continue
        except ssl.SSLError as error:
            return getattr(error, "verify_message", None) or str(error)
    return "the handshake did not complete"


def check(world: World) -> list[Finding]:
    """The findings for every running router pod (none when the router reaches a leader)."""
    findings: list[Finding] = []
    seen: set[str] = set()
    for pod in sorted(world.pods.values(), key=lambda p: p.key):
        container = _router_container(pod)
        if container is None or not pod.running:
            continue
        owner = f"{pod.owner[0]} {pod.key[1]}/{pod.owner[2]}"
        if owner in seen:
            continue  # one router pod speaks for its Deployment
        seen.add(owner)
        findings += _check_router(world, pod, container, owner)
    return findings


def _check_router(
    world: World, pod: PodState, container: dict[str, Any], owner: str
) -> list[Finding]:
    args = [str(a) for a in container.get("args") or []]
    if "--service-discovery" in args:
        return [
            Finding(
                "router.discovery-dials-http",
                owner,
                "--service-discovery registers http://<pod IP> workers: leaders that serve HTTPS "
                "only never become healthy",
                SOURCE,
            )
        ]
    env = {e.get("name"): e.get("value") for e in container.get("env") or []}
    ca_path = env.get("SSL_CERT_FILE")
    ca_pem = _file(pod, str(ca_path)) if ca_path else None
    findings: list[Finding] = []
    reached = 0
    for url in _worker_urls(args):
        parts = urlsplit(url)
        host = parts.hostname or ""
        address = dns.resolve(world, host, pod)
        if address is None:
            continue  # a replica that does not exist yet: unhealthy until it starts
        target = next((p for p in world.pods.values() if p.ip == address), None)
        if target is None:
            continue
        where = f"{owner} -> {url}"
        if target.labels.get(lws.WORKER) not in (None, "0"):
            findings.append(
                Finding(
                    "router.selects-workers",
                    where,
                    f"{host} is a worker pod ({lws.WORKER}={target.labels[lws.WORKER]}); only "
                    "the leader of a replica serves the API",
                    lws.HEADLESS_SOURCE,
                )
            )
            continue
        tls = _leader_tls(target)
        if parts.scheme == "http" and tls is not None:
            findings.append(
                Finding(
                    "router.scheme-mismatch",
                    where,
                    f"the leader {target.key[2]} serves HTTPS only; the router dials it in "
                    "plaintext and never sees it healthy",
                    SOURCE,
                )
            )
            continue
        if parts.scheme != "https" or tls is None:
            continue
        if ca_pem is None:
            findings.append(
                Finding(
                    "router.no-ca",
                    where,
                    f"SSL_CERT_FILE {ca_path!r} is not a mounted file: the router trusts only the "
                    "image's public CAs and rejects the leader's certificate from the service's CA",
                    TLS_SOURCE,
                )
            )
            break
        reason = handshake(ca_pem, *tls, host)
        if reason is not None:
            findings.append(
                Finding(
                    "router.leader-certificate-rejected",
                    where,
                    f"TLS to {host} fails verification against {ca_path}: {reason}",
                    TLS_SOURCE,
                )
            )
            continue
        reached += 1
    if not reached and not findings:
        findings.append(
            Finding(
                "router.no-leader",
                owner,
                "no worker URL resolves to a running leader: the router waits "
                "--worker-startup-timeout-secs and exits",
                SOURCE,
            )
        )
    world.facts.setdefault("router_leaders", {})[owner] = reached
    return findings

"""What runs inside the rehearsal's network namespaces beside the pods (standard library only).

``python -m rehearsal.live.agent probe SPEC``: the kubelet's readiness probes, from the node.
``python -m rehearsal.live.agent forward SPEC``: the load balancer's listener, a TCP forward.
``python -m rehearsal.live.agent client SPEC``: a client in the VPC, the requests the service
must answer; prints one JSON object per check.

Each is started by ``rehearsal.live.run`` under ``ip netns exec`` and reads a JSON spec file.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def _unverified() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def probe(spec: dict[str, Any]) -> int:
    """Poll each target until it answers 200-399, as the kubelet's HTTP probe counts success;
    print ``ready <url>`` for each as it does. An HTTPS probe does not verify the certificate
    (Kubernetes docs, Configure Liveness, Readiness and Startup Probes: "If scheme field is set
    to HTTPS, the kubelet sends an HTTPS request skipping the certificate verification";
    https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/)."""
    pending = list(spec["urls"])
    deadline = time.monotonic() + float(spec["budget"])
    while pending and time.monotonic() < deadline:
        for url in list(pending):
            try:
                with urllib.request.urlopen(url, timeout=2, context=_unverified()) as answer:
                    ok = 200 <= answer.status < 400
            except (OSError, urllib.error.URLError):
                ok = False
            if ok:
                print(f"ready {url}", flush=True)
                pending.remove(url)
        time.sleep(1)
    return 0 if not pending else 1


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _forward(spec: dict[str, Any]) -> None:
    targets = itertools.cycle([(ip, int(spec["target_port"])) for ip in spec["endpoints"]])

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        host, port = next(targets)
        try:
            upstream_r, upstream_w = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
        except (TimeoutError, OSError):
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, upstream_w), _pipe(upstream_r, client_w))

    server = await asyncio.start_server(handle, "0.0.0.0", int(spec["port"]))
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


def forward(spec: dict[str, Any]) -> int:
    """Pass each connection on the listener port to the next endpoint, bytes unchanged (an NLB
    TCP listener passing TLS through to the pods: the leader terminates TLS)."""
    asyncio.run(_forward(spec))
    return 0


def _request(
    url: str,
    context: ssl.SSLContext,
    key: str | None = None,
    body: dict[str, Any] | None = None,
    method: str | None = None,
    timeout: float = 120,
) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode() if body is not None else None,
        headers=headers,
        method=method or ("POST" if body is not None else "GET"),
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _check(name: str, passed: bool, detail: str) -> None:
    print(json.dumps({"check": name, "passed": passed, "detail": detail}), flush=True)


def client(spec: dict[str, Any]) -> int:
    """The requests through the Service address; one JSON line per check."""
    base = spec["base_url"].rstrip("/")
    context = ssl.create_default_context(cadata=spec["ca_pem"])
    model = spec["model"]
    keys = spec["api_keys"]
    for name in spec["tls_names"]:
        try:
            with socket.create_connection((name, int(spec["port"])), timeout=10) as raw:
                with context.wrap_socket(raw, server_hostname=name) as tls:
                    _check(f"tls {name}", True, tls.version() or "")
        except (OSError, ssl.SSLError) as error:
            _check(f"tls {name}", False, f"{type(error).__name__}: {error}")
            return 0  # nothing else can pass without TLS
    try:
        status, _ = _request(f"{base}/v1/models", context)
        _check("no key 401", status == 401, f"HTTP {status}")
        status, _ = _request(f"{base}/v1/models", context, key="not-" + keys[0])
        _check("wrong key 401", status == 401, f"HTTP {status}")
        for index, key in enumerate(keys):
            status, body = _request(f"{base}/v1/models", context, key=key)
            names = [m.get("id") for m in json.loads(body).get("data", [])] if status == 200 else []
            _check(
                f"api key {index + 1} of {len(keys)} 200 on /v1/models naming {model}",
                status == 200 and model in names,
                f"HTTP {status}, models {names}",
            )
        key = keys[0]
        chat = {"model": model, "temperature": 0, "max_tokens": 64}
        messages = [{"role": "user", "content": spec["prompt"]}]
        status, body = _request(
            f"{base}/v1/chat/completions", context, key, {**chat, "messages": messages}
        )
        message = json.loads(body)["choices"][0]["message"] if status == 200 else {}
        _check("chat completion", status == 200 and bool(message), f"HTTP {status} {body[:200]!r}")
        thought = message.get("reasoning") or message.get("reasoning_content")
        _check(
            "reasoning parser on (message carries reasoning)",
            bool(thought),
            f"reasoning {thought!r:.80}, content {message.get('content')!r:.40}",
        )
        _stream(
            f"{base}/v1/chat/completions",
            context,
            key,
            {**chat, "messages": messages, "stream": True},
            model,
        )
        tools = {**chat, "messages": [{"role": "user", "content": spec["tool_prompt"]}]}
        tools |= {"tools": [spec["tool"]], "tool_choice": "auto"}
        status, body = _request(f"{base}/v1/chat/completions", context, key, tools)
        _check(
            "tools with tool_choice auto accepted", status == 200, f"HTTP {status} {body[:200]!r}"
        )
        for path, method in spec["closed"]:
            status, _ = _request(
                f"{base}{path}", context, key, {} if method == "POST" else None, method
            )
            _check(
                f"{method} {path} 404 (closed by the route guard)", status == 404, f"HTTP {status}"
            )
        for path in spec["open"]:
            status, _ = _request(f"{base}{path}", context)
            _check(f"GET {path} 200", status == 200, f"HTTP {status}")
    except (OSError, ValueError, KeyError, IndexError) as error:
        _check("requests", False, f"{type(error).__name__}: {error}")
    return 0


def _stream(url: str, context: ssl.SSLContext, key: str, body: dict[str, Any], model: str) -> None:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        method="POST",
    )
    lines: list[str] = []
    try:
        with urllib.request.urlopen(request, timeout=120, context=context) as answer:
            kind = answer.headers.get("Content-Type", "")
            lines = [raw.decode().strip() for raw in answer if raw.strip()]
    except urllib.error.HTTPError as error:
        _check("streaming chat (SSE, data: [DONE])", False, f"HTTP {error.code}")
        return
    events = [
        json.loads(line[5:])
        for line in lines
        if line.startswith("data:") and line != "data: [DONE]"
    ]
    names = {event.get("model") for event in events}
    passed = "text/event-stream" in kind and lines[-1:] == ["data: [DONE]"] and names == {model}
    _check(
        "streaming chat (SSE, data: [DONE])",
        passed,
        f"{kind}, {len(events)} events naming {sorted(map(str, names))}, last {lines[-1:]!r}",
    )


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    return {"probe": probe, "forward": forward, "client": client}[argv[0]](spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

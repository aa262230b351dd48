"""What clients send a copy, from inside its network namespace (``nsenter --net``): prints one
JSON object per check (``check``, ``passed``, ``detail``) and the ``/metrics`` texts it scraped.

- ``GET /ping`` 200: SageMaker's health check
  (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
- ``POST /invocations``, the body InvokeEndpoint passes through verbatim: a chat body is answered
  as a chat completion by vLLM's own ``/invocations`` handler (sagemaker_serve.py: "falls through
  to vLLM's built-in /invocations handler"); with ``X-Amzn-SageMaker-Custom-Attributes:
  route=/v1/completions`` the middleware reroutes it (``sagemaker_serve._parse_route``), so a
  completions body answers ``object: text_completion``.
- ``POST /v1/chat/completions`` naming the shared client name, plain and streaming (SSE ending
  ``data: [DONE]``): the answer names the copy's own name, vLLM's first served name
  (../shared/FACTS.md: ``OpenAIServingModels.model_name``).

Standard library only (runs with any python).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from typing import Any

BASE = "http://127.0.0.1:8080"
MESSAGES = [{"role": "user", "content": "What is 17 * 23?"}]


def _request(
    path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        BASE + path,
        data=data,
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST" if data is not None else "GET",
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _json(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def run(shared: str, own: str) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []

    def check(name: str, passed: bool, detail: str) -> None:
        checks.append({"check": name, "passed": passed, "detail": detail})

    status, _ = _request("/ping")
    check("ping", status == 200, f"GET /ping {status}")

    chat = {"model": shared, "messages": MESSAGES, "max_tokens": 16, "temperature": 0}
    status, raw = _request("/invocations", chat)
    data = _json(raw)
    check(
        "invocations",
        status == 200 and data.get("object") == "chat.completion" and data.get("model") == own,
        f"POST /invocations (chat body) {status}, object {data.get('object')!r}, "
        f"model {data.get('model')!r} (expected {own!r}) {raw[:200]!r}"[:400],
    )

    completion = {"model": shared, "prompt": "17 * 23 =", "max_tokens": 8, "temperature": 0}
    status, raw = _request(
        "/invocations",
        completion,
        {"X-Amzn-SageMaker-Custom-Attributes": "route=/v1/completions"},
    )
    data = _json(raw)
    check(
        "invocations route header",
        status == 200 and data.get("object") == "text_completion",
        f"POST /invocations + route=/v1/completions {status}, object {data.get('object')!r} "
        f"{raw[:200]!r}"[:400],
    )

    status, raw = _request("/v1/chat/completions", chat)
    data = _json(raw)
    check(
        "chat completions (shared name)",
        status == 200 and data.get("model") == own,
        f"POST /v1/chat/completions model={shared!r} {status}, answered by "
        f"{data.get('model')!r} (expected {own!r}) {raw[:160]!r}"[:400],
    )

    started = time.monotonic()
    request = urllib.request.Request(
        BASE + "/v1/chat/completions",
        data=json.dumps({**chat, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    models: set[str] = set()
    done = False
    chunks = 0
    content_type = ""
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            content_type = response.headers.get("Content-Type", "")
            for line in response:
                text = line.decode().strip()
                if not text.startswith("data:"):
                    continue
                payload = text[5:].strip()
                if payload == "[DONE]":
                    done = True
                    break
                chunks += 1
                models.add(str(_json(payload.encode()).get("model")))
        stream_status = 200
    except urllib.error.HTTPError as error:
        stream_status = error.code
    check(
        "streaming (SSE)",
        stream_status == 200
        and content_type.startswith("text/event-stream")
        and done
        and models == {own},
        f"{stream_status} {content_type!r}, {chunks} chunks, [DONE] {done}, models {sorted(models)} "
        f"(expected [{own!r}]), {time.monotonic() - started:.1f} s",
    )
    return checks


def scrape() -> str:
    status, raw = _request("/metrics")
    return raw.decode(errors="replace") if status == 200 else ""


def main() -> None:
    args = json.loads(sys.argv[1])
    if args.get("scrape_only"):
        print(json.dumps({"metrics": scrape()}))
        return
    checks = run(args["shared"], args["own"])
    print(json.dumps({"checks": checks, "metrics": scrape()}))


if __name__ == "__main__":
    main()

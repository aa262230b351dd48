"""Smoke test of an OpenAI-compatible endpoint: a tool call and separated reasoning in two
streamed chat completions, with TTFT, inter-token latency and tokens/s (docs/design/cli.md,
"smoke"). Standard library only: the eval gate's Lambda runs it too.
"""

from __future__ import annotations

import ipaddress
import json
import math
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from .exit_codes import EXIT_HTTP_ERROR, EXIT_UNREACHABLE, EXIT_USAGE

#: The API key when no flag gives one; not ``OPENAI_API_KEY``, which holds another service's key.
API_KEY_ENV = "LLM_SERVING_API_KEY"
#: A PEM file of CA certificates trusted besides the system's when no ``--ca-bundle`` is given.
CA_BUNDLE_ENV = "CDK_LLM_SERVING_CA_BUNDLE"
TOOL_NAME = "get_weather"
TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
TOOL_PROMPT = "What is the weather in Seattle right now? Use the tool."
REASONING_PROMPT = "Think step by step: what is 17 * 23? Give only the number as the final answer."


@dataclass
class StreamResult:
    """What one streamed completion showed."""

    ttft_seconds: float | None = None
    inter_token_seconds: list[float] = field(default_factory=list)
    total_seconds: float = 0.0
    output_tokens: int = 0
    content: str = ""
    reasoning: str = ""
    tool_calls: dict[int, dict[str, str]] = field(default_factory=dict)
    model: str | None = None
    #: The message's ``refusal`` (OpenAI's chat completion field), when the server sends one.
    refusal: str = ""

    @property
    def ttft_ms(self) -> float | None:
        return None if self.ttft_seconds is None else round(self.ttft_seconds * 1000, 1)

    def itl_ms(self) -> dict[str, float | None]:
        """Inter-token latency p50, p90 and p99 in milliseconds."""
        found = {q: percentile(self.inter_token_seconds, q) for q in (50, 90, 99)}
        return {f"p{q}": None if v is None else round(v * 1000, 2) for q, v in found.items()}

    @property
    def tokens_per_second(self) -> float:
        generating = self.total_seconds - (self.ttft_seconds or 0.0)
        return self.output_tokens / generating if generating > 0 else 0.0


@dataclass
class Check:
    name: str
    passed: bool
    detail: str


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100])."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def sse_events(lines: Iterator[bytes]) -> Iterator[dict[str, Any]]:
    """JSON payloads of ``data:`` lines until ``[DONE]``."""
    for raw in lines:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        yield json.loads(payload)


def tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """Verification on, against the system's CAs *and* ``ca_bundle`` (``load_verify_locations``,
    https://docs.python.org/3/library/ssl.html#ssl.SSLContext.load_verify_locations)."""
    context = ssl.create_default_context()
    if ca_bundle:
        try:
            context.load_verify_locations(cafile=ca_bundle)
        except (OSError, ssl.SSLError) as error:
            raise SmokeError(
                f"CA bundle {ca_bundle!r}: not a readable PEM file of certificates ({error})",
                EXIT_USAGE,
            ) from None
    return context


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1): traffic that stays on this host."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plaintext_problem(base_url: str, headers: dict[str, str], ca_bundle: str | None) -> str | None:
    """Why ``base_url`` must not be used as given: an ``http://`` URL with a CA bundle (a
    mistyped ``https://``), or with a key to send to a host that is not loopback."""
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme != "http":
        return None
    if ca_bundle:
        return (
            f"{base_url}: a CA bundle (--ca-bundle or {CA_BUNDLE_ENV}) verifies TLS, "
            "and this URL is plain http://; use the https:// URL"
        )
    if "Authorization" in headers and not is_loopback(parts.hostname or ""):
        return (
            f"{base_url}: refusing to send the API key or token in plaintext over http:// "
            "to a host that is not loopback; use the https:// URL"
        )
    return None


def stream_chat(
    base_url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    timeout: float,
    context: ssl.SSLContext | None = None,
) -> StreamResult:
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(
            {**body, "stream": True, "stream_options": {"include_usage": True}}
        ).encode(),
        headers={"Content-Type": "application/json", "Accept": "text/event-stream", **headers},
        method="POST",
    )
    result = StreamResult()
    start = time.perf_counter()
    last: float | None = None
    usage_tokens: int | None = None
    with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
        for event in sse_events(response):
            now = time.perf_counter()
            result.model = event.get("model", result.model)
            if event.get("usage"):
                usage_tokens = event["usage"].get("completion_tokens", usage_tokens)
            for choice in event.get("choices", []):
                delta = choice.get("delta", {})
                text = delta.get("content") or ""
                thought = delta.get("reasoning_content") or delta.get("reasoning") or ""
                calls = delta.get("tool_calls") or []
                refusal = delta.get("refusal") or ""
                if not (text or thought or calls or refusal):
                    continue
                result.content += text
                result.refusal += refusal
                result.reasoning += thought
                for call in calls:
                    slot = result.tool_calls.setdefault(
                        call.get("index", 0), {"name": "", "arguments": ""}
                    )
                    function = call.get("function", {})
                    slot["name"] += function.get("name") or ""
                    slot["arguments"] += function.get("arguments") or ""
                result.output_tokens += 1
                if result.ttft_seconds is None:
                    result.ttft_seconds = now - start
                elif last is not None:
                    result.inter_token_seconds.append(now - last)
                last = now
    result.total_seconds = time.perf_counter() - start
    if usage_tokens:
        result.output_tokens = usage_tokens
    return result


def check_tool_call(result: StreamResult) -> Check:
    name = "tool call parsed"
    if not result.tool_calls:
        hint = "is --enable-auto-tool-choice with a --tool-call-parser set?"
        return Check(name, False, f"no tool_calls in the stream ({hint})")
    call = result.tool_calls[min(result.tool_calls)]
    try:
        arguments = json.loads(call["arguments"] or "{}")
    except json.JSONDecodeError:
        return Check(name, False, f"arguments are not JSON: {call['arguments'][:80]!r}")
    if call["name"] != TOOL_NAME:
        return Check(name, False, f"called {call['name']!r}, not {TOOL_NAME!r}")
    return Check(name, True, f"{call['name']}({json.dumps(arguments)})")


def check_reasoning(result: StreamResult) -> Check:
    name = "reasoning separated"
    if not result.reasoning:
        hint = "is --reasoning-parser set?"
        return Check(name, False, f"no reasoning_content in the stream ({hint})")
    if result.reasoning.strip() and result.reasoning.strip() in result.content:
        return Check(name, False, "the reasoning also appears in the answer")
    answer = result.content.strip()[:40]
    return Check(name, True, f"{len(result.reasoning)} characters of reasoning, answer {answer!r}")


def check_copy(name: str, result: StreamResult) -> Check:
    """Which copy answered: vLLM reports its first served name, the copy's own (``served_names``)."""
    if not result.model:
        return Check(f"{name}: answering copy", False, "the response names no model")
    return Check(f"{name}: answering copy", True, result.model)


def run_smoke(
    base_url: str,
    model: str,
    headers: dict[str, str],
    timeout: float = 300.0,
    max_tokens: int = 512,
    context: ssl.SSLContext | None = None,
) -> tuple[list[Check], dict[str, StreamResult]]:
    common = {"model": model, "max_tokens": max_tokens, "temperature": 0}
    ask_tool = {**common, "messages": [{"role": "user", "content": TOOL_PROMPT}]}
    tool_body = {**ask_tool, "tools": [TOOL], "tool_choice": "auto"}
    tool = stream_chat(base_url, headers, tool_body, timeout, context)
    reasoning_body = {**common, "messages": [{"role": "user", "content": REASONING_PROMPT}]}
    reasoning = stream_chat(base_url, headers, reasoning_body, timeout, context)
    checks = [check_tool_call(tool), check_reasoning(reasoning)]
    checks += [
        check_copy(name, result) for name, result in (("tools", tool), ("reasoning", reasoning))
    ]
    return checks, {"tools": tool, "reasoning": reasoning}


def report(checks: list[Check], results: dict[str, StreamResult]) -> dict[str, Any]:
    return {
        "checks": [asdict(check) for check in checks],
        "copies": sorted({r.model for r in results.values() if r.model}),
        "requests": {
            name: {
                "model": r.model,
                "ttft_ms": r.ttft_ms,
                "itl_ms": r.itl_ms(),
                "output_tokens": r.output_tokens,
                "tokens_per_second": round(r.tokens_per_second, 1),
            }
            for name, r in results.items()
        },
    }


def format_report(data: dict[str, Any]) -> str:
    lines = [
        f"{'PASS' if c['passed'] else 'FAIL'}  {c['name']}: {c['detail']}" for c in data["checks"]
    ]
    return "\n".join(lines + [request_line(name, r) for name, r in data["requests"].items()])


def request_line(name: str, r: dict[str, Any]) -> str:
    """One request of ``report``: the answering copy and its latency figures."""
    itl = r["itl_ms"]
    return (
        f"{name:<10} copy={r['model']} ttft={r['ttft_ms']} ms  itl p50/p90/p99="
        f"{itl['p50']}/{itl['p90']}/{itl['p99']} ms  "
        f"{r['output_tokens']} tokens  {r['tokens_per_second']} tokens/s"
    )


class SmokeError(RuntimeError):
    """The endpoint could not be reached or answered with an HTTP error."""

    def __init__(self, message: str, exit_code: int = EXIT_UNREACHABLE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def base_url_problem(base_url: str) -> str | None:
    """Why ``base_url`` is no URL to send requests to (``None`` when it is one)."""
    try:
        parts = urllib.parse.urlsplit(base_url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as error:
        return f"not a URL ({error})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host, e.g. https://internal-lb/v1"
    return None


@contextmanager
def connection(
    base_url: str, headers: dict[str, str], ca_bundle: str | None
) -> Iterator[ssl.SSLContext | None]:
    """The TLS context for requests to ``base_url`` (``None`` for http://); a URL that must not
    be used as given (``plaintext_problem``) and failures of the requests as ``SmokeError``."""
    problem = plaintext_problem(base_url, headers, ca_bundle)
    if problem:
        raise SmokeError(problem, EXIT_USAGE)
    context = tls_context(ca_bundle) if base_url.startswith("https:") else None
    try:
        yield context
    except urllib.error.HTTPError as error:
        body = error.read().decode("utf-8", "replace")[:300]
        raise SmokeError(f"HTTP {error.code} from {base_url}: {body}", EXIT_HTTP_ERROR) from None
    except ssl.SSLError as error:  # after the handshake, e.g. a corrupt record mid-stream
        raise SmokeError(f"TLS: the connection to {base_url} failed mid-answer ({error})") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        reason = getattr(error, "reason", error)
        if isinstance(reason, ssl.SSLCertVerificationError):
            trusted = (
                f"the system's trusted CAs and {ca_bundle}"
                if ca_bundle
                else "the system's trusted CAs"
            )
            raise SmokeError(
                f"TLS: {base_url} presented a certificate that does not verify against "
                f"{trusted} ({reason.verify_message}); pass the service's CA with --ca-bundle "
                f"or {CA_BUNDLE_ENV}"
            ) from None
        raise SmokeError(f"cannot reach {base_url}: {reason}") from None

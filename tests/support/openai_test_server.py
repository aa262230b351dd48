"""A local OpenAI-compatible server that streams SSE on loopback, for the smoke CLI's tests.

It answers like vLLM with a reasoning parser and a tool-call parser: a request with
``tools`` gets a streamed tool call, others get reasoning deltas then content deltas,
each chunk ``delay`` seconds after the last. ``behaviour`` switches to broken answers
(``corrupt-tls-record``: over TLS, a record no key decrypts after the first chunk).

``copies`` makes it a mixed fleet: each request goes to the next copy in turn, which
serves ``[copy, shared]`` as vLLM does with several served names: it answers 404 for any
other name and reports its own (first) name in ``model``.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    server: OpenAITestServer

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        if self.path != "/v1/chat/completions":
            self.send_error(404)
            return
        if (
            self.server.required_token
            and self.headers.get("Authorization") != f"Bearer {self.server.required_token}"
        ):
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b'{"error":"unauthorized"}')
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        model = self.server.model_name or body["model"]
        if self.server.copies:
            model = self.server.next_copy()
            if body.get("model") not in (model, self.server.shared_name):
                self._not_found(body.get("model"), model)
                return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for delta in self._deltas(body):
            chunk = {
                "id": "chatcmpl-test",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [{"index": 0, "delta": delta}],
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            if self.server.behaviour == "corrupt-tls-record":
                # A TLS application-data record whose contents no key decrypts, written past
                # the TLS layer: the client fails mid-stream with ssl.SSLError.
                os.write(self.connection.fileno(), bytes([23, 3, 3, 0, 32]) + bytes(32))
                self.close_connection = True
                return
            time.sleep(self.server.delay)
        usage = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [],
            "usage": {"completion_tokens": self.server.tokens_sent},
        }
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())

    def _not_found(self, asked: object, copy: str) -> None:
        """vLLM's answer to an unknown name (``_check_model``: NotFoundError, HTTP 404)."""
        message = (
            f"The model `{asked}` does not exist. Valid aliases: {copy}, {self.server.shared_name}."
        )
        payload = {"error": {"message": message, "type": "NotFoundError", "code": 404}}
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(payload).encode())

    def _deltas(self, body: dict) -> Iterator[dict]:
        behaviour = self.server.behaviour
        self.server.tokens_sent = 0
        yield {"role": "assistant"}
        if body.get("tools") and behaviour != "no-tools":
            arguments = (
                '{"city": "Seattle"}' if behaviour != "bad-arguments" else '{"city": Seattle'
            )
            yield {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call-1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
            for piece in (arguments[:8], arguments[8:]):
                self.server.tokens_sent += 1
                yield {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
            return
        if behaviour != "no-reasoning":
            for word in ("17 * 23 ", "= 17 * 20 + 17 * 3 ", "= 340 + 51"):
                self.server.tokens_sent += 1
                yield {"reasoning_content": word}
        for word in ("3", "91"):
            self.server.tokens_sent += 1
            yield {"content": word}


class OpenAITestServer(ThreadingHTTPServer):
    def __init__(
        self,
        delay: float,
        behaviour: str,
        required_token: str | None,
        model_name: str | None,
        copies: tuple[str, ...] = (),
        shared_name: str | None = None,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.copies, self.shared_name, self._turn = copies, shared_name, 0
        self._lock = threading.Lock()
        self.delay, self.behaviour, self.required_token, self.model_name = (
            delay,
            behaviour,
            required_token,
            model_name,
        )
        self.tokens_sent = 0

    def next_copy(self) -> str:
        with self._lock:
            copy = self.copies[self._turn % len(self.copies)]
            self._turn += 1
        return copy

    tls = False

    @property
    def base_url(self) -> str:
        if self.tls:  # by name: the test certificate is for localhost
            return f"https://localhost:{self.server_address[1]}/v1"
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextmanager
def serving(
    delay: float = 0.01,
    behaviour: str = "ok",
    required_token: str | None = None,
    model_name: str | None = None,
    copies: tuple[str, ...] = (),
    shared_name: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> Iterator[OpenAITestServer]:
    """``tls``: a server-side context; the server then speaks HTTPS (as vLLM on HyperPod)."""
    server = OpenAITestServer(delay, behaviour, required_token, model_name, copies, shared_name)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        server.tls = True
    # serve_forever polls for shutdown every 0.5 s by default: each test would wait that long.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()

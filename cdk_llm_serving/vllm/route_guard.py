"""ASGI middleware for vLLM's API server: only the routes the service means to serve get through.

vLLM's ``--api-key`` checks only paths under ``/v1``, ``/v2``, ``/inference`` and ``/cohere``
(vLLM 0.33.0 ``vllm/entrypoints/serve/middleware/authenticate.py`` line 11, ``GUARDED_PREFIX``);
every other route on the same port answers without a key, among them ``/invocations`` (the same
inference as ``/v1``), ``/pause``, ``/abort_requests`` and ``/update_weights`` (vLLM
``docs/usage/security.md``, "API Key Authentication Limitations"). ``RouteGuard`` lets through
``/v1`` and below (vLLM then checks the key), ``/health`` (kubelet probes, the load balancer's
health check) and ``/metrics`` (the Prometheus scraper), nothing else: an HTTP request gets
``404 {"detail":"Not Found"}``, what FastAPI answers for a path it has no route for, so a closed
route looks like an absent one; a WebSocket handshake is refused (``websocket.close`` before
``websocket.accept``: the server answers 403, ASGI spec "WebSocket" / "Close - send event").
Lifespan events pass unchanged (vLLM starts its engine client in its lifespan).

vLLM loads it with ``--middleware cdk_llm_serving_route_guard.RouteGuard``: the part before the
last dot is imported, a class goes to ``app.add_middleware`` after vLLM's own middlewares
(``vllm/entrypoints/serve/middleware/register.py`` lines 65-69), and Starlette runs the
middleware added last first, so the guard sees each request before the API-key check, CORS and
the router. The path is compared as Starlette's router matches it: ``root_path`` removed when the
path starts with it at a ``/`` (Starlette ``starlette/_utils.py``, ``get_route_path``; FastAPI
sets ``scope["root_path"]`` from vLLM's ``--root-path`` before the middlewares run,
``fastapi/applications.py`` ``FastAPI.__call__``).

Standard library only: the leader's start writes this file unchanged into the container
(``cdk_llm_serving.vllm.multinode.with_route_guard``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths served as they are.
OPEN_PATHS = frozenset({"/health", "/metrics"})
#: Served with everything below them; vLLM requires the API key there.
KEYED_PREFIX = "/v1"
NOT_FOUND = b'{"detail":"Not Found"}'
#: WebSocket close code "policy violation" (RFC 6455 section 7.4.1).
POLICY_VIOLATION = 1008


def route_path(scope: Scope) -> str:
    """The path the router matches: ``root_path`` removed when the path starts with it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :]
    return path


def is_served(path: str) -> bool:
    return path in OPEN_PATHS or path == KEYED_PREFIX or path.startswith(KEYED_PREFIX + "/")


class RouteGuard:
    """Pure ASGI middleware: requests outside ``/v1``, ``/health`` and ``/metrics`` end here."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket") or is_served(route_path(scope)):
            await self.app(scope, receive, send)
        elif kind == "http":
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(NOT_FOUND)).encode()),
            ]
            await send({"type": "http.response.start", "status": 404, "headers": headers})
            await send({"type": "http.response.body", "body": NOT_FOUND})
        else:
            await send({"type": "websocket.close", "code": POLICY_VIOLATION})

"""How a multi-node vLLM replica starts inside a LeaderWorkerSet group.

Two ways, one choice by default:

* ``native`` (default): every pod runs ``vllm serve`` with ``--nnodes N --node-rank R
  --master-addr <leader>``; workers add ``--headless`` (no API server). torch.distributed
  forms the group directly: no Ray head to start first, no second scheduler inside the
  pods, and a failed pod fails the group, which LeaderWorkerSet then recreates as a whole.
* ``ray``: the leader starts a Ray head and serves with ``--distributed-executor-backend
  ray``; workers join the head and block. For images or features that still need Ray.

LeaderWorkerSet gives every pod ``LWS_LEADER_ADDRESS`` and ``LWS_WORKER_INDEX``
(0 on the leader); Kubernetes expands ``$(VAR)`` in ``args`` from the container env.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from .config import VllmConfig, VllmConfigError

Startup = Literal["native", "ray"]
API_PORT = 8000
MASTER_PORT = 29500
RAY_PORT = 6379
#: Flags this module sets per pod: a config must not set them itself.
MULTINODE_FLAGS = (
    "nnodes",
    "node-rank",
    "master-addr",
    "master-port",
    "headless",
    "distributed-executor-backend",
    "port",
    "host",
)


@dataclass(frozen=True)
class PodCommand:
    command: list[str]
    args: list[str]


def _check(config: VllmConfig, nodes: int) -> None:
    problems = [
        (f"extra_flags[{name!r}]", value, "set per pod by the multi-node launcher")
        for name, value in config.extra_flags.items()
        if name in MULTINODE_FLAGS
    ]
    if nodes < 1:
        problems.append(("nodes", nodes, "must be at least 1"))
    if problems:
        raise VllmConfigError(problems)


def leader_command(config: VllmConfig, nodes: int, startup: Startup = "native") -> PodCommand:
    _check(config, nodes)
    serve = ["serve", *config.to_args(), "--host", "0.0.0.0", "--port", str(API_PORT)]
    if nodes == 1:
        return PodCommand(["vllm"], serve)
    if startup == "native":
        return PodCommand(
            ["vllm"],
            [
                *serve,
                "--nnodes",
                str(nodes),
                "--node-rank",
                "0",
                "--master-addr",
                "$(LWS_LEADER_ADDRESS)",
                "--master-port",
                str(MASTER_PORT),
            ],
        )
    script = f"ray start --head --port={RAY_PORT} && exec vllm {shlex.join([*serve, '--distributed-executor-backend', 'ray'])}"
    return PodCommand(["/bin/sh", "-c"], [script])


def worker_command(config: VllmConfig, nodes: int, startup: Startup = "native") -> PodCommand:
    _check(config, nodes)
    if startup == "native":
        return PodCommand(
            ["vllm"],
            [
                "serve",
                *config.to_args(),
                "--nnodes",
                str(nodes),
                "--node-rank",
                "$(LWS_WORKER_INDEX)",
                "--master-addr",
                "$(LWS_LEADER_ADDRESS)",
                "--master-port",
                str(MASTER_PORT),
                "--headless",
            ],
        )
    return PodCommand(
        ["/bin/sh", "-c"], [f"exec ray start --address=$(LWS_LEADER_ADDRESS):{RAY_PORT} --block"]
    )

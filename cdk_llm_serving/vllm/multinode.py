"""How a multi-node vLLM replica starts inside a LeaderWorkerSet group.

Two ways, one choice by default:

* ``native`` (default): every pod runs ``vllm serve``; workers add ``--headless`` (no API
  server). torch.distributed forms the group directly: no Ray head to start first, no second
  scheduler inside the pods, and a failed pod fails the group, which LeaderWorkerSet then
  recreates as a whole. Two layouts:

  - *data parallel* (``data_parallel_size`` > 1, what the service plans for MoE models):
    one DP rank per node (``--data-parallel-size-local 1``), tensor parallel inside the
    node, experts sharded over all GPUs (``--enable-expert-parallel``). The leader is DP
    rank 0 and serves the API; worker ``i`` is ``--headless --data-parallel-start-rank i``;
    all meet at ``--data-parallel-address <leader> --data-parallel-rpc-port 13345``
    (vllm-project/vllm ``docs/serving/data_parallel_deployment.md``, multi-node example;
    "include the ``--enable-expert-parallel`` CLI arg (on all nodes in the multi-node case)").
  - *pipeline* (otherwise): ``--nnodes N --node-rank R --master-addr <leader>``.

* ``ray``: the leader starts a Ray head and serves with ``--distributed-executor-backend
  ray``; workers join the head and block. For images or features that still need Ray
  (pipeline layout only).

LeaderWorkerSet gives every pod ``LWS_LEADER_ADDRESS`` and ``LWS_WORKER_INDEX``
(0 on the leader); Kubernetes expands ``$(VAR)`` in ``args`` from the container env
(``$$`` is its escape for a literal ``$``).
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
#: The data-parallel RPC port all nodes of a replica share (the value of vLLM's multi-node
#: DP example, docs/serving/data_parallel_deployment.md).
DP_RPC_PORT = 13345
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
    "data-parallel-size-local",
    "data-parallel-address",
    "data-parallel-rpc-port",
    "data-parallel-start-rank",
    "api-key",
)


@dataclass(frozen=True)
class PodCommand:
    command: list[str]
    args: list[str]


def is_data_parallel(config: VllmConfig, nodes: int) -> bool:
    """The replica spans nodes with one data-parallel rank per node."""
    return nodes > 1 and (config.data_parallel_size or 1) > 1


def _check(config: VllmConfig, nodes: int, startup: Startup) -> None:
    problems = [
        (f"extra_flags[{name!r}]", value, "set per pod by the multi-node launcher")
        for name, value in config.extra_flags.items()
        if name in MULTINODE_FLAGS
    ]
    if nodes < 1:
        problems.append(("nodes", nodes, "must be at least 1"))
    dp = config.data_parallel_size or 1
    if nodes > 1 and dp > 1 and dp != nodes:
        problems.append(
            ("data_parallel_size", dp, f"one rank per node: must equal the {nodes} nodes")
        )
    if is_data_parallel(config, nodes) and startup != "native":
        problems.append(("startup", startup, "the data-parallel layout starts natively"))
    if problems:
        raise VllmConfigError(problems)


def _data_parallel_flags() -> list[str]:
    return [
        "--data-parallel-size-local",
        "1",
        "--data-parallel-address",
        "$(LWS_LEADER_ADDRESS)",
        "--data-parallel-rpc-port",
        str(DP_RPC_PORT),
    ]


def _pipeline_flags(rank: str) -> list[str]:
    return [
        "--node-rank",
        rank,
        "--master-addr",
        "$(LWS_LEADER_ADDRESS)",
        "--master-port",
        str(MASTER_PORT),
    ]


def leader_command(config: VllmConfig, nodes: int, startup: Startup = "native") -> PodCommand:
    _check(config, nodes, startup)
    serve = ["serve", *config.to_args(), "--host", "0.0.0.0", "--port", str(API_PORT)]
    if nodes == 1:
        return PodCommand(["vllm"], serve)
    if is_data_parallel(config, nodes):
        return PodCommand(["vllm"], [*serve, *_data_parallel_flags()])
    if startup == "native":
        return PodCommand(["vllm"], [*serve, "--nnodes", str(nodes), *_pipeline_flags("0")])
    script = f"ray start --head --port={RAY_PORT} && exec vllm {shlex.join([*serve, '--distributed-executor-backend', 'ray'])}"
    return PodCommand(["/bin/sh", "-c"], [script])


def worker_command(config: VllmConfig, nodes: int, startup: Startup = "native") -> PodCommand:
    _check(config, nodes, startup)
    serve = ["serve", *config.to_args()]
    if is_data_parallel(config, nodes):
        return PodCommand(
            ["vllm"],
            [
                *serve,
                *_data_parallel_flags(),
                "--data-parallel-start-rank",
                "$(LWS_WORKER_INDEX)",
                "--headless",
            ],
        )
    if startup == "native":
        return PodCommand(
            ["vllm"],
            [
                *serve,
                "--nnodes",
                str(nodes),
                *_pipeline_flags("$(LWS_WORKER_INDEX)"),
                "--headless",
            ],
        )
    return PodCommand(
        ["/bin/sh", "-c"], [f"exec ray start --address=$(LWS_LEADER_ADDRESS):{RAY_PORT} --block"]
    )


def with_api_key_file(command: PodCommand, path: str) -> PodCommand:
    """The same start, with vLLM's API key read from ``path`` into ``VLLM_API_KEY``.

    vLLM takes its key from ``--api-key`` or the ``VLLM_API_KEY`` environment variable
    (vllm-project/vllm ``vllm/entrypoints/openai/api_server.py``, ``build_app``:
    ``if token := args.api_key or envs.VLLM_API_KEY`` installs an authentication middleware
    that checks ``Authorization: Bearer <key>`` only on paths starting with ``/v1``, so
    ``/health`` and ``/metrics`` stay open for probes and the scraper). The key comes from a
    mounted file (the Secrets Store CSI driver), so a shell reads it at start: the value never
    appears in the pod spec. The start fails when the file is missing or empty.
    """
    read = f'set -e; test -s {shlex.quote(path)}; VLLM_API_KEY="$$(cat {shlex.quote(path)})"; export VLLM_API_KEY'
    if command.command == ["vllm"]:
        return PodCommand(["/bin/sh", "-c"], [f'{read}; exec vllm "$@"', "vllm", *command.args])
    (script,) = command.args
    return PodCommand(command.command, [f"{read}; {script}"])

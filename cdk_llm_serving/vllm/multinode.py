"""How a multi-node vLLM replica starts inside a LeaderWorkerSet group.

``native`` (default): every pod runs ``vllm serve`` (workers ``--headless``), one data-parallel
rank per node or pipeline stages; ``ray``: a Ray head on the leader. Kubernetes expands
``$(VAR)`` in ``args`` (``$$`` escapes a ``$``). docs/design/vllm-config.md says more.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import Problems
from . import route_guard
from .config import VllmConfig, VllmConfigError

Startup = Literal["native", "ray"]
API_PORT = 8000
MASTER_PORT = 29500
RAY_PORT = 6379
#: The data-parallel RPC port all nodes of a replica share (the value of vLLM's multi-node
#: DP example, docs/serving/data_parallel_deployment.md).
DP_RPC_PORT = 13345
#: vLLM's ``--config`` file with the leader's API keys, written at start (``with_api_key_file``);
#: ``/dev/shm`` is memory in every container and a ``medium: Memory`` volume in our pods.
API_KEYS_CONFIG = "/dev/shm/vllm-api-keys.yaml"
#: Where the leader's start writes ``route_guard.py`` (``with_route_guard``), under the name
#: vLLM imports it by: a top-level module no package of the image has.
ROUTE_GUARD_DIR = "/dev/shm/cdk-llm-serving"
ROUTE_GUARD_MODULE = "cdk_llm_serving_route_guard"
ROUTE_GUARD_MIDDLEWARE = f"{ROUTE_GUARD_MODULE}.{route_guard.RouteGuard.__name__}"
#: The here-document's end line: the module has no such line (checked when the start is built).
_HEREDOC_END = "CDK_LLM_SERVING_ROUTE_GUARD_END"
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
    # The API keys' file, the route guard, and a root path that would bypass the key check
    # (docs/design/vllm-config.md, "A multi-node replica").
    "config",
    "middleware",
    "root-path",
)


@dataclass(frozen=True)
class PodCommand:
    command: list[str]
    args: list[str]


def is_data_parallel(config: VllmConfig, nodes: int) -> bool:
    """The replica spans nodes with one data-parallel rank per node."""
    return nodes > 1 and (config.data_parallel_size or 1) > 1


def _check(config: VllmConfig, nodes: int, startup: Startup) -> None:
    problems = Problems("VllmConfig")
    for name, value in config.extra_flags.items():
        if name in MULTINODE_FLAGS:
            problems.add(f"extra_flags[{name!r}]", value, "set per pod by the multi-node launcher")
    if nodes < 1:
        problems.add("nodes", nodes, "must be at least 1")
    dp = config.data_parallel_size or 1
    if nodes > 1 and dp > 1 and dp != nodes:
        problems.add("data_parallel_size", dp, f"one rank per node: must equal the {nodes} nodes")
    if is_data_parallel(config, nodes) and startup != "native":
        problems.add("startup", startup, "the data-parallel layout starts natively")
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


def _pipeline_flags(rank: str, nodes: int) -> list[str]:
    return [
        "--nnodes",
        str(nodes),
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
        return PodCommand(["vllm"], [*serve, *_pipeline_flags("0", nodes)])
    script = f"ray start --head --port={RAY_PORT} && exec vllm {shlex.join([*serve, '--distributed-executor-backend', 'ray'])}"
    return PodCommand(["/bin/sh", "-c"], [script])


def worker_command(config: VllmConfig, nodes: int, startup: Startup = "native") -> PodCommand:
    _check(config, nodes, startup)
    serve, rank = ["serve", *config.to_args()], "$(LWS_WORKER_INDEX)"
    if is_data_parallel(config, nodes):
        start = ["--data-parallel-start-rank", rank]
        return PodCommand(["vllm"], [*serve, *_data_parallel_flags(), *start, "--headless"])
    if startup == "native":
        return PodCommand(["vllm"], [*serve, *_pipeline_flags(rank, nodes), "--headless"])
    return PodCommand(
        ["/bin/sh", "-c"], [f"exec ray start --address=$(LWS_LEADER_ADDRESS):{RAY_PORT} --block"]
    )


def with_api_key_file(
    command: PodCommand, path: str, config_path: str = API_KEYS_CONFIG
) -> PodCommand:
    """The same start, with vLLM's API keys read from ``path``: one key per line.

    The keys must not reach a command line, so a shell writes them at start as the ``api-key:``
    list of vLLM's ``--config`` YAML file at ``config_path`` (memory, mode 0600). The start
    fails on a missing file, no key, a key starting with ``-`` or holding white space. Needs
    vLLM 0.31 or later (earlier ones log their arguments unredacted). Sources and the rules:
    docs/design/vllm-config.md, "API keys".
    """
    prefix = api_keys_script(path, config_path)
    return _wrapped(command, prefix, f"--config {shlex.quote(config_path)}")


def _wrapped(command: PodCommand, prefix: str, flags: str) -> PodCommand:
    """``command`` as one ``sh -c`` script: ``prefix``, then the start with ``flags`` added to
    its vLLM call (the last word of the start, ``exec vllm "$$@"`` or the Ray start's)."""
    if command.command == ["vllm"]:
        script, rest = 'exec vllm "$$@"', ["vllm", *command.args]
    else:
        script, *rest = command.args
    return PodCommand(["/bin/sh", "-c"], [f"{prefix}; {script} {flags}", *rest])


def api_keys_script(path: str, config_path: str) -> str:
    """POSIX ``sh`` that writes the keys of ``path`` as ``config_path`` (with Kubernetes'
    ``$$`` escape: the kubelet hands the shell a ``$``)."""
    key_file, config = shlex.quote(path), shlex.quote(config_path)
    lines = [
        f'set -e; u="$(umask)"; umask 077; f={key_file}; c={config}; cr="$(printf \'\\r\')"; n=0',
        '[ -s "$f" ] || { echo "error: API key file $f is missing or empty" >&2; exit 1; }',
        "{ echo 'api-key:'; while IFS= read -r k || [ -n \"$k\" ]; do",
        ' k="${k%"$cr"}"; case "$k" in *[![:space:]]*) ;; *) continue;; esac;',
        ' case "$k" in -*) echo "error: an API key in $f starts with -" >&2; exit 1;; esac;',
        ' case "$k" in *[[:space:]]*) echo "error: an API key in $f holds white space" >&2; exit 1;; esac;',
        ' printf "  - \'%s\'\\n" "$(printf \'%s\' "$k" | sed "s/\'/\'\'/g")"; n=$((n + 1));',
        'done < "$f"; } > "$c"; umask "$u"',
        '[ "$n" -gt 0 ] || { echo "error: no API key in $f" >&2; exit 1; }',
    ]
    return "\n".join(lines).replace("$", "$$")


def route_guard_source() -> str:
    """The text of ``route_guard.py``, the module the leader's start writes."""
    return Path(route_guard.__file__).read_text(encoding="utf-8")


def with_route_guard(command: PodCommand, directory: str = ROUTE_GUARD_DIR) -> PodCommand:
    """The leader's start with vLLM serving only ``/v1``, ``/health`` and ``/metrics``
    (``route_guard.RouteGuard``: what vLLM's API key leaves open, and why, is there).

    The start writes ``route_guard.py`` as ``<directory>/<ROUTE_GUARD_MODULE>.py`` with a
    quoted here-document, puts ``directory`` first on ``PYTHONPATH`` and adds ``--middleware
    cdk_llm_serving_route_guard.RouteGuard``; vLLM adds it after its own middlewares, so it
    runs before the API-key check (docs/design/vllm-config.md, "The route guard").
    """
    source = route_guard_source()
    if _HEREDOC_END in source.splitlines():  # an edit of the module
        raise ValueError(f"route_guard.py must not hold a line {_HEREDOC_END!r}")
    module = f"{ROUTE_GUARD_MODULE}.py"
    prefix = "\n".join(
        [
            f'set -e; d={shlex.quote(directory)}; mkdir -p "$d"',
            f"cat > \"$d/{module}\" <<'{_HEREDOC_END}'",
            f"{source}{_HEREDOC_END}",
            'export PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}"',
        ]
    ).replace("$", "$$")
    return _wrapped(command, prefix, f"--middleware {ROUTE_GUARD_MIDDLEWARE}")

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
    # The leader's API keys reach vLLM as its --config file (with_api_key_file); a config file
    # of the user's would also hide flags from the synth-time checks.
    "config",
    # The leader's route guard is vLLM's --middleware (with_route_guard); a middleware of the
    # user's would run before it (vLLM adds them in order, Starlette runs the last added first).
    "middleware",
    # vLLM's key check strips the root path as a plain prefix while its router and the guard
    # strip it at a "/" only, so a root path of "/" would serve /v1 without the key
    # (vllm/entrypoints/serve/middleware/authenticate.py, ``removeprefix(root_path)``).
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


def with_api_key_file(
    command: PodCommand, path: str, config_path: str = API_KEYS_CONFIG
) -> PodCommand:
    """The same start, with vLLM's API keys read from ``path``: one key per line.

    vLLM 0.33.0 (its PyPI sdist) accepts several keys, only through ``--api-key`` (vllm
    ``vllm/entrypoints/common/cli_args.py`` line 335, ``api_key: list[str] | None``, an
    ``nargs="+"`` flag); ``VLLM_API_KEY`` holds one key and counts only without
    ``--api-key`` (``vllm/entrypoints/serve/middleware/register.py`` line 33,
    ``args.api_key or [envs.VLLM_API_KEY]``; ``vllm/envs.py`` line 829). The middleware
    accepts any of them, comparing SHA-256 digests with ``secrets.compare_digest`` against
    every key without stopping at a match (``middleware/authenticate.py`` lines 28-45) on
    paths under ``/v1``, ``/v2``, ``/inference``, ``/cohere`` (line 11) only; the leader's
    other routes are closed by ``with_route_guard`` but ``/health`` and ``/metrics``, open
    for probes and the scraper. Several keys are what a rotation needs
    (README: both keys work on every replica while clients switch).

    The keys must not reach a command line (``ps``, ``/proc/<pid>/cmdline``), so a shell
    writes them at start as ``api-key:`` list of vLLM's ``--config`` YAML file at
    ``config_path`` (``/dev/shm``: memory, mode 0600, the pod's own, like the mounted file
    itself) and vLLM reads it (``vllm/utils/argparse_utils.py``, ``load_config_file``:
    ``yaml.safe_load``, a list becomes ``--api-key k1 k2``, the file must end in
    ``.yaml``); vLLM logs its arguments with ``api_key`` redacted
    (``vllm/entrypoints/common/startup.py`` lines 50 and 96). Only the opt-in Rust frontend
    (``VLLM_USE_RUST_FRONTEND``, off by default, ``vllm/envs.py`` line 168; these pods do not
    set it) would hand them on in its own command line (``vllm/v1/utils.py``,
    ``--args-json``). Each key is a single-quoted YAML scalar (``'`` doubled). A value of one line
    is one key, so a plain secret keeps working; a key cannot hold a line break anyway (an
    HTTP header cannot). Blank lines and a line's trailing CR are ignored. The start fails
    when the file is missing, holds no key, a key starts with ``-`` (argparse would read
    it as a flag) or holds white space (a bearer token has none, and HTTP servers trim a
    header's edges, so such a key could never match). The file is written under
    ``umask 077``; the umask is set back before vLLM starts. vLLM before 0.31 logged its
    arguments unredacted (0.21.0 ``vllm/entrypoints/utils.py``, "non-default args"), keys
    included: images of this service need vLLM 0.31 or later (AWS's default image is 0.31).
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

    No image of ours: the start writes ``route_guard.py`` as ``<directory>/<ROUTE_GUARD_MODULE>.py``
    (``/dev/shm``: memory, the pod's own) with a quoted here-document (the shell expands
    nothing in it), puts ``directory`` first on ``PYTHONPATH`` (keeping the image's value, if
    any; ``vllm/vllm-openai``'s ``docker/Dockerfile`` sets none) and adds
    ``--middleware cdk_llm_serving_route_guard.RouteGuard``; vLLM imports the module by that name
    and adds the class as middleware (vLLM 0.33.0 ``vllm/entrypoints/common/cli_args.py`` line
    361, ``middleware: list[str]``, an ``append`` flag, line 407;
    ``vllm/entrypoints/serve/middleware/register.py`` lines 65-69; the same loop, after the
    key middleware, is in vLLM 0.21.0's ``vllm/entrypoints/openai/api_server.py`` lines
    301-311, so the default image's 0.31.0 between them has it too; AWS's
    ``docker/vllm/Dockerfile`` sets no ``PYTHONPATH`` either). It is added after vLLM's
    own middlewares, and Starlette puts each one added in front of the others
    (``starlette/applications.py``, ``add_middleware``: ``user_middleware.insert(0, ...)``),
    so the guard runs before the API-key check; the SageMaker bootstrap vLLM then applies
    (``vllm/entrypoints/launchers/app.py`` line 55) keeps that order and puts only a
    ``throttle`` middleware outside it, one a SageMaker container configures, not these pods
    (aws/model-hosting-container-standards
    ``python/model_hosting_container_standards/common/fastapi/middleware/core.py``,
    ``load_middlewares``). The opt-in Rust frontend (``VLLM_USE_RUST_FRONTEND``, unset here;
    ``vllm/entrypoints/cli/serve.py`` line 65) is an HTTP server of its own that Python
    middleware does not reach. The Ray start's head
    inherits ``PYTHONPATH`` too; the directory holds this one module, so it shadows nothing.
    vLLM has no flag that drops its SageMaker routes (``/ping``, ``/invocations``: registered
    unconditionally, ``vllm/entrypoints/launchers/api_server/routers.py`` lines 40-44 and
    ``launchers/app.py`` line 55), hence the middleware.
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

"""Run a pod's ``command``/``args`` the way the kubelet and the container would, with stand-ins
for ``vllm`` and ``ray`` that print their arguments, their umask and the ``--config`` file they
were given."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

#: A ``vllm`` (and ``ray``) that prints its arguments, then the ``--config`` file it was given.
_ECHO = (
    "#!/bin/sh\n"
    'printf "arg=%s\\n" "$@"\n'
    'echo "umask=$(umask)"\n'
    'while [ $# -gt 1 ]; do [ "$1" = --config ] && cat "$2"; shift; done\n'
)


def kubernetes_expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of ``command``/``args``: ``$$`` is a literal ``$``, ``$(VAR)``
    the container's variable (left as written when undefined) (Kubernetes API reference,
    Container ``args``: "Double $$ are reduced to a single $, which allows for escaping
    the $(VAR_NAME) syntax")."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
        text,
    )


def _run(
    command: list[str],
    args: list[str],
    tmp_path: Path,
    programs: dict[str, str],
    image_env: dict[str, str],
) -> str:
    """Run the start with ``programs`` (name -> script) first on PATH, the image's variables
    ``image_env`` set and Kubernetes' expansion applied: ``rc=<exit code>``, then what it
    printed (stdout, then stderr)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in programs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {
        "LWS_LEADER_ADDRESS": "ds-0.ds.inference",
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        **image_env,
    }
    argv = [kubernetes_expand(part, env) for part in [*command, *args]]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    return f"rc={done.returncode}\n{done.stdout}{done.stderr}"


def run_in_container(command: list[str], args: list[str], tmp_path: Path) -> str:
    """``rc=<exit code>``, then what the start printed (stdout, then stderr)."""
    return _run(command, args, tmp_path, {"vllm": _ECHO, "ray": _ECHO}, {})


#: A ``vllm`` that loads each ``--middleware`` the way vLLM 0.33.0 does (the part before the
#: last dot imported with ``importlib.import_module``, then the attribute:
#: ``vllm/entrypoints/serve/middleware/register.py`` lines 65-67), then prints its arguments.
_LOADING_VLLM = """
import importlib, os, sys
args = sys.argv[1:]
for flag, value in zip(args, args[1:]):
    if flag == "--middleware":
        module_path, object_name = value.rsplit(".", 1)
        module = importlib.import_module(module_path)
        getattr(module, object_name)
        print(f"middleware={value} file={module.__file__}")
print("PYTHONPATH=" + os.environ.get("PYTHONPATH", ""))
for arg in args:
    print("arg=" + arg)
"""


def run_loading_middleware(
    command: list[str], args: list[str], tmp_path: Path, pythonpath: str = ""
) -> str:
    """Like ``run_in_container``, with a ``vllm`` (a Python script) that imports its
    ``--middleware`` classes, in a container whose image sets ``pythonpath``."""
    vllm = {"vllm": f"#!{sys.executable}\n{_LOADING_VLLM}"}
    return _run(command, args, tmp_path, vllm, {"PYTHONPATH": pythonpath} if pythonpath else {})

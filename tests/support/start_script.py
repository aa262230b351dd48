"""Run a pod's ``command``/``args`` the way the kubelet and the container would, with stand-ins
for ``vllm`` and ``ray`` that print their arguments and the ``--config`` file they were given."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

#: A ``vllm`` (and ``ray``) that prints its arguments, then the ``--config`` file it was given.
_ECHO = (
    "#!/bin/sh\n"
    'printf "arg=%s\\n" "$@"\n'
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


def run_in_container(command: list[str], args: list[str], tmp_path: Path) -> str:
    """``rc=<exit code>``, then what the start printed (stdout, then stderr)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("vllm", "ray"):
        (bin_dir / name).write_text(_ECHO)
        (bin_dir / name).chmod(0o755)
    env = {"LWS_LEADER_ADDRESS": "ds-0.ds.inference", "PATH": f"{bin_dir}:/usr/bin:/bin"}
    argv = [kubernetes_expand(part, env) for part in [*command, *args]]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    return f"rc={done.returncode}\n{done.stdout}{done.stderr}"

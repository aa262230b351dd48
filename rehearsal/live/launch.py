"""A pod's container start, inside its namespaces: the volumes at their mount paths, the pod's
host name, then the container's command ``exec``-ed with exactly its environment.

Started by ``rehearsal.live.runner`` as
``ip netns exec <pod> unshare --mount --uts --pid --fork --kill-child --propagation private
python -m rehearsal.live.launch SPEC``: the network namespace is the pod's (its /etc/hosts the
rehearsal's DNS, bind-mounted by ``ip netns exec`` from /etc/netns/<pod>/hosts: ip-netns(8)),
the mount namespace is private, so the mounts below are seen by this pod alone and vanish with
it, and the PID namespace ends every process of the pod when its first one ends
(pid_namespaces(7): when the namespace's init terminates, the kernel kills the others).
Standard library only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    _mount("-t", "proc", "proc", "/proc")
    socket.sethostname(spec["hostname"])
    for mount in spec["mounts"]:
        if mount["kind"] == "tmpfs":
            _mount("-t", "tmpfs", "-o", "mode=1777", "tmpfs", mount["target"])
        else:
            _mount("--bind", mount["source"], mount["target"])
            if mount.get("read_only"):
                _mount("-o", "remount,bind,ro", mount["target"])
    os.chdir(spec.get("working_dir", "/"))
    argv = spec["argv"]
    sys.stdout.flush()
    os.execvpe(argv[0], argv, spec["env"])


if __name__ == "__main__":
    main(sys.argv[1])

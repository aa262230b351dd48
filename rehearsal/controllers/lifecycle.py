"""The HyperPod lifecycle script (``LifeCycleConfig.OnCreate``), played on a fake node.

AWS's reference script (aws-samples/awsome-distributed-training
``1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/base-config/on_create_main.sh``)
waits up to 60 s for its data volume to be mounted ("Wait for disk to be mounted (max 60s)",
12 checks 5 s apart), then sets containerd's ``root`` in the containerd configuration (a
systemd override on AL2023, ``root =`` in ``containerd-config.toml`` on AL2), and says so
when the volume is missing. ASSUMED: HyperPod may mount the volumes (``/opt/dlami/nvme``,
``/opt/sagemaker``) after the script starts (why AWS's script waits).

The script is run as it is with ``LIFECYCLE_ROOT`` pointing at a fake root (the script's own
test hook) and a PATH whose ``mountpoint`` / ``findmnt`` / ``mount`` answer "not mounted" at
the first check of each volume and "mounted" from the second (a script that reads
``/proc/mounts`` itself is not fooled: it sees the rehearsal machine's mounts), ``sleep`` returning at once, ``systemctl`` saying
no service runs. Rules:

* ``lifecycle.no-mount-wait``: container storage did not end up on the volume although it was
  mounted a check later;
* ``lifecycle.silent-fallback``: the script exits 0 with container storage on the root volume;
* ``lifecycle.containerd-root-not-set``: with the volumes mounted from the start, the script
  links ``/var/lib/containerd`` rather than setting containerd's ``root`` as AWS's does.

The script runs in a private mount namespace (``unshare --mount``) whose root file system is
remounted read-only but for the fake node, so a script that writes outside ``LIFECYCLE_ROOT``
fails there instead of changing the rehearsal machine; where no such namespace can be made,
the script is not played.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from rehearsal.findings import Finding

SOURCE = "aws-samples/awsome-distributed-training 1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/base-config/on_create_main.sh"
VOLUMES = ("/opt/dlami/nvme", "/opt/sagemaker")
_TOOLS = "bash cat cp date df dirname hostname ln mkdir rm tail tee tr ls grep sed mv rmdir touch seq awk sync".split()

_MOUNTPOINT = """#!/bin/bash
# mountpoint -q PATH: a volume counts as mounted from its second check on
for volume in {volumes}; do
  if [[ "${{@: -1}}" == *"$volume" ]]; then
    count_file="{state}/$(echo "$volume" | tr / _)"
    count=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 ))
    echo "$count" > "$count_file"
    [[ "$count" -ge {from_check} ]] && exit 0
  fi
done
exit 1
"""
_MOUNT = """#!/bin/bash
# mount (no arguments): the mounted volumes, each from its second listing on
for volume in {volumes}; do
  count_file="{state}/$(echo "$volume" | tr / _)"
  count=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 ))
  echo "$count" > "$count_file"
  [[ "$count" -ge {from_check} ]] && echo "/dev/fake on {root}$volume type xfs (rw)" && echo "/dev/fake on $volume type xfs (rw)"
done
exit 0
"""


def _node(work: Path, from_check: int) -> tuple[Path, dict[str, str]]:
    root, bin_dir, state = work / "root", work / "bin", work / "state"
    for path in (
        *(root / v.lstrip("/") for v in VOLUMES),
        root / "var/lib/containerd/io.containerd.content.v1",
        root / "var/lib/kubelet",
        bin_dir,
        state,
        root / "etc",
    ):
        path.mkdir(parents=True, exist_ok=True)
    (root / "var/lib/containerd/io.containerd.content.v1/blob").write_text("layer")
    (root / "etc/os-release").write_text('VERSION_ID="2023"\n')
    for tool in _TOOLS:
        found = shutil.which(tool)
        if found:
            os.symlink(found, bin_dir / tool)
    stubs = {
        "mountpoint": _MOUNTPOINT,
        "findmnt": _MOUNTPOINT,
        "mount": _MOUNT,
        "sleep": "#!/bin/bash\nexit 0\n",
        "systemctl": '#!/bin/bash\n[[ "$1" == is-active ]] && exit 3\nexit 0\n',
    }
    for name, text in stubs.items():
        (bin_dir / name).write_text(
            text.format(volumes=" ".join(VOLUMES), state=state, from_check=from_check, root=root)
        )
        (bin_dir / name).chmod(0o755)
    return root, {"PATH": str(bin_dir), "LIFECYCLE_ROOT": str(root), "HOME": str(work)}


def _containerd_configs(root: Path) -> list[Path]:
    """The configuration files containerd may start with on the fake node: a systemd drop-in's
    ``--config`` (Amazon Linux 2023), the EKS bootstrap's template (Amazon Linux 2:
    awslabs/amazon-eks-ami ``templates/al2/runtime/containerd-config.toml``, installed as
    ``/etc/eks/containerd/containerd-config.toml``), containerd's default
    ``/etc/containerd/config.toml`` (containerd docs/man/containerd-config.toml.5.md), and a
    copy on a volume."""
    configs: list[Path] = []
    for drop_in in sorted(root.glob("etc/systemd/system/containerd.service.d/*.conf")):
        words = drop_in.read_text(errors="replace").split()
        configs += [
            root / words[i + 1].lstrip("/") for i, w in enumerate(words[:-1]) if w == "--config"
        ]
    configs += [
        root / "etc/eks/containerd/containerd-config.toml",
        root / "etc/containerd/config.toml",
        *sorted(root.glob("opt/*/containerd/config.toml")),
        *sorted(root.glob("opt/dlami/nvme/containerd/config.toml")),
    ]
    return [config for config in configs if config.is_file()]


def _containerd_on(root: Path) -> str:
    """Which volume containerd's storage ended on (``/`` for the root volume): where
    ``/var/lib/containerd`` leads, else the first configuration that sets ``root``."""
    link = root / "var/lib/containerd"
    target = str(link.resolve()) if link.exists() else str(link)
    for volume in VOLUMES:
        if target.startswith(str(root) + volume):
            return volume
    for config in _containerd_configs(root):
        text = config.read_text(errors="replace")
        for volume in VOLUMES:
            if f'root = "{volume}' in text or f'root = "{root}{volume}' in text:
                return volume
    return "/"


def _root_set(root: Path) -> bool:
    """containerd's ``root`` set: in a configuration file, or ``--root`` on its command line
    (a systemd drop-in)."""
    configs = [*root.rglob("config.toml"), *root.rglob("containerd-config.toml")]
    if any("root =" in c.read_text(errors="replace") for c in configs):
        return True
    drop_ins = root.glob("etc/systemd/system/containerd.service.d/*.conf")
    return any("--root" in d.read_text(errors="replace") for d in drop_ins)


@functools.cache
def sandbox() -> tuple[str, str] | None:
    """``unshare`` and ``mount`` when this machine lets the rehearsal run a script in a mount
    namespace whose file system is read-only but for the fake node (so a script that writes
    outside ``LIFECYCLE_ROOT`` cannot touch the rehearsal machine); else ``None``."""
    unshare, mount = shutil.which("unshare"), shutil.which("mount")
    if not unshare or not mount:
        return None
    probe = subprocess.run(
        [unshare, "--mount", "--propagation", "private", mount, "-o", "remount,bind,ro", "/"],
        capture_output=True,
        check=False,
    )
    return (unshare, mount) if probe.returncode == 0 else None


def _run(script: Path, from_check: int) -> tuple[int, str, Path, tempfile.TemporaryDirectory[str]]:
    holder = tempfile.TemporaryDirectory(prefix="rehearsal-lifecycle-")
    root, env = _node(Path(holder.name), from_check)
    tools = sandbox()
    assert tools is not None, "check sandbox() first"
    unshare, mount = tools
    bash = shutil.which("bash") or "/bin/bash"
    inner = f'{mount} --bind "$0" "$0" && {mount} -o remount,bind,ro / && exec {bash} "$1"'
    command = [
        unshare,
        "--mount",
        "--propagation",
        "private",
        bash,
        "-c",
        inner,
        holder.name,
        str(script),
    ]
    result = subprocess.run(
        command, env=env, capture_output=True, text=True, check=False, timeout=120
    )
    return result.returncode, result.stdout + result.stderr, root, holder


def check(script: Path, resource: str) -> list[Finding]:
    """Play ``script`` late-mounted and mounted; the findings (none, unplayed, without a sandbox)."""
    found: list[Finding] = []
    if sandbox() is None:
        return found
    code, output, root, holder = _run(script, from_check=2)
    with holder:
        where = _containerd_on(root)
        if where == "/":
            found.append(
                Finding(
                    "lifecycle.no-mount-wait",
                    resource,
                    f"{VOLUMES[0]} and {VOLUMES[1]} are mounted a check after the script starts; it does not wait "
                    "(AWS's waits up to 60 s) and container storage stays on the root volume",
                    SOURCE,
                    "degrades",
                )
            )
        if where == "/" and code == 0:
            last = [line for line in output.splitlines() if line.strip()][-1:] or [""]
            found.append(
                Finding(
                    "lifecycle.silent-fallback",
                    resource,
                    f"exits 0 with container storage on the root volume ({last[0].strip()[-100:]})",
                    SOURCE,
                    "degrades",
                )
            )
    code, output, root, holder = _run(script, from_check=1)
    with holder:
        if (root / "var/lib/containerd").is_symlink() and not _root_set(root):
            found.append(
                Finding(
                    "lifecycle.containerd-root-not-set",
                    resource,
                    f"links /var/lib/containerd to {os.readlink(root / 'var/lib/containerd').removeprefix(str(root))} "
                    "instead of setting containerd's root (AWS's script writes root = in containerd's configuration)",
                    SOURCE,
                    "degrades",
                )
            )
    return found

"""One copy's container, started as SageMaker starts it: AWS's entrypoint
(``/usr/local/bin/sagemaker_entrypoint.sh``, the image's ENTRYPOINT) with the model's
``Environment`` and its model directory at ``/opt/ml/model``, listening on port 8080
(https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html: "containers
must ... accept ... requests on port 8080", ``/ping`` and ``/invocations``).

The process runs in namespaces of its own (``unshare --net --mount --pid --fork``): a network
namespace with only loopback (the client joins it with ``nsenter --net``), a private mount
namespace in which AWS's three scripts are laid over ``/usr/local/bin`` and the model over
``/opt`` (read-only overlays: nothing on the host changes), and a PID namespace that ends every
process of the copy with it (pid_namespaces(7)).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: AWS's unmodified copies (../shared/aws-dlc-vllm/README.md).
SCRIPTS = ("sagemaker_entrypoint.sh", "sagemaker_args.py", "sagemaker_serve.py")
PORT = 8080


def dlc_scripts_dir(root: Path) -> Path:
    """``../shared/aws-dlc-vllm`` beside the repository (``root``)."""
    return root.parent / "shared" / "aws-dlc-vllm"


SUPERVISOR_SHIM = """#!/bin/sh
# The rehearsal's stand-in for the image's standard-supervisor
# (aws/model-hosting-container-standards): run the command itself, so a crash is seen.
exec "$@"
"""


@dataclass
class Running:
    """A started copy: its process (the namespaces' ``unshare``), its files, its log."""

    process: subprocess.Popen[bytes]
    directory: Path
    log: Path
    #: ``time.monotonic()`` at the start.
    started: float = 0.0

    @property
    def netns(self) -> str:
        return f"/proc/{self.process.pid}/ns/net"

    def in_netns(self, argv: list[str]) -> list[str]:
        """``argv`` run in the copy's network namespace."""
        return ["nsenter", f"--net={self.netns}", *argv]

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM the namespace's processes, SIGKILL after 10 s (the PID namespace ends the rest)."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def lay_out(
    directory: Path,
    *,
    scripts: Path,
    model: Path,
    deploy_files: Mapping[str, str],
) -> tuple[Path, Path, Path]:
    """(``usr_local_bin``, ``opt``, ``shims``) under ``directory``: AWS's scripts copied byte for
    byte (their hashes checked against the originals), ``opt/ml/model`` holding the model's files
    (links) and the files the stack writes into the weights prefix, and the supervisor shim."""
    bin_dir = directory / "usr-local-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in SCRIPTS:
        source = scripts / name
        target = bin_dir / name
        target.write_bytes(source.read_bytes())
        if (
            hashlib.sha256(target.read_bytes()).digest()
            != hashlib.sha256(source.read_bytes()).digest()
        ):
            raise RuntimeError(f"{name} changed on copy")
        target.chmod(0o755)
    model_dir = directory / "opt" / "ml" / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    for item in model.iterdir():
        link = model_dir / item.name
        if not link.exists():
            link.symlink_to(item.resolve())
    for relative, body in deploy_files.items():
        path = model_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    shims = directory / "shims"
    shims.mkdir(exist_ok=True)
    shim = shims / "standard-supervisor"
    shim.write_text(SUPERVISOR_SHIM)
    shim.chmod(0o755)
    return bin_dir, directory / "opt", shims


def start(
    directory: Path,
    environment: Mapping[str, str],
    *,
    scripts: Path,
    model: Path,
    deploy_files: Mapping[str, str],
    vllm_venv: Path,
) -> Running:
    """Start the copy; it is ready when ``/ping`` answers 200 (``wait_ready``)."""
    bin_dir, opt_dir, shims = lay_out(
        directory, scripts=scripts, model=model, deploy_files=deploy_files
    )
    env = dict(environment)
    env["PATH"] = os.pathsep.join(
        [
            str(shims),
            str(vllm_venv / "bin"),
            "/usr/local/sbin",
            "/usr/local/bin",
            "/usr/sbin",
            "/usr/bin",
            "/sbin",
            "/bin",
        ]
    )
    spec = {
        "overlays": [[str(bin_dir), "/usr/local/bin"], [str(opt_dir), "/opt"]],
        "argv": ["/usr/local/bin/sagemaker_entrypoint.sh"],
        "env": env,
    }
    spec_path = directory / "spec.json"
    spec_path.write_text(json.dumps(spec, indent=1, sort_keys=True))
    log = directory / "container.log"
    root = Path(__file__).resolve().parents[2]
    handle = log.open("wb")
    process = subprocess.Popen(
        [
            "unshare",
            "--net",
            "--mount",
            "--pid",
            "--fork",
            "--kill-child",
            "--propagation",
            "private",
            sys.executable,
            "-m",
            "rehearsal.sagemaker.launch",
            str(spec_path),
        ],
        cwd=root,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(root)},
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    handle.close()
    return Running(process, directory, log, time.monotonic())


def wait_ready(running: Running, budget: float = 600.0) -> float | None:
    """Seconds from the copy's start until ``GET /ping`` answered 200 inside its namespace
    (``None``: the process exited or the budget ran out)."""
    started = running.started
    probe = [
        sys.executable,
        "-c",
        "import sys,urllib.request\n"
        "try:\n"
        f"    sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:{PORT}/ping', timeout=5).status == 200 else 1)\n"
        "except Exception:\n"
        "    sys.exit(1)\n",
    ]
    while time.monotonic() - started < budget:
        if running.process.poll() is not None:
            return None
        done = subprocess.run(running.in_netns(probe), capture_output=True, check=False)
        if done.returncode == 0:
            return time.monotonic() - started
        time.sleep(2)
    return None

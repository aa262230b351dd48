"""The real nginx for the proxies' tests (``make nginx``): where it is, and one run of it."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


@contextlib.contextmanager
def running_nginx(config: Path) -> Iterator[subprocess.Popen[bytes]]:
    """nginx with ``config`` in the foreground, after ``nginx -t`` accepts it; stopped after."""
    assert NGINX is not None
    checked = subprocess.run(
        [NGINX, "-e", "stderr", "-t", "-c", str(config)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen(
        [NGINX, "-e", "stderr", "-c", str(config), "-g", "daemon off;"], stderr=subprocess.PIPE
    )
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=10)


def free_port() -> int:
    """A loopback port nothing listens on (now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int) -> None:
    """Until something accepts on loopback ``port`` (5 s at most)."""
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")

"""The real command line in a subprocess, as a user without AWS configuration runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The command line with an empty AWS configuration (no region, no credentials)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "AWS_CONFIG_FILE": str(home / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    return subprocess.run(
        [sys.executable, "-m", "cdk_llm_serving", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )

"""The real command line in a subprocess, as a user without AWS configuration runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


#: A ``plan`` that needs no AWS and prints a table (gpt-oss-20b in BF16 on one g6e.12xlarge).
PLAN = [
    "plan",
    "--model",
    "gpt-oss-20b",
    "--weight-format",
    "bf16",
    "--instance-type",
    "ml.g6e.12xlarge",
]


def empty_aws_environment(home: Path) -> dict[str, str]:
    """Environment variables of a user without AWS configuration (no region, no credentials)."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "AWS_CONFIG_FILE": str(home / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The command line with an empty AWS configuration (no region, no credentials)."""
    return subprocess.run(
        [sys.executable, "-m", "cdk_llm_serving", *args],
        capture_output=True,
        text=True,
        env=empty_aws_environment(home),
        cwd=ROOT,
        timeout=120,
    )

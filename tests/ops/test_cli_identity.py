"""The command line names itself as installed (``cdk-llm-serving``) and tells its version."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import cdk_llm_serving
from cdk_llm_serving.ops.cli import main

CONSOLE_SCRIPT = Path(sys.executable).parent / "cdk-llm-serving"


def test_version_is_the_installed_distributions(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"cdk-llm-serving {version('cdk-llm-serving')}\n"
    assert version("cdk-llm-serving") == cdk_llm_serving.__version__


def test_usage_names_the_console_script(capsys):
    with pytest.raises(SystemExit):
        main([])
    assert capsys.readouterr().err.startswith("usage: cdk-llm-serving ")


@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason="the package is not installed here")
def test_the_console_script_runs_the_command_line():
    shown = subprocess.run(
        [str(CONSOLE_SCRIPT), "--version"], capture_output=True, text=True, check=True
    )
    assert shown.stdout == f"cdk-llm-serving {cdk_llm_serving.__version__}\n"

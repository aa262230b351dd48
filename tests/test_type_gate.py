"""mypy's gate reads every aws_cdk module our code imports, and still checks our calls into them.

pyproject.toml skips the aws_cdk modules our code does not import (reading all ~680 cost most of
mypy's time); a module skipped is ``Any`` to mypy, so one our code imports must be on the list
that is read in full, or calls into it would go unchecked without a word.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import aws_cdk

ROOT = Path(__file__).resolve().parents[1]
AWS_CDK = Path(aws_cdk.__file__).parent


def _mypy_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def _checked_files() -> list[Path]:
    files: list[Path] = []
    for entry in _mypy_config()["files"]:
        path = ROOT / entry
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def _aws_cdk_modules(tree: ast.AST) -> set[str]:
    """``aws_cdk`` modules a module imports: ``from aws_cdk import aws_iam`` names a module."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "aws_cdk"}
        elif isinstance(node, ast.ImportFrom) and node.module == "aws_cdk":
            for alias in node.names:
                is_module = (AWS_CDK / alias.name / "__init__.py").is_file()
                found.add(f"aws_cdk.{alias.name}" if is_module else "aws_cdk")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aws_cdk."):
            found.add(node.module or "")
    return found


def _read_in_full() -> set[str]:
    return {
        module
        for override in _mypy_config()["overrides"]
        if override.get("follow_imports") == "normal"
        for module in override["module"]
    }


def test_every_aws_cdk_module_our_code_imports_is_read_in_full():
    imported = set().union(*(_aws_cdk_modules(ast.parse(f.read_text())) for f in _checked_files()))
    assert imported, "found no aws_cdk import: the scan is broken"
    assert sorted(imported - _read_in_full()) == [], (
        "add these to the follow_imports = 'normal' list in pyproject.toml"
    )


def test_the_import_scan_sees_every_form():
    tree = ast.parse(
        "import aws_cdk.aws_kms\n"
        "from aws_cdk import Stack, aws_iam as iam\n"
        "from aws_cdk.aws_eks_v2 import Cluster\n"
    )
    assert _aws_cdk_modules(tree) == {
        "aws_cdk",
        "aws_cdk.aws_iam",
        "aws_cdk.aws_kms",
        "aws_cdk.aws_eks_v2",
    }


PROBE = """\
from aws_cdk import Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_sagemaker as sagemaker


def build(stack: Stack) -> None:
    ec2.Vpc(stack, "Vpc", max_azs="two")
    sagemaker.CfnEndpoint(stack, "Endpoint", endpoint_config_name=3)
    seconds: int = Duration.minutes(1)
"""


def test_mypy_with_the_project_s_settings_checks_calls_into_aws_cdk(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), str(probe)],
        cwd=ROOT,  # the gate's own cache: make test has just filled it
        capture_output=True,
        text=True,
    )
    lines = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in lines] == ["7", "8", "9"], done.stdout + done.stderr

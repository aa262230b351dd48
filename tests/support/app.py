"""The test app: the reference app's context, minus what makes snapshots unstable."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# jsii runs the CDK on the first `node` on PATH: use the virtualenv's supported Node.js.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
# The suite's own synths skip aws-cdk-lib's built-in CloudFormation validation (a WASM engine:
# about 3 s of CPU to start, then time per template, on every synth). The jsii Node.js process
# inherits this variable from here (before aws_cdk loads) and reads it at each synth
# (core/lib/private/synthesis-validation.js). The validation runs instead, with it on, on the
# reference app in a process of its own (tests/reference/test_builtin_validation.py, which also
# fails on warnings) and on the README's examples and the integration apps (run as processes);
# the suite's templates are checked against the real schemas by cfn-lint where tests lint them.
# Users' synths keep it on, and so does `CDK_VALIDATION=true python -m pytest`.
os.environ.setdefault("CDK_VALIDATION", "false")

from aws_cdk import App  # noqa: E402

from cdk_llm_serving import testing  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"


def project_context() -> dict:
    """The feature flags and settings of cdk.json, so tests synthesize what `cdk synth` does."""
    return testing.read_context(ROOT / "cdk.json")


def new_app(outdir: str | None = None, **context: object) -> App:
    """An app like the reference one, minus what makes snapshots unstable (``testing.new_app``).

    As ``make synth``, it lets the reference app synthesize its placeholder buckets.
    """
    return testing.new_app(
        ROOT / "cdk.json",
        context={"llm-serving:allow-placeholders": True, **context},
        outdir=outdir,
    )

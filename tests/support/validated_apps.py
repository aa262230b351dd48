"""Run by ``tests.support.builtin_validation.synthesize`` with ``CDK_VALIDATION=true``: the
reference app (cdk-nag packs included) into ``OUTDIR/reference``, and one queue whose retention
CloudFormation refuses into ``OUTDIR/broken`` (errors downgraded to report warnings there)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.support.app import new_app  # isort: skip  (Node.js on PATH before aws_cdk loads)
from aws_cdk import CfnResource, Stack

from cdk_llm_serving.testing.checks import add_nag_packs
from stacks import add_reference_stacks
from stacks.hipaa_review import REFERENCE_NAG_PACKS
from tests.support.builtin_validation import BROKEN_RETENTION


def main(outdir: Path) -> None:
    assert os.environ.get("CDK_VALIDATION") == "true", "run with CDK_VALIDATION=true"
    app = new_app(outdir=str(outdir / "reference"))
    add_reference_stacks(app)
    add_nag_packs(app, REFERENCE_NAG_PACKS)
    app.synth()
    broken = new_app(
        outdir=str(outdir / "broken"), **{"@aws-cdk/core:validateAgainstDefaultRules": False}
    )
    CfnResource(
        Stack(broken, "Broken"),
        "Queue",
        type="AWS::SQS::Queue",
        properties={"MessageRetentionPeriod": BROKEN_RETENTION},
    )
    broken.synth()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

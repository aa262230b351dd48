"""The project's own set-up: feature flags, Node.js, cdk-nag wiring."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from aws_cdk import Validations
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks

from tests.support.builders import new_stack


def test_every_feature_flag_is_set_to_its_recommended_value(reference_assembly):
    """What the CLI reads to print "feature flags are not configured"."""
    manifest = json.loads((Path(reference_assembly.directory) / "manifest.json").read_text())
    report = next(
        a for a in manifest["artifacts"].values() if a["type"] == "cdk:feature-flag-report"
    )
    unsettled = []
    for name, flag in report["properties"]["flags"].items():
        if "recommendedValue" not in flag:
            continue
        # Unset flags behave like `unconfiguredBehavesLike.v2`, or false when that is absent.
        effective = flag.get("userValue", flag.get("unconfiguredBehavesLike", {}).get("v2", False))
        if effective != flag["recommendedValue"]:
            unsettled.append(name)
    assert not unsettled


def test_jsii_runs_on_a_supported_node():
    node = shutil.which("node")
    assert node is not None
    major = int(
        subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
        .stdout.strip()
        .lstrip("v")
        .split(".")[0]
    )
    assert major in (22, 24), f"{node} is Node.js {major}; jsii needs 22 or 24"


def test_cdk_nag_fails_synth_on_an_unacknowledged_finding():
    """So a clean reference synth means something: a wildcard policy stops it."""
    stack = new_stack("Nag")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:*"], resources=["*"]))
    app = stack.node.root
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(
        Exception, match=r"ValidationFailed(.|\n)*AwsSolutions-IAM5\[Action::s3:\*\]"
    ):
        app.synth()  # type: ignore[attr-defined]

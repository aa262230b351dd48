"""``cdk_llm_serving.testing``: what it gives users to test their stacks, and that it can fail."""

from __future__ import annotations

import json

import pytest
from aws_cdk import CfnResource, Stack
from aws_cdk import aws_iam as iam

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.testing import mask_asset_hashes, new_app, read_context, template_of
from cdk_llm_serving.testing.checks import checked_template
from tests.support.doc_snippets import CONSUMER_CDK_JSON

FLAG = "@aws-cdk/aws-iam:minimizePolicies"


def test_new_app_takes_the_cdk_json_context_then_overrides(tmp_path):
    app = new_app(CONSUMER_CDK_JSON, context={"mine": "yes"})
    assert app.node.try_get_context(FLAG) is True
    assert app.node.try_get_context("mine") == "yes"
    assert new_app().node.try_get_context(FLAG) is None
    bad = tmp_path / "cdk.json"
    bad.write_text(json.dumps({"context": ["not", "an", "object"]}))
    with pytest.raises(ConfigurationError, match="context = 'list': must be an object"):
        read_context(bad)


def test_template_of_leaves_out_version_metadata_and_the_bootstrap_rule():
    stack = Stack(new_app(CONSUMER_CDK_JSON), "Plain")
    iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    template = template_of(stack)
    assert "Rules" not in template and "Parameters" not in template
    assert [r["Type"] for r in template["Resources"].values()] == ["AWS::IAM::Role"]


def test_mask_asset_hashes_in_keys_and_values():
    digest = "0123456789abcdef" * 4
    masked = mask_asset_hashes({f"asset.{digest}": [f"s3://bucket/{digest}.zip", 3]})
    assert masked == {"asset.<asset-hash>": ["s3://bucket/<asset-hash>.zip", 3]}


def test_checked_template_fails_on_a_nag_finding():
    stack = Stack(new_app(CONSUMER_CDK_JSON), "Nag")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:*"], resources=["*"]))
    with pytest.raises(Exception, match=r"AwsSolutions-IAM5\[Action::s3:\*\]"):
        checked_template(stack)


def test_checked_template_fails_on_a_cfn_lint_error():
    # No flags: with @aws-cdk/core:validateAgainstDefaultRules the CDK itself refuses this first.
    stack = Stack(new_app(), "Lint")
    CfnResource(stack, "Bad", type="AWS::SageMaker::Endpoint", properties={"EndpointName": "x"})
    with pytest.raises(AssertionError, match="cfn-lint on Lint:\n.*EndpointConfigName"):
        checked_template(stack, nag_packs=())

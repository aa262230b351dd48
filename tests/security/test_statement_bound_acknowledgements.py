"""No acknowledgement a new wildcard can hide behind.

cdk-nag's ``AwsSolutions-IAM5`` names a finding by resource only (``Resource::*``), so one
reasoned ``*`` on a policy used to hide any later statement on ``*`` in it. The app's packs
now include ``WildcardStatements``: one finding per (action, resource) pair, acknowledged
only for the pairs a construct reasons about. Here, as a reviewer would, one statement with
an action on ``"*"`` goes into every IAM policy the reference app (and each documented
variant) creates, and into every role's own policy; one synthesis per variant must report
that statement on each of them. Measured: 1.0-1.5 s per variant (one synth, the plugin
only: cdk-nag's packs, which can only add findings, run on the unmutated variants in
``test_reference_variants``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import CfnResource, Stack, Validations
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from cdk_llm_serving._cdk.nag import (
    STATEMENT_PLUGIN,
    WildcardStatements,
    statement_finding,
    wildcard_findings,
)
from stacks import add_reference_stacks
from stacks.hipaa_review import REFERENCE_NAG_PACKS
from tests.support.app import new_app
from tests.support.reference_variants import VARIANTS

#: The reviewer's statement: an action no construct grants, on every resource.
INJECTED_ACTION = "ssm:GetParameter"
RULE = statement_finding(INJECTED_ACTION, "*")


def _injected() -> iam.PolicyStatement:
    return iam.PolicyStatement(actions=[INJECTED_ACTION], resources=["*"])


def _inject_everywhere(app: IConstruct) -> set[str]:
    """Add the statement to every IAM policy and every role of ``app``; the construct paths
    of the policy resources that must now report it."""
    expected: set[str] = set()
    for node in app.node.find_all():
        if isinstance(node, (iam.CfnPolicy, iam.CfnManagedPolicy)):
            parent = node.node.scope
            assert isinstance(parent, (iam.Policy, iam.ManagedPolicy)), node.node.path
            parent.add_statements(_injected())
            expected.add(node.node.path)
        elif isinstance(node, CfnResource) and node.cfn_resource_type == "AWS::IAM::Role":
            provider = node.node.scope
            if isinstance(node, iam.CfnRole):
                continue  # its L2 role below
            # aws-cdk-lib's CustomResourceProvider keeps its role's policy inline.
            assert hasattr(provider, "add_to_role_policy"), node.node.path
            provider.add_to_role_policy(  # type: ignore[union-attr]
                {"Effect": "Allow", "Action": INJECTED_ACTION, "Resource": "*"}
            )
            expected.add(node.node.path)
    for node in app.node.find_all():
        if isinstance(node, iam.Role):
            node.add_to_principal_policy(_injected())
            default = node.node.try_find_child("DefaultPolicy")
            assert default is not None, node.node.path
            expected.add(f"{default.node.path}/Resource")
    return expected


def _reported(outdir: Path, rule: str) -> set[str]:
    """Construct paths ``WildcardStatements`` reported, unsuppressed, under ``rule``."""
    report = json.loads((outdir / "validation-report.json").read_text())
    (plugin,) = [r for r in report["pluginReports"] if r["pluginName"] == STATEMENT_PLUGIN]
    return {
        construct["constructPath"]
        for violation in plugin["violations"]
        if violation["ruleName"] == rule
        for construct in violation["violatingConstructs"]
    }


def _synth_with_plugin(app) -> None:
    Validations.of(app).add_plugins(WildcardStatements(app))
    app.synth()


@pytest.mark.parametrize("variant", ["reference", *sorted(VARIANTS)])
def test_a_new_wildcard_statement_fails_synth_in_every_policy(variant, tmp_path):
    app = new_app(outdir=str(tmp_path), **VARIANTS.get(variant, {}))
    add_reference_stacks(app)
    expected = _inject_everywhere(app)
    assert len(expected) > 20  # every policy of both stacks, not a handful
    with pytest.raises(Exception, match=r"ValidationFailed"):
        _synth_with_plugin(app)
    assert expected - _reported(tmp_path, RULE) == set()


def test_the_plugin_is_one_of_the_app_s_packs():
    assert WildcardStatements in REFERENCE_NAG_PACKS


def test_an_acknowledged_wildcard_does_not_cover_another_action_on_it(tmp_path):
    """The old hole: ``Resource::*`` acknowledged for one action covered every action."""
    from cdk_llm_serving._cdk.nag import acknowledge_wildcard_resources

    app = new_app(outdir=str(tmp_path))
    stack = Stack(app, "S")
    role = iam.Role(stack, "R", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    policy = iam.ManagedPolicy(
        stack,
        "P",
        roles=[role],
        statements=[iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"])],
    )
    acknowledge_wildcard_resources(
        policy, ["*"], "no resource type", actions=["ecr:GetAuthorizationToken"]
    )
    app.synth()  # the reasoned statement alone passes
    app2 = new_app(outdir=str(tmp_path / "two"))
    stack2 = Stack(app2, "S")
    role2 = iam.Role(stack2, "R", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    policy2 = iam.ManagedPolicy(
        stack2,
        "P",
        roles=[role2],
        statements=[iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"])],
    )
    acknowledge_wildcard_resources(
        policy2, ["*"], "no resource type", actions=["ecr:GetAuthorizationToken"]
    )
    policy2.add_statements(_injected())
    with pytest.raises(Exception, match=r"ValidationFailed"):
        _synth_with_plugin(app2)
    assert _reported(tmp_path / "two", RULE) == {"S/P/Resource"}


def test_findings_are_pairs_of_action_and_resource_with_a_wildcard():
    template = {
        "Resources": {
            "P": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "PolicyDocument": {
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": ["s3:GetObject", "s3:List*"],
                                "Resource": [
                                    "arn:aws:s3:::b",
                                    {"Fn::Join": ["", [{"Fn::GetAtt": ["B", "Arn"]}, "/*"]]},
                                ],
                            },
                            {"Effect": "Deny", "Action": "*", "Resource": "*"},
                            {"Effect": "Allow", "NotAction": "iam:*", "Resource": "arn:x"},
                        ]
                    }
                },
            }
        }
    }
    assert wildcard_findings(template) == {
        "P": [
            statement_finding("s3:GetObject", "<B.Arn>/*"),
            statement_finding("s3:List*", "arn:aws:s3:::b"),
            statement_finding("s3:List*", "<B.Arn>/*"),
            statement_finding("*", "arn:x"),
        ]
    }


def test_without_actions_the_policy_s_actions_at_that_time_are_bound(tmp_path):
    """Code that names no actions binds what the policy holds when it acknowledges."""
    from cdk_llm_serving._cdk.nag import acknowledge_wildcard_resources

    app = new_app(outdir=str(tmp_path))
    stack = Stack(app, "S")
    role = iam.Role(stack, "R", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    policy = iam.ManagedPolicy(
        stack,
        "P",
        roles=[role],
        statements=[iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"])],
    )
    acknowledge_wildcard_resources(policy, ["*"], "no resource type")
    policy.add_statements(_injected())
    with pytest.raises(Exception, match=r"ValidationFailed"):
        _synth_with_plugin(app)
    assert _reported(tmp_path, RULE) == {"S/P/Resource"}
    assert _reported(tmp_path, statement_finding("ecr:GetAuthorizationToken", "*")) == set()

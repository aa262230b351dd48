"""Service trusts and service key grants of the reference app: bound to this account's
resources, or cited as unsupported. The variants: ``test_reference_variants``."""

from __future__ import annotations

import copy

from tests.support.service_trusts import UNCONDITIONED, service_grants, unexplained
from tests.support.template_helpers import resources_of_type


def test_every_reference_service_grant_is_bound_or_explained(reference_templates):
    for name, template in reference_templates.items():
        assert unexplained(template) == [], name


def test_every_explanation_still_matches_a_grant(reference_templates, inference_operator_app):
    """An entry no trust needs would excuse a later one: each names a grant of the app."""
    templates = [*reference_templates.values()]
    templates += [s.template for s in inference_operator_app[1].stacks]
    seen = {(g.kind, g.service, g.name) for t in templates for g in service_grants(t)}
    # The autoscaler role exists only with KEDA's node autoscaling (test_reference_variants).
    stale = (
        set(UNCONDITIONED)
        - seen
        - {("trust", "hyperpod.sagemaker.amazonaws.com", "HyperPodAutoscalerRole")}
    )
    assert stale == set()


def test_the_flow_log_and_waiter_roles_are_bound(reference_templates):
    """Flow logs (flow-logs-iam-role.html) and Step Functions (procedure-create-iam-role.html)
    document aws:SourceAccount and aws:SourceArn on their roles' trust."""
    hyperpod = reference_templates["ReferenceMoeHyperPod"]
    grants = {g.service: g for g in service_grants(hyperpod)}
    for service, arn in (
        ("vpc-flow-logs.amazonaws.com", ":vpc-flow-log/*"),
        ("states.amazonaws.com", ":stateMachine:*"),
    ):
        condition = grants[service].condition
        assert condition["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        assert condition["ArnLike"]["aws:SourceArn"]["Fn::Join"][1][-1] == arn


def test_a_new_unconditioned_trust_or_key_grant_fails(reference_templates):
    """The check can fail: a role another construct adds, a key statement, a dropped condition."""
    template = copy.deepcopy(reference_templates["ReferenceMoeHyperPod"])
    resources = template["Resources"]
    resources["NewRoleABCDEF12"] = {
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": {
                "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}]
            }
        },
    }
    key_id = sorted(resources_of_type(template, "AWS::KMS::Key"))[0]
    resources[key_id]["Properties"]["KeyPolicy"]["Statement"].append(
        {"Effect": "Allow", "Principal": {"Service": ["logs.amazonaws.com"]}, "Action": "kms:*"}
    )
    flow_log_role = next(
        g.logical_id for g in service_grants(template) if g.service == "vpc-flow-logs.amazonaws.com"
    )
    del resources[flow_log_role]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0][
        "Condition"
    ]
    assert unexplained(template) == [
        f"key logs.amazonaws.com on {key_id}",
        "trust lambda.amazonaws.com on NewRoleABCDEF12",
        f"trust vpc-flow-logs.amazonaws.com on {flow_log_role}",
    ]

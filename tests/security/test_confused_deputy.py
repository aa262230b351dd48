"""Confused-deputy conditions on service trusts, where AWS documents them."""

from __future__ import annotations

from tests.support.builders import new_stack, serving_model, template_of
from tests.support.template_helpers import resources_of_type


def _trust(template: dict, role_id_prefix: str) -> list[dict]:
    (role,) = [
        r
        for key, r in resources_of_type(template, "AWS::IAM::Role").items()
        if key.startswith(role_id_prefix)
    ]
    return role["Properties"]["AssumeRolePolicyDocument"]["Statement"]


def test_the_model_role_trusts_only_this_account_s_sagemaker_in_this_region():
    """SageMaker inference's documented trust condition (security-confused-deputy-prevention)."""
    stack = new_stack()
    serving_model(stack)
    (statement,) = _trust(template_of(stack), "ModelRole")
    assert statement["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    source = statement["Condition"]["ArnLike"]["aws:SourceArn"]
    # The stack's Region is known (us-east-1), so is its partition; the account is a token.
    assert source == {
        "Fn::Join": ["", ["arn:aws:sagemaker:us-east-1:", {"Ref": "AWS::AccountId"}, ":*"]]
    }


def test_the_reference_models_and_the_hyperpod_roles(reference_templates):
    """Every role SageMaker inference assumes carries the condition; HyperPod's do not (not
    documented for HyperPod: a key the service does not send would break it)."""
    pool = reference_templates["GptOss20bPoolEndpoint"]
    sagemaker_roles = [
        r
        for r in resources_of_type(pool, "AWS::IAM::Role").values()
        if {"Service": "sagemaker.amazonaws.com"}
        in [s["Principal"] for s in r["Properties"]["AssumeRolePolicyDocument"]["Statement"]]
    ]
    assert len(sagemaker_roles) == 3  # one per model
    for role in sagemaker_roles:
        (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert "aws:SourceArn" in statement["Condition"]["ArnLike"]
    hyperpod = reference_templates["ReferenceMoeHyperPod"]
    (node_trust,) = _trust(hyperpod, "HyperPodExecutionRole")
    assert "Condition" not in node_trust

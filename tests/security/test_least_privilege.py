"""Least privilege that stays least: named policies, precise acknowledgements, scoped trust."""

from __future__ import annotations

import pytest
from aws_cdk import Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from cdk_nag import AwsSolutionsChecks

from cdk_llm_serving import ModelData
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from tests.support.builders import new_stack, pool_endpoint, serving_model, template_of
from tests.support.hyperpod import deepseek_service, hyperpod_cluster
from tests.support.template_helpers import actions_of, policy_statements, resources_of_type

WILDCARD_READ = iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"])
IAM5_STAR = r"ValidationFailed(.|\n)*AwsSolutions-IAM5\[Resource::\*\]"


def _synth_with_nag(stack: Stack) -> None:
    app = stack.node.root
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # type: ignore[attr-defined]


def _model_role(stack: Stack) -> iam.IRole:
    return serving_model(stack).role


def _node_role(stack: Stack) -> iam.IRole:
    return hyperpod_cluster(stack).execution_role


@pytest.mark.parametrize("role_of", [_model_role, _node_role], ids=["model role", "node role"])
def test_a_new_wildcard_on_a_role_is_reported(role_of):
    """The role's own wildcards are acknowledged on their policy only, not on the role."""
    stack = new_stack()
    role_of(stack).add_to_principal_policy(WILDCARD_READ)
    with pytest.raises(Exception, match=IAM5_STAR):
        _synth_with_nag(stack)


def test_model_grants_live_in_one_named_managed_policy():
    stack = new_stack()
    model = serving_model(stack)
    template = template_of(stack)
    role_id = stack.get_logical_id(model.role.node.default_child)  # type: ignore[arg-type]
    assert not [
        p
        for p in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    (managed,) = [
        key
        for key, p in resources_of_type(template, "AWS::IAM::ManagedPolicy").items()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    assert managed.startswith("ModelExecutionRolePolicy")
    model_resource = template["Resources"][stack.get_logical_id(model.cfn_model)]
    assert managed in model_resource["DependsOn"]  # SageMaker checks the role at creation


def test_weight_and_key_reads_require_the_owning_account():
    stack = new_stack()
    key = kms.Key.from_key_arn(
        stack, "Key", "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    )
    model = serving_model(
        stack,
        model_data=ModelData.from_s3_uri(
            "s3://weights-bucket/model/", encryption_key=key, bucket_account="111122223333"
        ),
    )
    template = template_of(stack)
    role_id = stack.get_logical_id(model.role.node.default_child)  # type: ignore[arg-type]
    statements = policy_statements(template, role_id)
    reads = [
        s
        for s in statements
        if {"s3:GetObject", "s3:ListBucket", "kms:Decrypt"} & set(actions_of(s))
    ]
    assert len(reads) == 3
    for statement in reads:
        assert statement["Condition"]["StringEquals"] == {"aws:ResourceAccount": "111122223333"}


def test_weight_reads_default_to_the_deploying_account():
    stack = new_stack()
    model = serving_model(stack)
    template = template_of(stack)
    role_id = stack.get_logical_id(model.role.node.default_child)  # type: ignore[arg-type]
    get = next(s for s in policy_statements(template, role_id) if "s3:GetObject" in actions_of(s))
    assert get["Condition"]["StringEquals"] == {"aws:ResourceAccount": {"Ref": "AWS::AccountId"}}


def _caller(stack: Stack) -> iam.Role:
    return iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())


def test_grant_invoke_bearer_token_carries_the_resource_account_condition():
    stack = new_stack()
    endpoint = pool_endpoint(stack)
    role = _caller(stack)
    endpoint.grant_invoke(role)
    template = template_of(stack)
    role_id = stack.get_logical_id(role.node.default_child)  # type: ignore[arg-type]
    bearer = next(
        s
        for s in policy_statements(template, role_id)
        if "sagemaker:CallWithBearerToken" in actions_of(s)
    )
    assert bearer["Resource"] == "*"
    assert bearer["Condition"] == {
        "StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}
    }


def test_acknowledge_invoke_grant_acknowledges_only_the_bearer_token_statement():
    stack = new_stack()
    endpoint = pool_endpoint(stack)
    role = _caller(stack)
    endpoint.grant_invoke(role)
    endpoint.acknowledge_invoke_grant(role)
    _synth_with_nag(stack)  # no finding left on the caller

    stack = new_stack()
    endpoint = pool_endpoint(stack)
    role = _caller(stack)
    endpoint.grant_invoke(role)
    endpoint.acknowledge_invoke_grant(role)
    role.add_to_policy(WILDCARD_READ)
    with pytest.raises(Exception, match=IAM5_STAR):
        _synth_with_nag(stack)


def test_without_the_acknowledgement_grant_invoke_is_reported():
    stack = new_stack()
    pool_endpoint(stack).grant_invoke(_caller(stack))
    with pytest.raises(Exception, match=IAM5_STAR):
        _synth_with_nag(stack)


def test_pod_identity_roles_trust_one_service_account_of_one_cluster():
    stack = new_stack("Stream")
    cluster = hyperpod_cluster(stack)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    deepseek_service(
        stack, cluster, addons, weights=ModelData.from_s3_uri("s3://weights-bucket/ds3/")
    )
    addons.enable_keda()
    template = template_of(stack)
    associations = resources_of_type(template, "AWS::EKS::PodIdentityAssociation")
    assert len(associations) == 2  # the weights streamer's and KEDA's
    for association in associations.values():
        props = association["Properties"]
        role = template["Resources"][props["RoleArn"]["Fn::GetAtt"][0]]
        (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
        conditions = statement["Condition"]["StringEquals"]
        assert conditions["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
        assert conditions["aws:RequestTag/kubernetes-namespace"] == props["Namespace"]
        assert conditions["aws:RequestTag/kubernetes-service-account"] == props["ServiceAccount"]
        assert conditions["aws:RequestTag/eks-cluster-arn"] == {
            "Fn::GetAtt": [props["ClusterName"]["Ref"], "Arn"]
        }

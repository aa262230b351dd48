"""ServingModel: container, weights, served name, role scope."""

from __future__ import annotations

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns

from cdk_llm_serving import (
    AsyncInference,
    ConfigurationError,
    ContainerImage,
    ModelData,
    ServingModel,
)
from tests.support.builders import IMAGE, new_stack, serving_model, template_of
from tests.support.template_helpers import actions_of, only_resource, policy_statements


def test_served_model_name_reaches_the_vllm_container():
    stack = new_stack()
    model = serving_model(
        stack, served_model_name="gpt-oss-20b-int4", environment={"SM_VLLM_MAX_MODEL_LEN": "8192"}
    )
    env = stack.resolve(model.cfn_model.primary_container)["environment"]
    assert env == {"SM_VLLM_MAX_MODEL_LEN": "8192", "SM_VLLM_SERVED_MODEL_NAME": "gpt-oss-20b-int4"}


def test_served_model_name_variable_can_be_another_servers():
    stack = new_stack()
    model = serving_model(
        stack, served_model_name="m", served_model_name_variable="SERVED_MODEL_NAME"
    )
    assert stack.resolve(model.cfn_model.primary_container)["environment"] == {
        "SERVED_MODEL_NAME": "m"
    }


def test_conflicting_served_model_name_is_rejected():
    with pytest.raises(ConfigurationError) as caught:
        serving_model(
            new_stack(), served_model_name="a", environment={"SM_VLLM_SERVED_MODEL_NAME": "b"}
        )
    (problem,) = caught.value.problems
    assert (
        str(problem)
        == "environment['SM_VLLM_SERVED_MODEL_NAME'] = 'b': conflicts with served_model_name='a'; set one of them"
    )


def test_bad_image_weights_and_environment_are_reported_together():
    with pytest.raises(ConfigurationError) as caught:
        ServingModel(
            new_stack(),
            "Model",
            image=ContainerImage.from_ecr_uri("docker.io/vllm/vllm-openai:latest"),
            model_data=ModelData.from_s3_uri("https://example.com/weights"),
            environment={"1BAD": "x"},
        )
    assert [p.property for p in caught.value.problems] == [
        "image",
        "model_data",
        "environment['1BAD']",
    ]
    assert "private Amazon ECR image URI" in caught.value.problems[0].allowed


def test_a_whole_bucket_is_never_granted():
    with pytest.raises(ConfigurationError) as caught:
        serving_model(new_stack(), model_data=ModelData.from_s3_uri("s3://weights-bucket/"))
    assert caught.value.problems[0].property == "model_data.prefix"


@pytest.mark.parametrize(
    ("uri", "allowed"),
    [
        ("s3://w/gpt-oss-20b/", "a bucket name must be 3 to 63 characters long, not 1"),
        (f"s3://{'w' * 64}/gpt-oss-20b/", "a bucket name must be 3 to 63 characters long, not 64"),
        ("s3://My_Weights/gpt-oss-20b/", "a bucket name may hold only lowercase letters"),
    ],
)
def test_a_bad_bucket_name_is_blamed_not_the_uri_form(uri, allowed):
    """S3's naming rules: docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html."""
    with pytest.raises(ConfigurationError) as caught:
        serving_model(new_stack(), model_data=ModelData.from_s3_uri(uri))
    [problem] = caught.value.problems
    assert problem.property == "model_data.bucket_name"
    assert problem.allowed.startswith(allowed)


def test_uncompressed_s3_prefix_and_network_isolation():
    stack = new_stack()
    serving_model(stack, model_data=ModelData.from_s3_uri("s3://weights-bucket/models/gpt-oss-20b"))
    _, model = only_resource(template_of(stack), "AWS::SageMaker::Model")
    assert model["Properties"]["PrimaryContainer"]["ModelDataSource"] == {
        "S3DataSource": {
            "CompressionType": "None",
            "S3DataType": "S3Prefix",
            "S3Uri": "s3://weights-bucket/models/gpt-oss-20b/",
        }
    }
    assert model["Properties"]["EnableNetworkIsolation"] is True
    assert model["Properties"]["PrimaryContainer"]["Image"] == IMAGE


def test_no_weights_means_no_s3_access():
    stack = new_stack()
    serving_model(stack, model_data=None)
    template = template_of(stack)
    model_id, model = only_resource(template, "AWS::SageMaker::Model")
    role_id = model["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    assert not [
        a
        for s in policy_statements(template, role_id)
        for a in actions_of(s)
        if a.startswith("s3:")
    ]
    assert "ModelDataSource" not in model["Properties"]["PrimaryContainer"]


def test_repository_image_grants_pull_on_that_repository():
    stack = new_stack()
    repository = ecr.Repository(stack, "Repo")
    serving_model(stack, image=ContainerImage.from_repository(repository, "v1"))
    template = template_of(stack)
    model_id, model = only_resource(template, "AWS::SageMaker::Model")
    role_id = model["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    pull = next(
        s for s in policy_statements(template, role_id) if "ecr:BatchGetImage" in actions_of(s)
    )
    repo_id, _ = only_resource(template, "AWS::ECR::Repository")
    assert pull["Resource"] == {"Fn::GetAtt": [repo_id, "Arn"]}


def test_vpc_config_creates_a_security_group_and_eni_permissions():
    stack = new_stack()
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    serving_model(stack, vpc=vpc)
    template = template_of(stack)
    model_id, model = only_resource(template, "AWS::SageMaker::Model")
    vpc_config = model["Properties"]["VpcConfig"]
    assert len(vpc_config["Subnets"]) == 2 and len(vpc_config["SecurityGroupIds"]) == 1
    role_id = model["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    assert any(
        "ec2:CreateNetworkInterface" in actions_of(s) for s in policy_statements(template, role_id)
    )


def test_default_child_is_the_l1():
    stack = new_stack()
    model = serving_model(stack)
    assert model.node.default_child is model.cfn_model
    assert isinstance(model.role, iam.Role)


def _client(stack) -> iam.Role:
    return iam.Role(stack, "Client", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))


def test_grant_artifacts_gives_a_grantee_the_image_and_the_weights():
    stack = new_stack()
    model = serving_model(stack)
    client = _client(stack)
    grant = model.grant_artifacts(client)
    assert isinstance(grant, iam.Grant) and grant.success
    statements = policy_statements(
        template_of(stack), stack.get_logical_id(client.node.default_child)
    )
    actions = {action for s in statements for action in actions_of(s)}
    assert {"ecr:BatchGetImage", "ecr:GetAuthorizationToken", "s3:GetObject", "s3:ListBucket"} <= (
        actions
    )
    (listing,) = [s for s in statements if "s3:ListBucket" in actions_of(s)]
    assert listing["Condition"]["StringLike"]["s3:prefix"] == ["model/", "model/*"]


def test_a_grantee_gets_exactly_the_artifact_statements_the_model_s_own_role_has():
    """One set of statements (``role_grants``) behind both: the model's role and a grantee."""
    stack = new_stack()
    model = serving_model(stack)
    client = _client(stack)
    model.grant_artifacts(client)
    template = template_of(stack)

    def artifact_statements(role) -> list[dict]:
        found = policy_statements(template, stack.get_logical_id(role.node.default_child))
        keep = ("ecr:", "s3:GetObject", "s3:ListBucket", "kms:Decrypt")
        return sorted(
            (s for s in found if any(a.startswith(keep) for a in actions_of(s))), key=repr
        )

    assert artifact_statements(client) == artifact_statements(model.role)
    assert len(artifact_statements(client)) == 4


def test_async_inference_grants_results_to_a_grantee():
    stack = new_stack()
    results = AsyncInference(
        output_bucket=s3.Bucket(stack, "Out"), success_topic=sns.Topic(stack, "Done")
    )
    client = _client(stack)
    assert isinstance(results.grant_write_results(client), iam.Grant)
    statements = policy_statements(
        template_of(stack), stack.get_logical_id(client.node.default_child)
    )
    actions = {action for s in statements for action in actions_of(s)}
    assert {"s3:PutObject", "sns:Publish"} <= actions

"""A resource given by ARN from another region, partition or service is refused where
it is used (``_cdk/arns.py``): the rules on literal ARNs, on tokens, and on a stack without a
literal region; the partitions from botocore's data."""

from __future__ import annotations

import pytest
from aws_cdk import App, Aws, Stack

from cdk_llm_serving._cdk.arns import (
    ACM_CERTIFICATE,
    CLOUDWATCH_ALARM,
    IAM_ROLE,
    KMS_KEY,
    SNS_TOPIC,
    TRAINING_PLAN,
    arn_problems,
    check_arn,
)
from cdk_llm_serving._partitions import partition_of_region
from cdk_llm_serving.errors import Problems

ACCOUNT = "123456789012"
CERT = f"arn:aws:acm:us-west-2:{ACCOUNT}:certificate/0f1e"
PLAN = f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:training-plan/p5-plan"

ROWS = [
    # (case, arn, rule, stack region, expected start of the one problem, or None)
    ("certificate of the stack's region", CERT, ACM_CERTIFICATE, "us-west-2", None),
    ("certificate of another region", CERT, ACM_CERTIFICATE, "us-east-1", "is in us-west-2, but"),
    (
        "certificate of another partition",
        CERT.replace("aws:", "aws-cn:", 1).replace("us-west-2", "cn-north-1"),
        ACM_CERTIFICATE,
        "us-west-2",
        "is in partition aws-cn",
    ),
    ("certificate, stack region unknown", CERT, ACM_CERTIFICATE, None, None),
    (
        "SNS topic given for a training plan",
        f"arn:aws:sns:us-west-2:{ACCOUNT}:alerts",
        TRAINING_PLAN,
        "us-west-2",
        "is an ARN of sns, not of sagemaker",
    ),
    (
        "endpoint given for a training plan",
        f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:endpoint/e",
        TRAINING_PLAN,
        "us-west-2",
        "names a endpoint, not a SageMaker training plan",
    ),
    ("training plan of another region", PLAN, TRAINING_PLAN, "eu-west-1", "is in us-west-2"),
    (
        "GovCloud key in a commercial stack",
        f"arn:aws-us-gov:kms:us-gov-west-1:{ACCOUNT}:key/k",
        KMS_KEY,
        "us-east-1",
        "is in partition aws-us-gov",
    ),
    (
        "alias given for a key",
        f"arn:aws:kms:us-east-1:{ACCOUNT}:alias/k",
        KMS_KEY,
        "us-east-1",
        "names a alias, not a KMS key",
    ),
    (
        "topic of another region",
        f"arn:aws:sns:eu-west-1:{ACCOUNT}:t",
        SNS_TOPIC,
        "us-east-1",
        "is in eu-west-1",
    ),
    (
        "alarm of another region",
        f"arn:aws:cloudwatch:eu-west-1:{ACCOUNT}:alarm:a",
        CLOUDWATCH_ALARM,
        "us-east-1",
        "is in eu-west-1",
    ),
    ("role: global, any region", f"arn:aws:iam::{ACCOUNT}:role/r", IAM_ROLE, "eu-west-1", None),
    (
        "role of another partition",
        f"arn:aws-cn:iam::{ACCOUNT}:role/r",
        IAM_ROLE,
        "eu-west-1",
        "is in partition aws-cn",
    ),
    ("a role name, not an ARN", "MyRole", IAM_ROLE, "eu-west-1", "must be an IAM role's ARN"),
]


@pytest.mark.parametrize(("case", "arn", "rule", "region", "start"), ROWS, ids=[r[0] for r in ROWS])
def test_arn_rule(case, arn, rule, region, start):
    found = arn_problems(arn, rule, region)
    if start is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(start), found


def test_tokens_are_checked_as_far_as_they_are_literal():
    stack = Stack(App(), "S", env={"region": "us-west-2"})
    problems = Problems("x")
    check_arn(
        problems,
        "p",
        f"arn:{Aws.PARTITION}:acm:us-west-2:{ACCOUNT}:certificate/c",
        ACM_CERTIFICATE,
        stack,
    )
    check_arn(problems, "q", Aws.STACK_ID, ACM_CERTIFICATE, stack)
    assert not problems
    check_arn(
        problems,
        "r",
        f"arn:{Aws.PARTITION}:acm:eu-west-1:{ACCOUNT}:certificate/c",
        ACM_CERTIFICATE,
        stack,
    )
    assert [p.property for p in problems.problems()] == [
        "r"
    ]  # the stack's partition, not its region
    check_arn(
        problems, "s", f"arn:{Aws.PARTITION}:sns:us-west-2:{ACCOUNT}:t", ACM_CERTIFICATE, stack
    )
    assert [p.property for p in problems.problems()] == ["r", "s"]


def test_an_environment_agnostic_stack_checks_service_and_type_only():
    stack = Stack(App(), "S")
    problems = Problems("x")
    check_arn(problems, "p", CERT.replace("us-west-2", "eu-west-1"), ACM_CERTIFICATE, stack)
    assert not problems


@pytest.mark.parametrize(
    ("region", "partition"),
    [
        ("us-east-1", "aws"),
        ("cn-north-1", "aws-cn"),
        ("us-gov-west-1", "aws-us-gov"),
        ("eu-central-3", "aws"),
        ("us-isob-east-1", "aws-iso-b"),
        ("moon-1", None),
    ],
)
def test_partition_of_region(region, partition):
    assert partition_of_region(region) == partition


# -- where the constructs use them -----------------------------------------------------------

OTHER_REGION_PLAN = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:training-plan/p5"


def _problems(build) -> dict[str, str]:
    from cdk_llm_serving import ConfigurationError

    try:
        build()
    except ConfigurationError as error:
        return {p.property: p.allowed for p in error.problems}
    return {}


def test_pool_endpoint_refuses_a_reservation_alarm_and_topic_of_another_region():
    from aws_cdk import aws_cloudwatch as cloudwatch
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_s3 as s3
    from aws_cdk import aws_sns as sns

    from cdk_llm_serving import AsyncInference, InstancePool
    from tests.support.builders import new_stack, pool_endpoint

    stack = new_stack("Arns")  # us-east-1
    alarm = cloudwatch.Alarm.from_alarm_arn(
        stack, "A", f"arn:aws:cloudwatch:eu-west-1:{ACCOUNT}:alarm:errors"
    )
    topic = sns.Topic.from_topic_arn(stack, "T", f"arn:aws:sns:eu-west-1:{ACCOUNT}:done")
    found = _problems(
        lambda: pool_endpoint(
            stack,
            pools=[InstancePool("ml.p5.48xlarge")],
            capacity_reservation_arn=OTHER_REGION_PLAN,
            rollback_alarms=[alarm],
            async_inference=AsyncInference(
                output_bucket=s3.Bucket.from_bucket_name(stack, "B", "out"),
                success_topic=topic,
                encryption_key=kms.Key.from_key_arn(
                    stack, "K", f"arn:aws-cn:kms:cn-north-1:{ACCOUNT}:key/1"
                ),
            ),
        )
    )
    for prop in ("capacity_reservation_arn", "rollback_alarms[0]", "async_inference.success_topic"):
        assert found[prop].startswith("is in eu-west-1, but the stack deploys to us-east-1"), found
    assert found["async_inference.encryption_key"].startswith("is in partition aws-cn")


def test_a_model_key_of_another_region_is_refused():
    from aws_cdk import aws_kms as kms

    from cdk_llm_serving import ModelData
    from tests.support.builders import new_stack, serving_model

    stack = new_stack("KeyArn")
    key = kms.Key.from_key_arn(stack, "K", f"arn:aws:kms:us-west-2:{ACCOUNT}:key/1234")
    data = ModelData.from_s3_uri("s3://weights/m/", encryption_key=key)
    found = _problems(lambda: serving_model(stack, model_data=data))
    assert found["model_data.encryption_key"].startswith("is in us-west-2"), found


def test_the_operator_refuses_an_arn_that_is_no_hyperpod_cluster():
    from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
    from cdk_llm_serving.hyperpod.inference_operator import HyperPodInferenceOperator
    from tests.support.builders import new_stack
    from tests.support.hyperpod import imported_cluster

    oidc = f"arn:aws:iam::{ACCOUNT}:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE"
    stack = new_stack("OperatorArn")
    addons = HyperPodServingAddons(
        stack,
        "Addons",
        cluster=imported_cluster(stack, oidc_provider_arn=oidc),
        load_balancer_controller=False,
    )
    found = _problems(
        lambda: HyperPodInferenceOperator.of(
            addons, hyperpod_cluster_arn=f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/abc"
        )
    )
    assert found["hyperpod_cluster_arn"].startswith("is an ARN of eks, not of sagemaker"), found


def test_the_cluster_refuses_admin_roles_of_another_partition_and_plans_of_another_region():
    from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
    from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
    from tests.support.builders import new_stack

    stack = new_stack("ClusterArns")  # us-east-1
    groups = [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu(
            "gpu", "ml.p5en.48xlarge", count=2, training_plan_arn=OTHER_REGION_PLAN
        ),
    ]
    found = _problems(
        lambda: HyperPodEksCluster(
            stack,
            "HyperPod",
            kubernetes_version="1.33",
            instance_groups=groups,
            admin_role_arns=[
                f"arn:aws-us-gov:iam::{ACCOUNT}:role/Admin",
                f"arn:aws:sts::{ACCOUNT}:assumed-role/Admin/me",
            ],
        )
    )
    assert found["admin_role_arns[0]"].startswith("is in partition aws-us-gov"), found
    assert found["admin_role_arns[1]"].startswith("is an ARN of sts, not of iam"), found
    assert found["instance_groups[1].training_plan_arn"].startswith("is in eu-west-1"), found


def test_the_service_refuses_a_certificate_of_another_region():
    from cdk_llm_serving.hyperpod.multi_node_manifests import Exposure
    from tests.support.builders import new_stack
    from tests.support.hyperpod import deepseek_service, small_cluster

    stack = new_stack("CertArn")  # us-east-1
    cluster, addons, store = small_cluster(stack)
    found = _problems(
        lambda: deepseek_service(
            stack, cluster, addons, store, exposure=Exposure(certificate_arn=CERT)
        )
    )
    assert found["exposure.certificate_arn"].startswith("is in us-west-2, but"), found

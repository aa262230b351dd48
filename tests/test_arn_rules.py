"""Issue 31: a resource given by ARN from another region, partition or service is refused where
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

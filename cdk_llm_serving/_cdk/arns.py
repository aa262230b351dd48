"""ARNs checked against where they are used: service, resource type, partition and region (#31).

A construct that takes another resource by ARN (a training plan, a capacity reservation, an ACM
certificate, a KMS key, an SNS topic, an alarm) used to check at most the ARN's shape, so one
from another region, another partition or another service synthesized and failed at deploy
time. ``check_arn`` refuses, at synth, an ARN whose

- **service or resource type** is not what the property takes (an SNS topic's ARN given for a
  training plan);
- **partition** differs from the stack's (a literal stack region decides it through botocore's
  ``partitions.json``; ``_partitions``): no AWS service reaches across partitions;
- **region** differs from the stack's literal region, for the resources each rule says are used
  in their own region only (see ``ArnRule.same_region`` and each rule's ``source``).

An unresolved ARN (a token) or a stack without a literal region is checked as far as the literal
parts allow.
"""

from __future__ import annotations

from dataclasses import dataclass

from constructs import IConstruct

from .._partitions import partition_of_region
from ..errors import Problems
from .stacks import region_of_stack
from .validation import is_unresolved

__all__ = [
    "ACM_CERTIFICATE",
    "CLOUDWATCH_ALARM",
    "HYPERPOD_CLUSTER",
    "IAM_ROLE",
    "KMS_KEY",
    "ML_RESERVATION",
    "SNS_TOPIC",
    "TRAINING_PLAN",
    "ArnRule",
    "arn_problems",
    "check_arn",
]


@dataclass(frozen=True)
class ArnRule:
    """What a property takes by ARN.

    :param what: the resource, as the message names it ("an ACM certificate").
    :param service: the ARN's service field (``acm``).
    :param resource_types: the resource part starts with one of these (``certificate/``);
        empty: any.
    :param same_region: the resource must be in the stack's region (``False`` for global
        services such as IAM, whose ARNs carry no region).
    :param source: why (the AWS page that says so).
    """

    what: str
    service: str
    resource_types: tuple[str, ...]
    same_region: bool
    source: str


#: Training plans reserve capacity in one region for clusters of that region
#: (https://docs.aws.amazon.com/sagemaker/latest/dg/reserve-capacity-with-training-plans.html).
TRAINING_PLAN = ArnRule(
    "a SageMaker training plan",
    "sagemaker",
    ("training-plan/",),
    True,
    "docs.aws.amazon.com/sagemaker/latest/dg/reserve-capacity-with-training-plans.html",
)
#: An endpoint's ML capacity reservation (a training plan or a reservation of its region:
#: botocore's ``MlReservationArn`` admits any ``<type>/`` of sagemaker).
ML_RESERVATION = ArnRule(
    "an ML capacity reservation",
    "sagemaker",
    (),
    True,
    "docs.aws.amazon.com/sagemaker/latest/dg/reserve-capacity-with-training-plans.html",
)
#: "To use a certificate with Elastic Load Balancing for the same site ... you must request or
#: import the certificate in each Region" (https://docs.aws.amazon.com/acm/latest/userguide/acm-regions.html).
ACM_CERTIFICATE = ArnRule(
    "an ACM certificate",
    "acm",
    ("certificate/",),
    True,
    "docs.aws.amazon.com/acm/latest/userguide/acm-regions.html",
)
#: KMS keys are regional; a service encrypts with a key of its own region (multi-Region keys
#: are replicated, each replica with its own region's ARN)
#: (https://docs.aws.amazon.com/kms/latest/developerguide/multi-region-keys-overview.html).
KMS_KEY = ArnRule(
    "a KMS key",
    "kms",
    ("key/",),
    True,
    "docs.aws.amazon.com/kms/latest/developerguide/multi-region-keys-overview.html",
)
#: SNS notifications of an alarm or of asynchronous inference go to a topic of their region
#: (CloudWatch: "The Amazon SNS topic must be in the same Region as the alarm",
#: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Notify_Users_Alarm_Changes.html).
SNS_TOPIC = ArnRule(
    "an SNS topic",
    "sns",
    (),
    True,
    "docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Notify_Users_Alarm_Changes.html",
)
#: An endpoint's rollback alarms are given to SageMaker by name (``AlarmName`` in
#: ``AutoRollbackConfig``), looked up in the endpoint's region
#: (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_Alarm.html).
CLOUDWATCH_ALARM = ArnRule(
    "a CloudWatch alarm",
    "cloudwatch",
    ("alarm:",),
    True,
    "docs.aws.amazon.com/sagemaker/latest/APIReference/API_Alarm.html",
)
#: The inference operator's ``hyperpodClusterArn``: the cluster of its own region.
HYPERPOD_CLUSTER = ArnRule(
    "a HyperPod cluster",
    "sagemaker",
    ("cluster/",),
    True,
    "docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-setup.html",
)
#: IAM is global: a role's ARN has no region, but it has a partition.
IAM_ROLE = ArnRule(
    "an IAM role",
    "iam",
    ("role/",),
    False,
    "docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html",
)


def arn_problems(arn: str, rule: ArnRule, stack_region: str | None) -> list[str]:
    """What is wrong with ``arn`` where ``rule`` applies, for a stack in ``stack_region``
    (``None``: not literal); each a sentence of what is allowed."""
    parts = arn.split(":", 5)
    if len(parts) < 6 or parts[0] != "arn":
        if is_unresolved(arn):  # a token: nothing literal to check
            return []
        return [
            f"must be {rule.what}'s ARN (arn:<partition>:{rule.service}:<region>:<account>:...)"
        ]
    _, partition, service, region, _account, resource = parts
    found: list[str] = []
    if is_unresolved(service):
        pass
    elif service != rule.service:
        found.append(f"is an ARN of {service}, not of {rule.service}: {rule.what} is expected")
    elif (
        rule.resource_types
        and not is_unresolved(kind := resource.split("/", 1)[0].split(":", 1)[0])
        and not resource.startswith(rule.resource_types)
    ):
        found.append(f"names a {kind}, not {rule.what} ({' or '.join(rule.resource_types)}...)")
    expected = partition_of_region(stack_region) if stack_region else None
    if expected and not is_unresolved(partition) and partition != expected:
        found.append(
            f"is in partition {partition}, but the stack deploys to {stack_region} "
            f"(partition {expected}); no service reaches across partitions"
        )
    elif (
        rule.same_region
        and stack_region
        and region
        and not is_unresolved(region)
        and region != stack_region
    ):
        found.append(
            f"is in {region}, but the stack deploys to {stack_region}: {rule.what} is used in "
            f"its own region only ({rule.source})"
        )
    return found


def check_arn(
    problems: Problems, prop: str, arn: str | None, rule: ArnRule, scope: IConstruct
) -> None:
    """Add a problem for each way ``arn`` does not fit ``rule`` in ``scope``'s stack."""
    if arn is None:
        return
    region = region_of_stack(scope)
    for allowed in arn_problems(arn, rule, None if is_unresolved(region) else region):
        problems.add(prop, arn, allowed)

"""ARNs checked against where they are used: service, resource type, partition and region.

An ARN of another service or resource type, of another partition than the stack's (no service
reaches across partitions) or of another region, for resources used in their own region only,
is refused at synth; a token is checked as far as its literal parts allow. Each rule's
``source`` says why (docs/design/errors-and-checks.md, "ARNs").
"""

from __future__ import annotations

from dataclasses import dataclass

from constructs import IConstruct

from .._partitions import partition_of_region
from ..errors import Problems
from .stacks import region_of_stack
from .validation import is_unresolved


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


_TRAINING_PLANS = (
    "docs.aws.amazon.com/sagemaker/latest/dg/reserve-capacity-with-training-plans.html"
)
TRAINING_PLAN = ArnRule(
    "a SageMaker training plan", "sagemaker", ("training-plan/",), True, _TRAINING_PLANS
)
#: A training plan or a reservation of its region (botocore's ``MlReservationArn``: any type).
ML_RESERVATION = ArnRule("an ML capacity reservation", "sagemaker", (), True, _TRAINING_PLANS)
ACM_CERTIFICATE = ArnRule(
    "an ACM certificate",
    "acm",
    ("certificate/",),
    True,
    "docs.aws.amazon.com/acm/latest/userguide/acm-regions.html",
)
KMS_KEY = ArnRule(
    "a KMS key",
    "kms",
    ("key/",),
    True,
    "docs.aws.amazon.com/kms/latest/developerguide/multi-region-keys-overview.html",
)
SNS_TOPIC = ArnRule(
    "an SNS topic",
    "sns",
    (),
    True,
    "docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Notify_Users_Alarm_Changes.html",
)
CLOUDWATCH_ALARM = ArnRule(
    "a CloudWatch alarm",
    "cloudwatch",
    ("alarm:",),
    True,
    "docs.aws.amazon.com/sagemaker/latest/APIReference/API_Alarm.html",
)
HYPERPOD_CLUSTER = ArnRule(
    "a HyperPod cluster",
    "sagemaker",
    ("cluster/",),
    True,
    "docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-setup.html",
)
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

"""An SNS topic for alarm notifications, encrypted with a key the publishing service may use."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct


def encrypted_alarm_topic(
    scope: Construct, *, publisher: str, key_description: str, display_name: str
) -> sns.Topic:
    """Topic ``Alerts`` and key ``AlertsKey`` in ``scope``, both retained (subscriptions survive).

    ``publisher`` may use the key (docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services);
    who may publish is limited on the topic's policy instead of the key's (why:
    docs/design/observability.md, "Alarm topic").
    """
    key = kms.Key(
        scope,
        "AlertsKey",
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.RETAIN,
        description=key_description,
    )
    key.grant(iam.ServicePrincipal(publisher), "kms:GenerateDataKey*", "kms:Decrypt")
    topic = sns.Topic(scope, "Alerts", master_key=key, enforce_ssl=True, display_name=display_name)
    topic.apply_removal_policy(RemovalPolicy.RETAIN)
    return topic

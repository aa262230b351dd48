"""An SNS topic for alarm notifications, encrypted with a key the publishing service may use."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct


def encrypted_alerts_topic(
    scope: Construct, *, publisher: str, key_description: str, display_name: str
) -> sns.Topic:
    """Topic ``Alerts`` and key ``AlertsKey`` in ``scope``, both retained (subscriptions survive).

    A service publishes to an encrypted topic only when the key policy lets its principal use
    the key (docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services).
    The key statement has no ``aws:SourceAccount``/``aws:SourceArn`` condition: SNS's key
    policy for publishing services has none, and no page documents which of those keys
    reach KMS when SNS uses the key for CloudWatch or AMP (a ``kms:CallerAccount`` condition
    is reported to break CloudWatch's publishing). Who may publish is limited on the topic's
    own policy instead (AMP: ``aws:SourceAccount``, ``observability.py``).
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

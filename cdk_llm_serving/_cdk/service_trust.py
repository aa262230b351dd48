"""Confused-deputy conditions (``aws:SourceAccount``, ``aws:SourceArn``) on trusts that
aws-cdk-lib writes for a service (docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html);
each call site cites the service's page that documents the keys it sends.
"""

from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam


def condition_service_trust(role: iam.IRole, service: str, source_arn: str) -> None:
    """Limit ``role``'s trust in ``service`` to this account and ``source_arn`` (``ArnLike``).

    For roles aws-cdk-lib creates with a bare ``ServicePrincipal`` (a flow log's, a provider
    framework's waiter): their trust statement gets the condition through the ``CfnRole``.
    """
    cfn = role.node.default_child
    assert isinstance(cfn, iam.CfnRole), role.node.path
    document = Stack.of(role).resolve(cfn.assume_role_policy_document)
    (index,) = [
        i
        for i, statement in enumerate(document["Statement"])
        if statement.get("Principal") == {"Service": service}
    ]
    cfn.add_property_override(
        f"AssumeRolePolicyDocument.Statement.{index}.Condition",
        {
            "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
            "ArnLike": {"aws:SourceArn": source_arn},
        },
    )

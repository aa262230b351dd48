"""Every service trust and service key grant of a template, and the ones AWS lets us condition.

A role trusted by a service principal, or a KMS key policy statement granting one, should
name the account and resources it acts for (``aws:SourceAccount``/``aws:SourceArn``) or, on
a key, the requests (``kms:EncryptionContext:*``, ``kms:ViaService``): the IAM user guide's
confused-deputy guidance (docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html).
Where the service documents none of them, ``UNCONDITIONED`` names the trust and says why.
A key a service does not send makes the condition fail closed, so nothing is guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Condition keys that bind a service's use of a role or key to this account's resources.
BINDING_KEYS = re.compile(
    r"^(aws:SourceAccount|aws:SourceArn|aws:SourceOwner|kms:ViaService|kms:EncryptionContext:.+"
    # EKS Pod Identity's session tags (docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html,
    # "Setting Conditions": eks-cluster-arn, kubernetes-namespace, kubernetes-service-account).
    # That page documents no aws:SourceAccount/aws:SourceArn; the library's Pod Identity roles
    # also require aws:SourceAccount (_cdk/pod_identity.py), which a user reports working, with
    # an aws:SourceArn on the association ARN breaking Mountpoint's pod-level credentials
    # (awslabs/mountpoint-s3-csi-driver#781). UNCONFIRMED by an AWS page.
    r"|aws:RequestTag/eks-cluster-arn)$"
)

_LAMBDA = (
    "Lambda documents its execution role's trust with no condition "
    "(docs.aws.amazon.com/lambda/latest/dg/lambda-intro-execution-role.html); "
    "aws-cdk-lib writes most of these roles."
)
#: (kind, service, logical id without its 8-character hash) -> why it carries no condition.
UNCONDITIONED: dict[tuple[str, str, str], str] = {
    **{
        ("trust", "lambda.amazonaws.com", name): _LAMBDA
        for name in (
            "AWS679f53fac002430cb0da5b7982bd2287ServiceRole",
            "CdkLlmServingPromQLChartsChartRole",
            "AWSCDKCfnUtilsProviderCustomResourceProviderRole",
            "CustomCDKBucketDeployment8693BB64968944B69AAFB0CC9EB8756CServiceRole",
            "CustomVpcRestrictDefaultSGCustomResourceProviderRole",
            "DashboardWidgetRole",
            "HyperPodEksKubectlProviderHandlerServiceRole",
            "HyperPodEksKubectlProviderframeworkonEventServiceRole",
            "HyperPodNodesReadyHandlerRole",
            "HyperPodNodesReadyProviderframeworkisCompleteServiceRole",
            "HyperPodNodesReadyProviderframeworkonEventServiceRole",
            "HyperPodNodesReadyProviderframeworkonTimeoutServiceRole",
        )
    },
    ("trust", "eks.amazonaws.com", "HyperPodEksRole"): (
        "The EKS cluster role's trust as EKS documents it has no condition "
        "(docs.aws.amazon.com/eks/latest/userguide/cluster-iam-role.html); aws-cdk-lib writes it."
    ),
    ("trust", "sagemaker.amazonaws.com", "HyperPodExecutionRole"): (
        "HyperPod's execution (node) role: SageMaker's confused-deputy page documents the "
        "condition for inference, training and processing, not HyperPod clusters "
        "(security-confused-deputy-prevention.html), and HyperPod's IAM page gives the trust "
        "without one (sagemaker-hyperpod-prerequisites-iam.html; hyperpod/cluster.py)."
    ),
    ("trust", "hyperpod.sagemaker.amazonaws.com", "HyperPodAutoscalerRole"): (
        "HyperPod's Karpenter autoscaler role: AWS's trust policy for it has none and no page "
        "says the autoscaler sends either key (SageMaker's confused-deputy page lists no "
        "HyperPod feature; hyperpod/node_autoscaling.py)."
    ),
    ("key", "cloudwatch.amazonaws.com", "AlertsKey"): (
        "CloudWatch alarms publishing to the encrypted topic: SNS's key policy for AWS "
        "publishers has no condition (sns-key-management.html#compatibility-with-aws-services) "
        "and a kms:CallerAccount condition is reported to break CloudWatch's publishing; who "
        "publishes is limited on the topic (_cdk/alarm_topic.py)."
    ),
    ("key", "aps.amazonaws.com", "ObservabilityAlertsKey"): (
        "Amazon Managed Service for Prometheus's alert manager publishing to the encrypted "
        "topic: as for CloudWatch; the topic's policy requires aws:SourceAccount "
        "(hyperpod/observability.py)."
    ),
}

_HASH = re.compile(r"[0-9A-F]{8}$")


@dataclass(frozen=True)
class ServiceGrant:
    kind: str  # "trust" (a role's AssumeRolePolicyDocument) or "key" (a KMS key policy)
    service: str
    logical_id: str
    condition: Mapping[str, Any]

    @property
    def name(self) -> str:
        return _HASH.sub("", self.logical_id)

    @property
    def bound(self) -> bool:
        return any(BINDING_KEYS.match(k) for keys in self.condition.values() for k in keys)


def service_grants(template: Mapping[str, Any]) -> list[ServiceGrant]:
    """Each (statement, service) of a role trust or key policy that names a service principal."""
    grants = []
    for logical_id, resource in template.get("Resources", {}).items():
        kind, document = {
            "AWS::IAM::Role": ("trust", "AssumeRolePolicyDocument"),
            "AWS::KMS::Key": ("key", "KeyPolicy"),
        }.get(resource["Type"], (None, None))
        if kind is None:
            continue
        for statement in resource["Properties"][document]["Statement"]:
            principal = statement.get("Principal")
            services = principal.get("Service", []) if isinstance(principal, dict) else []
            for service in [services] if isinstance(services, str) else services:
                grants.append(
                    ServiceGrant(kind, service, logical_id, statement.get("Condition", {}))
                )
    return grants


def unexplained(template: Mapping[str, Any]) -> list[str]:
    """Service grants with neither a binding condition nor an ``UNCONDITIONED`` entry."""
    return sorted(
        f"{g.kind} {g.service} on {g.logical_id}"
        for g in service_grants(template)
        if not g.bound and (g.kind, g.service, g.name) not in UNCONDITIONED
    )

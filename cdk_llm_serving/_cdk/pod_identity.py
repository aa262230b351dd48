"""IAM roles for EKS Pod Identity that only one service account of one cluster can assume."""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from constructs import Construct

#: The service principal EKS Pod Identity assumes roles as.
POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"


def pod_identity_trust(cluster_arn: str, namespace: str, service_account: str) -> iam.IPrincipal:
    """The Pod Identity principal, limited to one service account of one cluster in this
    account, by the session tags EKS Pod Identity sets
    (docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html, "Setting Conditions")."""
    return (
        iam.ServicePrincipal(POD_IDENTITY_SERVICE)
        .with_session_tags()
        .with_conditions(
            {
                "StringEquals": {
                    "aws:SourceAccount": Aws.ACCOUNT_ID,
                    "aws:RequestTag/eks-cluster-arn": cluster_arn,
                    "aws:RequestTag/kubernetes-namespace": namespace,
                    "aws:RequestTag/kubernetes-service-account": service_account,
                }
            }
        )
    )


def pod_identity_role(
    scope: Construct,
    id: str,
    *,
    cluster_arn: str,
    namespace: str,
    service_account: str,
    description: str,
) -> iam.Role:
    """A role for exactly ``namespace/service_account`` on the cluster ``cluster_arn``."""
    return iam.Role(
        scope,
        id,
        assumed_by=pod_identity_trust(cluster_arn, namespace, service_account),
        description=description,
    )

"""Checks of ``HyperPodEksCluster``'s inputs that read the service's own rules.

Name patterns come from botocore's SageMaker model (``_cdk.service_limits``); the EKS VPC
rule from the EKS user guide (see ``check_eks_vpc``).
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2

from .._cdk.service_limits import limits
from .._cdk.validation import check_eks_vpc, check_name
from ..errors import Problems, check_literal, check_sequence
from ..vllm.multinode import Startup
from .instance_group import HyperPodInstanceGroup


def check_cluster_inputs(
    problems: Problems,
    instance_groups: object,
    admin_role_arns: object,
    vpc: ec2.IVpc | None,
    cluster_name: str | None,
) -> None:
    """Lists that are lists (raises at once otherwise), the VPC, the cluster name."""
    check_sequence(
        problems,
        "instance_groups",
        instance_groups,
        HyperPodInstanceGroup,
        "a HyperPodInstanceGroup",
    )
    check_sequence(problems, "admin_role_arns", admin_role_arns, str, "an IAM role ARN string")
    problems.raise_if_any()
    if vpc is not None:
        check_eks_vpc(problems, "vpc", vpc)
    check_name(
        problems,
        "cluster_name",
        cluster_name,
        limits("CreateClusterRequest", "ClusterName"),
        "a HyperPod cluster name",
    )


def check_service_options(problems: Problems, startup: object) -> None:
    """``VllmMultiNodeService``'s ``startup`` (from its ``Literal`` type)."""
    check_literal(problems, "startup", startup, Startup, "start-up modes")

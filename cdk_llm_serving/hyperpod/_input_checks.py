"""Checks of ``HyperPodEksCluster``'s inputs that read the service's own rules.

Name patterns come from botocore's SageMaker model (``_cdk.service_limits``); the EKS VPC
rule from the EKS user guide (see ``check_eks_vpc``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

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


#: The form of every EKS add-on version (``DescribeAddonVersions``: ``v1.22.4-eksbuild.3``); the
#: build suffix is part of the version: ``v1.22.4`` names none (EKS user guide,
#: https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html, its version table).
EKS_ADDON_VERSION = re.compile(r"v(\d+)\.(\d+)\.(\d+)-eksbuild\.\d+")


def check_addon_versions(
    problems: Problems, addons: Mapping[str, str | None] | None, kubernetes_version: object
) -> None:
    """Each given add-on version has EKS's form; kube-proxy's is for the cluster's Kubernetes
    minor version (EKS publishes one kube-proxy line per Kubernetes version, same page, and
    Kubernetes' skew policy forbids a kube-proxy newer than the API server:
    https://kubernetes.io/releases/version-skew-policy/#kube-proxy)."""
    for name, version in (addons or {}).items():
        if version is None:  # EKS's default version for the cluster
            continue
        match = EKS_ADDON_VERSION.fullmatch(str(version))
        if match is None:
            hint = (
                f"; with its build suffix, e.g. {version}-eksbuild.1"
                if re.fullmatch(r"v?\d+\.\d+\.\d+", str(version))
                else ""
            )
            problems.add(
                f"addon_versions.{name}",
                version,
                "an EKS add-on version is v<major>.<minor>.<patch>-eksbuild.<build> "
                f"(cdk-llm-serving addons check lists what EKS offers){hint}",
            )
            continue
        if name == "kube-proxy" and isinstance(kubernetes_version, str):
            minor = f"{match.group(1)}.{match.group(2)}"
            if minor != kubernetes_version:
                problems.add(
                    f"addon_versions.{name}",
                    version,
                    f"kube-proxy {minor} is for Kubernetes {minor}, not the cluster's "
                    f"{kubernetes_version}: give a v{kubernetes_version}.x-eksbuild.N version",
                )

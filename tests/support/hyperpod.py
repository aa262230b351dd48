"""Builders for small HyperPod test stacks."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_s3 as s3

from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
from cdk_llm_serving.hyperpod.interfaces import IHyperPodCluster
from cdk_llm_serving.hyperpod.model_store import FsxModelStore


def small_cluster(
    stack: Stack, gpu_count: int = 2
) -> tuple[HyperPodEksCluster, HyperPodServingAddons, FsxModelStore]:
    """A system group, one p5en GPU group, the add-ons and an FSx store for ``models/ds3``."""
    cluster = HyperPodEksCluster(
        stack,
        "HyperPod",
        instance_groups=[
            HyperPodInstanceGroup.system(),
            HyperPodInstanceGroup.gpu("gpu", "ml.p5en.48xlarge", gpu_count),
        ],
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    store = FsxModelStore(
        stack,
        "Store",
        cluster=cluster,
        weights_bucket=s3.Bucket.from_bucket_name(stack, "W", "weights-bucket"),
        weights_prefix="models/ds3",
    )
    return cluster, addons, store


def imported_cluster(stack: Stack, gpu_count: int = 2) -> IHyperPodCluster:
    """An existing HyperPod cluster (VPC, node security group, EKS with a kubectl provider)."""
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk import aws_iam as iam

    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "ExistingVpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=["us-east-1a", "us-east-1b"],
        private_subnet_ids=["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
    )
    eks_cluster = eks.Cluster.from_cluster_attributes(
        stack,
        "ExistingEks",
        cluster_name="existing-eks",
        vpc=vpc,
        kubectl_provider=eks.KubectlProvider.from_kubectl_provider_attributes(
            stack,
            "ExistingKubectl",
            service_token="arn:aws:lambda:us-east-1:111122223333:function:kubectl-provider",
            role=iam.Role.from_role_arn(
                stack, "ExistingKubectlRole", "arn:aws:iam::111122223333:role/kubectl-provider"
            ),
        ),
    )
    return HyperPodEksCluster.from_cluster_attributes(
        stack,
        "ExistingHyperPod",
        eks_cluster=eks_cluster,
        vpc=vpc,
        node_security_group=ec2.SecurityGroup.from_security_group_id(
            stack, "ExistingNodes", "sg-0123456789abcdef0"
        ),
        instance_groups=[
            HyperPodInstanceGroup.system(),
            HyperPodInstanceGroup.gpu("gpu", "ml.p5en.48xlarge", gpu_count),
        ],
    )

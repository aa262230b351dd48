"""Builders for small HyperPod test stacks."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_s3 as s3

from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
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

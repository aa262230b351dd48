"""``IHyperPodCluster``: what the serving constructs read of a HyperPod cluster, implemented by
``HyperPodEksCluster`` and by ``HyperPodEksCluster.from_cluster_attributes`` for one created
elsewhere."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import IConstruct

from ..model_sources import ContainerImage
from .instance_group import HyperPodInstanceGroup
from .tiered_storage import TieredStorage


class IHyperPodCluster(Protocol):
    """A HyperPod cluster on EKS, as the serving constructs use it. ``nodes_ready``,
    ``pod_identity_agent`` and ``fsx_csi_driver`` are constructs to depend on (for an imported
    cluster they exist already and carry no dependency)."""

    @property
    def eks_cluster(self) -> eks.ICluster:
        """The EKS cluster HyperPod orchestrates (manifests, charts, Pod Identity)."""
        ...

    @property
    def vpc(self) -> ec2.IVpc: ...

    @property
    def node_security_group(self) -> ec2.ISecurityGroup:
        """The HyperPod nodes' security group (FSx and the scraper join it)."""
        ...

    @property
    def private_subnets(self) -> Sequence[ec2.ISubnet]:
        """Subnets of the nodes (the scraper's network interfaces go there)."""
        ...

    @property
    def gpu_subnets(self) -> Sequence[ec2.ISubnet]:
        """Subnets of the GPU groups; the first holds the FSx file system."""
        ...

    @property
    def instance_groups(self) -> tuple[HyperPodInstanceGroup, ...]: ...

    @property
    def gpu_groups(self) -> list[HyperPodInstanceGroup]: ...

    @property
    def nodes_ready(self) -> IConstruct:
        """Depend on this to run after the HyperPod nodes exist."""
        ...

    @property
    def pod_identity_agent(self) -> IConstruct:
        """Depend on this before creating Pod Identity associations."""
        ...

    @property
    def fsx_csi_driver(self) -> IConstruct:
        """Depend on this before creating FSx PersistentVolumes."""
        ...

    def kubernetes_namespace(self, name: str) -> IConstruct:
        """The one manifest declaring namespace ``name``; objects in it depend on this."""
        ...

    def reserve_gpu_nodes(self, consumer: IConstruct, group_name: str, nodes: int) -> None:
        """Reserve ``nodes`` of group ``group_name`` for ``consumer`` (at its maximum
        replicas); refused with one ``ConfigurationError`` listing every consumer's share
        when the group's consumers together need more nodes than it has."""
        ...

    def free_gpu_nodes(self, group_name: str, consumer: IConstruct | None = None) -> int:
        """Nodes of ``group_name`` no other consumer has reserved so far (``consumer``'s own
        share counts as free)."""
        ...

    @property
    def tiered_storage(self) -> TieredStorage | None:
        """The cluster's managed tiered storage (``TieredStorageConfig``), ``None`` when off."""
        ...

    def enable_tiered_storage(self) -> TieredStorage | None:
        """Turn managed tiered storage on where this app owns the cluster; ``None`` when it
        cannot (an imported cluster that did not declare it)."""
        ...

    def allow_image_pull(self, image: str | ContainerImage) -> None:
        """Let the nodes pull ``image`` from its ECR repository (nothing for an image outside
        ECR, or for an imported cluster, whose node role is not this app's)."""
        ...

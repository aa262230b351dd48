"""``HyperPodEksCluster``: an EKS cluster and the SageMaker HyperPod cluster it orchestrates.

Deploy order, by dependencies, so one ``cdk deploy`` succeeds: network and lifecycle script;
EKS and the add-ons nodes need to join; the HyperPod cluster; ``nodes_ready`` (the cluster
resource completes before its nodes exist); then the add-ons, charts and manifests that need
nodes. ``cdk destroy`` keeps the buckets, the flow logs and a VPC and GPU subnet this construct
created, where a retained FSx file system may still be (docs/design/hyperpod-cluster.md)."""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, cast

from aws_cdk import Annotations, Aws, CfnTag, Duration, Names, RemovalPolicy, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deployment
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IConstruct

from .._addon_pins import AddonPhase
from .._cdk.arns import IAM_ROLE, TRAINING_PLAN, check_arn
from .._cdk.nag import acknowledge, acknowledge_cdk_internals, acknowledge_wildcard_resources
from .._cdk.role_grants import resource_account_condition
from .._cdk.service_limits import limits
from .._cdk.service_trust import condition_service_trust
from .._cdk.template_limits import check_template_limits
from .._cdk.validation import check_eks_vpc, check_name, check_one_of
from .._partitions import partition_of_region
from ..errors import Problems, checked_props
from ..model_sources import ContainerImage
from ..planning.catalog import Catalog, default_catalog
from ._eks_addon import eks_addon
from ._facts import hyperpod_facts
from ._input_checks import check_addon_versions
from .availability_zones import az_id_problem
from .capacity import GpuNodeLedger
from .constants import (
    FSX_CSI_DRIVER_ADDON,
    GPU_NODE_ROLE,
    INTERNAL_ELB_SUBNET_TAG,
    POD_IDENTITY_AGENT_ADDON,
    SYSTEM_NODE_ROLE,
)
from .instance_group import HyperPodInstanceGroup
from .interfaces import IHyperPodCluster
from .kubernetes_version import KubernetesVersion
from .node_autoscaling import NodeAutoScaling, validate_autoscaled_groups
from .node_image_pulls import PULL_ACTIONS, addon_registry_arn, is_ecr_like, repository_arn_of
from .node_readiness import HyperPodNodesReady
from .tiered_storage import TieredStorage

_LIFECYCLE_PREFIX = "lifecycle"
#: Why the nodes pull from any repository of an AWS registry account (``node_image_pulls``).
_REGISTRY_PULL_REASON = (
    "An AWS-owned registry account of this Region (EKS add-ons, the inference operator): "
    "its images' repositories are AWS's to name and move; no other account's repositories."
)


_NO_RESOURCE_TYPE = (
    "EC2 Describe actions take no resource type, nor does ecr:GetAuthorizationToken."
)
_INTERFACE = "ec2:CreateNetworkInterface"
_MODIFY = "ec2:ModifyNetworkInterfaceAttribute"
#: The node role's EC2 and ECR-token statements, each action on the resource types the Service
#: Authorization Reference gives it (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html):
#: what AWS's HyperPod node policy and the VPC CNI's need (docs/design/hyperpod-cluster.md, "Node role").
#: Each: (actions, resource types (none: ``*``), in the cluster's VPC only (``ec2:Vpc``), why a wildcard).
_NODE_EC2_GRANTS: tuple[tuple[tuple[str, ...], tuple[str, ...], bool, str], ...] = (
    (
        (
            "ec2:DescribeNetworkInterfaces",
            "ec2:DescribeVpcs",
            "ec2:DescribeDhcpOptions",
            "ec2:DescribeSubnets",
            "ec2:DescribeSecurityGroups",
        ),
        (),
        False,
        _NO_RESOURCE_TYPE,
    ),
    (
        (
            "ec2:AssignPrivateIpAddresses",
            "ec2:CreateNetworkInterfacePermission",
            "ec2:DeleteNetworkInterface",
            "ec2:DeleteNetworkInterfacePermission",
            "ec2:DetachNetworkInterface",
            _MODIFY,
            "ec2:UnassignPrivateIpAddresses",
        ),
        ("network-interface",),
        True,
        "Network interfaces of the cluster's VPC only (ec2:Vpc condition); their IDs exist only at run time.",
    ),
    (
        (_INTERFACE, _MODIFY),
        ("subnet", "security-group"),
        True,
        "Subnets and security groups of the cluster's VPC only (ec2:Vpc condition), those the interfaces use.",
    ),
    (
        (_INTERFACE,),
        ("network-interface",),
        False,
        "A new interface has no ID nor ec2:Vpc before it exists; its subnet and security group are the VPC's.",
    ),
    (
        ("ec2:DetachNetworkInterface", _MODIFY),
        ("instance",),
        False,
        "The node's own instance, whose ID exists only at run time (instances carry no ec2:Vpc key).",
    ),
    (
        ("ec2:AttachNetworkInterface",),
        ("instance", "network-interface"),
        False,
        "The VPC CNI attaches network interfaces to its own node: instance and interface IDs exist only at run time.",
    ),
    (
        ("ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeTags"),
        (),
        False,
        _NO_RESOURCE_TYPE,
    ),
    (
        ("ec2:CreateTags",),
        ("network-interface",),
        False,
        "Tags only network interfaces, whose IDs exist only at run time.",
    ),
    (("ecr:GetAuthorizationToken",), (), False, _NO_RESOURCE_TYPE),
)
#: S3 actions that change the lifecycle script (denied to all but its deployment).
_OBJECT_WRITES = [
    "s3:PutObject",
    "s3:PutObjectAcl",
    "s3:PutObjectVersionAcl",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:RestoreObject",
]
#: The CIDR of the VPC we create (aws-cdk-lib's default, written out to find free blocks).
_VPC_CIDR = "10.0.0.0/16"
_ON_CREATE_SCRIPT = "on_create.sh"

#: The namespace label that turns on the AWS Load Balancer Controller's pod readiness gate
#: (see ``HyperPodEksCluster.kubernetes_namespace``).
READINESS_GATE_LABEL = ("elbv2.k8s.aws/pod-readiness-gate-inject", "enabled")


def private_bucket(scope: Construct, id: str, **extra: Any) -> s3.Bucket:
    """SSE-S3 (the only default encryption a server-access-log target takes), TLS only, no
    public access, versioned, retained; ``extra`` props on top."""
    return s3.Bucket(
        scope,
        id,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        versioned=True,
        removal_policy=RemovalPolicy.RETAIN,
        **extra,
    )


def _validate_instance_groups(
    problems: Problems,
    groups: Sequence[HyperPodInstanceGroup],
    need_system: bool,
    catalog: Catalog | None = None,
) -> None:
    """Each group valid, names unique, a GPU group to serve on (and a system group if ours)."""
    names: dict[str, int] = {}
    for index, group in enumerate(groups):
        group.validate(problems, f"instance_groups[{index}]", catalog)
        if group.name in names:
            problems.add(
                f"instance_groups[{index}].name",
                group.name,
                f"already used by instance_groups[{names[group.name]}]; group names must be unique",
            )
        names.setdefault(group.name, index)
    if not any(group.role == GPU_NODE_ROLE for group in groups):
        problems.add(
            "instance_groups", [g.name for g in groups], "needs at least one GPU group to serve on"
        )
    if need_system and not any(group.role == SYSTEM_NODE_ROLE for group in groups):
        problems.add(
            "instance_groups",
            [g.name for g in groups],
            "needs a system group: controllers and CoreDNS must not take GPU nodes",
        )


class _HyperPodCluster(Construct):
    """What a created and an imported HyperPod cluster share, written once (their instance
    groups, the ledger of GPU nodes, the namespaces); as such, a cluster created elsewhere
    (``from_cluster_attributes``), whose readiness members are itself: it holds no resources,
    so depending on it orders nothing."""

    #: The cluster's instance groups, as given.
    instance_groups: tuple[HyperPodInstanceGroup, ...]
    #: The GPU nodes each consumer of this app reserved, per group.
    gpu_node_ledger: GpuNodeLedger
    #: The EKS cluster the namespaces are declared on.
    eks_cluster: eks.ICluster
    vpc: ec2.IVpc
    node_security_group: ec2.ISecurityGroup
    private_subnets: list[ec2.ISubnet]
    gpu_subnets: list[ec2.ISubnet]
    #: The cluster's managed tiered storage (``TieredStorageConfig``), or ``None`` when off.
    tiered_storage: TieredStorage | None = None
    #: Depend on this to run after the HyperPod nodes exist (charts, workloads).
    nodes_ready: IConstruct
    #: Depend on this before creating Pod Identity associations.
    pod_identity_agent: IConstruct
    #: Depend on this before creating FSx PersistentVolumes.
    fsx_csi_driver: IConstruct

    def _set_instance_groups(self, instance_groups: Sequence[HyperPodInstanceGroup]) -> None:
        self.instance_groups = tuple(instance_groups)
        self.gpu_node_ledger = GpuNodeLedger(self.node.path, self.instance_groups)
        self._namespaces: dict[str, eks.KubernetesManifest] = {}

    def kubernetes_namespace(self, name: str) -> IConstruct:
        """The one manifest that declares Kubernetes namespace ``name`` on this cluster, created
        on first use (an existing one is adopted): constructs depend on it instead of declaring
        it, as deleting a manifest deletes its objects. Labelled ``READINESS_GATE_LABEL`` so a
        rollout waits for the new pod's NLB target (docs/design/hyperpod-cluster.md, "Namespaces").
        """
        if name not in self._namespaces:
            self._namespaces[name] = eks.KubernetesManifest(
                self,
                f"Namespace-{name}",
                cluster=self.eks_cluster,
                overwrite=True,
                manifest=[
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": name, "labels": dict([READINESS_GATE_LABEL])},
                    }
                ],
            )
            # Like everything applied in the cluster, after the nodes (``nodes_ready``).
            self._namespaces[name].node.add_dependency(self.nodes_ready)
        return self._namespaces[name]

    @property
    def gpu_groups(self) -> list[HyperPodInstanceGroup]:
        """The groups serving runs on (role ``gpu``)."""
        return [group for group in self.instance_groups if group.role == GPU_NODE_ROLE]

    def reserve_gpu_nodes(self, consumer: IConstruct, group_name: str, nodes: int) -> None:
        """Reserve ``nodes`` of instance group ``group_name`` for ``consumer`` (again: replace
        its share); one ``ConfigurationError`` lists each consumer's share when they exceed
        the group (for an imported cluster: the consumers in this app)."""
        self.gpu_node_ledger.reserve(consumer, group_name, nodes)

    def free_gpu_nodes(self, group_name: str, consumer: IConstruct | None = None) -> int:
        """Nodes of ``group_name`` no consumer but ``consumer`` has reserved so far."""
        return self.gpu_node_ledger.free(group_name, consumer)

    def enable_tiered_storage(self) -> TieredStorage | None:
        """Managed tiered storage for a consumer that needs it (a KV cache's L2): ``None`` when
        this cluster cannot turn it on (an imported cluster that did not declare it)."""
        return self.tiered_storage

    def allow_image_pull(self, image: str | ContainerImage) -> None:
        """Let the nodes pull ``image``: nothing on an imported cluster, whose node role is
        not this app's (give it the repository yourself)."""


class HyperPodEksCluster(_HyperPodCluster):
    """EKS plus HyperPod, ready for multi-node GPU serving.

    Implements ``IHyperPodCluster``; ``from_cluster_attributes`` gives one for a cluster
    created elsewhere.

    :param instance_groups: one CPU ``system`` group for controllers and at least one GPU group.
    :param kubernetes_version: a ``KubernetesVersion`` (or its string: 1.33, 1.34, 1.35), with
        its kubectl layer and add-on pins; required, as aws-eks-v2's ``Cluster(version=)`` is.
        ``KubernetesVersion.V1_35`` for a new cluster; one in or near EKS extended support
        warns (``cdk-llm-serving:kubernetesExtendedSupport``).
    :param vpc: an existing VPC with private subnets. Default: a new VPC over two Availability
        Zones with one NAT gateway, an S3 gateway endpoint and flow logs, retained with its GPU
        subnet on ``cdk destroy`` (a VPC you create is yours to retain likewise).
    :param single_gpu_subnet: without ``gpu_availability_zone_id``, place every GPU group (and
        the FSx file system) in the first private subnet, so multi-node replicas sit close
        together; ``False`` spreads GPU groups over all private subnets. Default: ``True``.
    :param admin_role_arns: IAM roles granted cluster-admin through EKS access entries.
    :param endpoint_public: also expose the EKS API endpoint publicly. Default: ``False``.
    :param addon_versions: EKS add-on name -> version. Default: the pins in
        ``assets/hyperpod.json`` for ``kubernetes_version``.
    :param cluster_name: HyperPod cluster name. Default: derived from the construct path.
    :param catalog: the planner's instance catalog GPU groups are checked against (your
        prices, extra types). Default: ``default_catalog()``.
    :param nodes_ready_timeout: how long ``nodes_ready`` waits for every group's nodes to be
        Running (a timeout rolls back a cluster this deployment created; ``cdk deploy
        --no-rollback`` keeps it). Default: the slowest group's ``node_readiness.wait_budget``.
    :param gpu_availability_zone_id: the AZ ID (e.g. ``usw2-az2``; the same zone in every
        account) of your GPU capacity: a new private subnet there holds every GPU group and the
        FSx file system. Default: none (GPU groups follow ``single_gpu_subnet``).
    :param gpu_subnet_cidr: the CIDR of that subnet. Default: the first free block, the size
        of the private subnets, in a VPC this construct creates; required with an imported VPC.
    :param tiered_storage: managed tiered storage (``TieredStorageConfig``) on every node.
        Default: off, turned on (``TieredStorage()``, 5 %) when an endpoint's KV cache uses it.
    :param node_auto_scaling: let HyperPod's managed Karpenter grow and shrink the GPU groups
        that give ``max_count``; needs at least one such group, and every group with
        ``max_count`` needs it. Default: ``None`` (groups keep their ``count``).
    """

    #: The EKS cluster, typed as its interface (see ``_render_eks``).
    eks_cluster: eks.ICluster
    #: Every EKS add-on this cluster installs, by its EKS name (``vpc-cni``, ``coredns``, ...).
    addons: dict[str, eks.Addon]
    #: Every EKS add-on's version on this cluster: the pins with ``addon_versions`` over them
    #: (add-ons installed later for serving, such as the Secrets Store provider, read theirs here).
    addon_versions: Mapping[str, str | None]
    #: The EKS Pod Identity agent add-on (installed before the nodes join).
    pod_identity_agent: eks.Addon
    #: The FSx for Lustre CSI driver add-on (installed once nodes exist).
    fsx_csi_driver: eks.Addon
    #: Cluster node autoscaling, or ``None`` (see ``node_auto_scaling``).
    node_auto_scaling: NodeAutoScaling | None
    #: Completes once every group's nodes are Running (see ``HyperPodNodesReady``).
    node_wait: HyperPodNodesReady

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        instance_groups: Sequence[HyperPodInstanceGroup],
        kubernetes_version: KubernetesVersion | str,
        vpc: ec2.IVpc | None = None,
        single_gpu_subnet: bool = True,
        admin_role_arns: Sequence[str] = (),
        endpoint_public: bool = False,
        addon_versions: Mapping[str, str | None] | None = None,
        cluster_name: str | None = None,
        catalog: Catalog | None = None,
        nodes_ready_timeout: Duration | None = None,
        gpu_availability_zone_id: str | None = None,
        gpu_subnet_cidr: str | None = None,
        tiered_storage: TieredStorage | None = None,
        node_auto_scaling: NodeAutoScaling | None = None,
    ) -> None:
        super().__init__(scope, id)
        check_template_limits(self)
        self.tiered_storage = tiered_storage
        self.node_auto_scaling = node_auto_scaling
        self.catalog = catalog or default_catalog()
        self._set_instance_groups(instance_groups)
        self.kubernetes_version: KubernetesVersion = self._validate(
            kubernetes_version,
            admin_role_arns,
            vpc,
            gpu_availability_zone_id,
            gpu_subnet_cidr,
            cluster_name=cluster_name,
            addons=addon_versions,
        )
        self._warn_extended_support()
        self.addon_versions = dict(self.kubernetes_version.addon_versions, **(addon_versions or {}))
        self._render_network(vpc, single_gpu_subnet, gpu_availability_zone_id, gpu_subnet_cidr)
        self.eks_cluster = self._render_eks(endpoint_public, admin_role_arns)
        before_nodes = self._render_addons("addons_before_nodes")
        self.lifecycle_bucket, upload = self._lifecycle_bucket()
        self.execution_role = self._execution_role()
        self.cfn_cluster = self._render_hyperpod(cluster_name)
        self._order_hyperpod_after([upload, *before_nodes.values()])
        self.node_wait = HyperPodNodesReady(
            self,
            "NodesReady",
            cluster_arn=self.cfn_cluster.attr_cluster_arn,
            instance_groups=self.instance_groups,
            timeout=nodes_ready_timeout,
        )
        self.nodes_ready = self.node_wait.ready
        self._render_karpenter_objects()
        after_nodes = self._render_addons("addons_after_nodes", after=self.nodes_ready)
        self.addons = {**before_nodes, **after_nodes}
        self.pod_identity_agent = self.addons[POD_IDENTITY_AGENT_ADDON]
        self.fsx_csi_driver = self.addons[FSX_CSI_DRIVER_ADDON]
        self._acknowledge_cdk_internals()

    @classmethod
    def from_cluster_attributes(
        cls,
        scope: Construct,
        id: str,
        *,
        eks_cluster: eks.ICluster,
        vpc: ec2.IVpc,
        node_security_group: ec2.ISecurityGroup,
        instance_groups: Sequence[HyperPodInstanceGroup],
        private_subnets: Sequence[ec2.ISubnet] | None = None,
        gpu_subnets: Sequence[ec2.ISubnet] | None = None,
        tiered_storage: TieredStorage | None = None,
    ) -> IHyperPodCluster:
        """A HyperPod cluster created elsewhere, for the serving constructs.

        :param eks_cluster: its EKS cluster, e.g. ``eks.Cluster.from_cluster_attributes(...)``
            with a kubectl provider (manifests and charts are applied through it).
        :param vpc: the cluster's VPC.
        :param node_security_group: the security group of its HyperPod nodes.
        :param instance_groups: its instance groups as they are (names, types, counts).
        :param private_subnets: the nodes' subnets. Default: the VPC's private subnets.
        :param gpu_subnets: the GPU groups' subnets. Default: the first of ``private_subnets``.
        :param tiered_storage: the cluster's ``TieredStorageConfig`` (``DescribeCluster``) if
            managed tiered storage is on. Default: none (a KV cache cannot use it as L2).

        Its nodes and EKS add-ons (Pod Identity agent, FSx CSI driver) are taken to exist.
        """
        cluster = _HyperPodCluster(scope, id)
        cluster.nodes_ready = cluster.pod_identity_agent = cluster.fsx_csi_driver = cluster
        problems = Problems(f"HyperPodEksCluster.from_cluster_attributes '{cluster.node.path}'")
        _validate_instance_groups(problems, instance_groups, need_system=False)
        if tiered_storage is not None:
            tiered_storage.validate(problems, "tiered_storage")
        problems.raise_if_any()
        cluster.tiered_storage = tiered_storage
        cluster._set_instance_groups(instance_groups)
        cluster.eks_cluster, cluster.vpc = eks_cluster, vpc
        cluster.node_security_group = node_security_group
        cluster.private_subnets = list(
            private_subnets
            if private_subnets is not None
            else vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets
        )
        cluster.gpu_subnets = (
            list(gpu_subnets) if gpu_subnets is not None else cluster.private_subnets[:1]
        )
        return cluster

    # -- what dependents need ----------------------------------------------------------

    def disable_default_deep_health_checks(self) -> list[str]:
        """Turn off the deep health checks groups run by default (not those given explicitly),
        for ``HyperPodServingAddons`` without the HyperPod dependencies chart they run with;
        the names of the groups changed. ``nodes_ready``'s derived budget follows."""
        changed = [
            group.name
            for group in self.instance_groups
            if group.deep_health_checks is None and group.effective_health_checks
        ]
        if changed:
            self.instance_groups = tuple(
                dataclasses.replace(group, deep_health_checks=())
                if group.name in changed
                else group
                for group in self.instance_groups
            )
            self.cfn_cluster.instance_groups = [
                self._instance_group(group) for group in self.instance_groups
            ]
            self.node_wait.rebudget(self.instance_groups)
        return changed

    def order_nodes_after(self, prerequisite: IConstruct) -> None:
        """Create the HyperPod cluster (its nodes) only after ``prerequisite`` exists.

        For the HyperPod dependencies chart, which AWS requires "before creating HyperPod
        cluster" (aws/sagemaker-hyperpod-cli helm_chart/readme.md)."""
        self.cfn_cluster.node.add_dependency(prerequisite)

    # -- validate ----------------------------------------------------------------------

    def _validate(
        self,
        kubernetes_version: KubernetesVersion | str,
        admin_role_arns: Sequence[str],
        vpc: ec2.IVpc | None,
        az_id: str | None,
        subnet_cidr: str | None,
        *,
        cluster_name: str | None = None,
        addons: Mapping[str, str | None] | None = None,
    ) -> KubernetesVersion:
        """Every input's problems at once; the Kubernetes version, typed."""
        problems = Problems(f"HyperPodEksCluster '{self.node.path}'")
        if vpc is not None:
            check_eks_vpc(problems, "vpc", vpc)
        name_rule = limits("CreateClusterRequest", "ClusterName")
        check_name(problems, "cluster_name", cluster_name, name_rule, "a HyperPod cluster name")
        validate_autoscaled_groups(problems, self.instance_groups, self.node_auto_scaling)
        known = sorted(
            {name for pins in hyperpod_facts()["addon_versions"].values() for name in pins}
        )
        for name in addons or {}:
            check_one_of(problems, "addon_versions", name, known, "EKS add-ons")
        known_addons = {name: v for name, v in (addons or {}).items() if name in known}
        check_addon_versions(problems, known_addons, str(kubernetes_version))
        _validate_gpu_zone(problems, Stack.of(self).region, vpc is None, az_id, subnet_cidr)
        _validate_instance_groups(problems, self.instance_groups, True, self.catalog)
        version = KubernetesVersion.parse(problems, "kubernetes_version", kubernetes_version)
        if self.tiered_storage is not None:
            self.tiered_storage.validate(problems, "tiered_storage")
        for index, arn in enumerate(admin_role_arns):
            check_arn(problems, f"admin_role_arns[{index}]", arn, IAM_ROLE, self)
        invalid = {p.property for p in problems.problems()}  # a malformed ARN is one problem
        for index, group in enumerate(self.instance_groups):
            prop = f"instance_groups[{index}].training_plan_arn"
            if prop not in invalid:
                check_arn(problems, prop, group.training_plan_arn, TRAINING_PLAN, self)
        problems.raise_if_any()
        assert version is not None
        return version

    def _warn_extended_support(self) -> None:
        message = self.kubernetes_version.extended_support_warning
        if message is not None:
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:kubernetesExtendedSupport", message
            )

    # -- render ------------------------------------------------------------------------

    def _render_network(
        self, vpc: ec2.IVpc | None, single_gpu_subnet: bool, az_id: str | None, cidr: str | None
    ) -> None:
        """The VPC (``vpc`` or a new one), its private subnets, the GPU groups' subnets and the
        node security group. The VPC and GPU subnets this construct creates are retained."""
        self._owns_vpc = vpc is None
        self.vpc = vpc or self._new_vpc()
        private = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets
        self.private_subnets: list[ec2.ISubnet] = list(private)
        self.gpu_subnets: list[ec2.ISubnet] = (
            [self._gpu_subnet_in_zone(az_id, cidr)]
            if az_id
            else self.private_subnets[:1]
            if single_gpu_subnet
            else self.private_subnets
        )
        if self._owns_vpc:
            cast(ec2.Vpc, self.vpc).apply_removal_policy(RemovalPolicy.RETAIN)
            for subnet in self.gpu_subnets:
                if isinstance(subnet, ec2.Subnet):
                    subnet.apply_removal_policy(RemovalPolicy.RETAIN)
        self.node_security_group = self._node_security_group()

    def _gpu_subnet_in_zone(self, az_id: str, cidr: str | None) -> ec2.ISubnet:
        """A private subnet in the AZ with this ID, routed like the first private subnet.

        An ``AWS::EC2::Subnet`` with ``AvailabilityZoneId`` (aws-cdk-lib's subnets take AZ
        names only), tagged for internal load balancers like the private subnets, or the
        internal NLB may leave the GPU zone out
        (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/subnet_discovery/).
        """
        cidr, route_table_id = self._gpu_subnet_placement(cidr)
        subnet = ec2.CfnSubnet(
            self,
            "GpuSubnet",
            vpc_id=self.vpc.vpc_id,
            cidr_block=cidr,
            availability_zone_id=az_id,
            map_public_ip_on_launch=False,
            tags=[
                CfnTag(key="Name", value=f"{self.node.path}/GpuSubnet"),
                CfnTag(key=INTERNAL_ELB_SUBNET_TAG, value="1"),
            ],
        )
        if self._owns_vpc:
            subnet.apply_removal_policy(RemovalPolicy.RETAIN)
        self.gpu_subnet_routes = ec2.CfnSubnetRouteTableAssociation(
            self, "GpuSubnetRoutes", subnet_id=subnet.ref, route_table_id=route_table_id
        )
        return ec2.Subnet.from_subnet_attributes(
            self,
            "GpuSubnetRef",
            subnet_id=subnet.ref,
            availability_zone=subnet.attr_availability_zone,
            route_table_id=route_table_id,
            ipv4_cidr_block=cidr,
        )

    def _gpu_subnet_placement(self, cidr: str | None) -> tuple[str, str]:
        """The GPU subnet's CIDR (given and free, or the first free block of our VPC) and
        the route table it shares with the first private subnet (NAT egress)."""
        problems = Problems(f"HyperPodEksCluster '{self.node.path}'")
        if cidr is not None and self._owns_vpc and not _fits(self.vpc, cidr):
            problems.add(
                "gpu_subnet_cidr", cidr, f"must lie in {_VPC_CIDR} and overlap no other subnet"
            )
        cidr = cidr or _free_block(self.vpc, self.private_subnets)
        if cidr is None:
            problems.add("gpu_subnet_cidr", None, "no free block left in the VPC; give one")
        try:
            route_table_id: str | None = self.private_subnets[0].route_table.route_table_id
        except RuntimeError:  # jsii: an imported subnet given without its route table
            route_table_id = None
        if route_table_id is None:
            problems.add(
                "vpc",
                self.vpc.vpc_id,
                "an imported VPC needs its private subnets' route tables "
                "(Vpc.from_vpc_attributes(private_subnet_route_table_ids=...)) for the GPU subnet",
            )
        problems.raise_if_any()
        assert cidr is not None and route_table_id is not None
        return cidr, route_table_id

    def _render_eks(self, endpoint_public: bool, admin_role_arns: Sequence[str]) -> eks.ICluster:
        """The EKS cluster (private endpoint, all control-plane logs), open to the nodes.

        Cast to ``eks.ICluster``: jsii's stub of ``eks.Cluster`` lacks ``ICluster``'s
        ``kubectl_provider_options``, so mypy would refuse it wherever ``ICluster`` is asked for.
        """
        cluster = eks.Cluster(
            self,
            "Eks",
            version=self.kubernetes_version.eks_version,
            vpc=self.vpc,
            vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
            endpoint_access=eks.EndpointAccess.PUBLIC_AND_PRIVATE
            if endpoint_public
            else eks.EndpointAccess.PRIVATE,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=self.kubernetes_version.kubectl_layer(self)
            ),
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            cluster_logging=list(eks.ClusterLoggingTypes),
        )
        cluster.connections.allow_from(
            self.node_security_group,
            ec2.Port.all_traffic(),
            "HyperPod nodes to the EKS control plane",
        )
        self.node_security_group.connections.allow_from(
            cluster.connections,
            ec2.Port.all_traffic(),
            "EKS control plane to kubelets and webhooks",
        )
        for index, arn in enumerate(admin_role_arns):
            admin = eks.AccessPolicy.from_access_policy_name(
                "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
            )
            cluster.grant_access(f"Admin{index}", arn, [admin])
        return cast(eks.ICluster, cluster)

    def _render_addons(
        self, phase: AddonPhase, after: IConstruct | None = None
    ) -> dict[str, eks.Addon]:
        """The EKS add-ons ``hyperpod.json`` lists for ``phase`` (before or after the nodes)."""
        addons = {name: self._addon(name) for name in hyperpod_facts()[phase]}
        for addon in addons.values():
            if after is not None:
                addon.node.add_dependency(after)
        return addons

    def _render_hyperpod(self, cluster_name: str | None) -> sagemaker.CfnCluster:
        """The HyperPod cluster orchestrated by the EKS cluster, one entry per instance group;
        with ``node_auto_scaling``, Karpenter autoscaling (which needs Continuous provisioning
        and Automatic node recovery, always set) and the role it assumes."""
        auto_scaling: dict[str, Any] = {}
        if self.node_auto_scaling is not None:
            self.autoscaler_role, self.autoscaler_policy = self.node_auto_scaling.autoscaler_role(
                self, "AutoscalerRole"
            )
            auto_scaling = {
                "auto_scaling": sagemaker.CfnCluster.ClusterAutoScalingConfigProperty(
                    mode="Enable", auto_scaler_type="Karpenter"
                ),
                "cluster_role": self.autoscaler_role.role_arn,
            }
        return sagemaker.CfnCluster(
            self,
            "Resource",
            cluster_name=cluster_name
            or Names.unique_resource_name(self, max_length=63, separator="-"),
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(
                    cluster_arn=self.eks_cluster.cluster_arn
                )
            ),
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=[self.node_security_group.security_group_id],
                subnets=[subnet.subnet_id for subnet in self.private_subnets],
            ),
            node_recovery="Automatic",
            node_provisioning_mode="Continuous",
            instance_groups=[self._instance_group(group) for group in self.instance_groups],
            tiered_storage_config=self._tiered_storage_config(),
            **auto_scaling,
        )

    def _render_karpenter_objects(self) -> None:
        """The node classes and node pools HyperPod's Karpenter reads, after the nodes (its
        CRDs exist once the cluster's autoscaling runs); nothing without ``node_auto_scaling``."""
        if self.node_auto_scaling is None:
            return
        #: The ``HyperpodNodeClass`` and ``NodePool`` of each autoscaled group.
        self.karpenter_manifest = eks.KubernetesManifest(
            self,
            "KarpenterNodePools",
            cluster=self.eks_cluster,
            manifest=self.node_auto_scaling.karpenter_objects(self.instance_groups),
            overwrite=True,
        )
        self.karpenter_manifest.node.add_dependency(self.nodes_ready)
        self.cfn_cluster.node.add_dependency(self.autoscaler_policy)

    def _tiered_storage_config(self) -> sagemaker.CfnCluster.TieredStorageConfigProperty | None:
        """``TieredStorageConfig`` of ``tiered_storage`` (absent when off: templates of clusters
        without it stay as they were)."""
        if self.tiered_storage is None:
            return None
        if self.tiered_storage.exceeds_headroom:
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:tieredStorageExceedsHeadroom",
                f"Tiered storage takes {self.tiered_storage.memory_percentage} % of every node's "
                "memory; pods sized to a node (the multi-node service's Guaranteed pods) leave "
                "only 10 % of it free, so they stay Pending. Keep memory_percentage below 10.",
            )
        config = self.tiered_storage.to_cloudformation()
        return sagemaker.CfnCluster.TieredStorageConfigProperty(
            mode=config["Mode"],
            instance_memory_allocation_percentage=config["InstanceMemoryAllocationPercentage"],
        )

    def enable_tiered_storage(self) -> TieredStorage:
        """Turn managed tiered storage on (``TieredStorage()`` unless the cluster was given one);
        a later call returns the same configuration."""
        if self.tiered_storage is None:
            self.tiered_storage = TieredStorage()
            self.cfn_cluster.tiered_storage_config = self._tiered_storage_config()
        return self.tiered_storage

    def _order_hyperpod_after(self, dependencies: Sequence[IConstruct]) -> None:
        """Nodes join only once the script is uploaded, the node add-ons and role policy exist.

        The EKS cluster comes first through the ClusterArn reference: a construct dependency on
        it would take in the charts added later, which wait for the nodes (a cycle).
        """
        for dependency in dependencies:
            self.cfn_cluster.node.add_dependency(dependency)
        self.cfn_cluster.node.add_dependency(self.execution_role_policy)
        routes = getattr(self, "gpu_subnet_routes", None)
        if routes is not None:
            self.cfn_cluster.node.add_dependency(routes)
        policy = self.execution_role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.cfn_cluster.node.add_dependency(policy)

    def _acknowledge_cdk_internals(self) -> None:
        """cdk-nag findings on resources aws-cdk-lib generates for us, with reasons."""
        acknowledge_cdk_internals(
            self.eks_cluster.node.find_child("KubectlProvider"),
            "aws-cdk-lib's kubectl provider: its handler runs in the VPC to reach the private EKS endpoint, with the policies and runtime aws-cdk-lib chooses.",
        )
        acknowledge_cdk_internals(
            self.eks_cluster.node.find_child("Role"),
            "The EKS service role with AmazonEKSClusterPolicy, as EKS requires.",
        )
        for child in Stack.of(self).node.children:
            if child.node.id.startswith("Custom::CDKBucketDeployment"):
                acknowledge_cdk_internals(
                    child,
                    "aws-cdk-lib's bucket-deployment handler that uploads the lifecycle script: it reads the CDK asset bucket and writes the lifecycle bucket.",
                )

    def _new_vpc(self) -> ec2.Vpc:
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(_VPC_CIDR),
            max_azs=2,
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="public",
                    subnet_type=ec2.SubnetType.PUBLIC,
                    cidr_mask=24,
                    # The NAT gateway brings its own Elastic IP; nothing else gets a public IP.
                    map_public_ip_on_launch=False,
                ),
                # Pods take VPC addresses (VPC CNI): large private subnets.
                ec2.SubnetConfiguration(
                    name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=18
                ),
            ],
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)
            },
        )
        flow_logs = logs.LogGroup(
            self,
            "FlowLogs",
            retention=logs.RetentionDays.ONE_YEAR,
            removal_policy=RemovalPolicy.RETAIN,
        )
        flow_log = vpc.add_flow_log(
            "FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs)
        )
        # Only this account's flow logs assume the role (the flow log's ID exists once created):
        # https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-iam-role.html.
        stack = Stack.of(self)
        assert flow_log.iam_role is not None  # aws-cdk-lib creates it for a log-group destination
        condition_service_trust(
            flow_log.iam_role,
            "vpc-flow-logs.amazonaws.com",
            f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:vpc-flow-log/*",
        )
        return vpc

    def _node_security_group(self) -> ec2.SecurityGroup:
        """All traffic to and from itself (EFA), all outbound, FSx for Lustre ports.

        EFA needs all traffic to and from the group itself
        (https://docs.aws.amazon.com/eks/latest/userguide/sec-group-reqs.html); aws-cdk-lib
        drops egress rules added to a group that allows all outbound, so the rule to itself
        is its own ``AWS::EC2::SecurityGroupEgress``.
        """
        group = ec2.SecurityGroup(
            self,
            "NodeSecurityGroup",
            vpc=self.vpc,
            allow_all_outbound=True,
            description="HyperPod nodes: EFA/NCCL among themselves, FSx for Lustre",
        )
        ec2.CfnSecurityGroupEgress(
            self,
            "NodeSecurityGroupSelfEgress",
            group_id=group.security_group_id,
            ip_protocol="-1",
            destination_security_group_id=group.security_group_id,
            description="all traffic between nodes (EFA needs it)",
        )
        group.add_ingress_rule(
            group, ec2.Port.all_traffic(), "all traffic between nodes (EFA needs it)"
        )
        group.add_ingress_rule(group, ec2.Port.tcp(988), "FSx for Lustre")
        group.add_ingress_rule(group, ec2.Port.tcp_range(1018, 1023), "FSx for Lustre")
        return group

    def _addon(self, name: str) -> eks.Addon:
        return eks_addon(
            self,
            f"Addon-{name}",
            cluster=self.eks_cluster,
            addon_name=name,
            addon_version=self.addon_versions.get(name),
            configuration_values=_ADDON_CONFIGURATION.get(name),
        )

    def _lifecycle_bucket(self) -> tuple[s3.Bucket, s3_deployment.BucketDeployment]:
        """The lifecycle script's bucket: access-logged, writable only by its upload.

        The script runs as root on every node, so whoever may write it owns the GPU nodes: the
        bucket policy denies object writes to every principal but the upload's handler.
        """
        # No AwsSolutions-S1 on it: cdk-nag's rule passes a bucket that is another's log target.
        logs_bucket = private_bucket(self, "LifecycleAccessLogs")
        bucket = private_bucket(
            self,
            "LifecycleScripts",
            server_access_logs_bucket=logs_bucket,
            server_access_logs_prefix="lifecycle-scripts/",
        )
        script_dir = Path(str(resources.files(__package__).joinpath("assets", "lifecycle")))
        upload = s3_deployment.BucketDeployment(
            self,
            "LifecycleUpload",
            destination_bucket=bucket,
            destination_key_prefix=f"{_LIFECYCLE_PREFIX}/",
            sources=[s3_deployment.Source.asset(str(script_dir))],
            prune=True,
            retain_on_delete=True,
        )
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyTheDeploymentWritesLifecycleScripts",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=_OBJECT_WRITES,
                resources=[bucket.arn_for_objects("*")],
                conditions={"ArnNotEquals": {"aws:PrincipalArn": upload.handler_role.role_arn}},
            )
        )
        return bucket, upload

    def _execution_role(self) -> iam.Role:
        """The node role: HyperPod's managed policy, ENIs, image pulls, the lifecycle script.

        Its trust has no ``aws:SourceAccount``/``aws:SourceArn`` condition: AWS documents none
        for HyperPod (https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html),
        and a key the service does not send would leave the nodes without credentials.
        """
        role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(
                    "AmazonSageMakerClusterInstanceRolePolicy"
                )
            ],
            description="HyperPod node execution role (cdk-llm-serving)",
        )
        # Its own named policy: only these wildcards are acknowledged, on this policy alone.
        self.execution_role_policy = iam.ManagedPolicy(
            self,
            "ExecutionRolePolicy",
            roles=[role],
            description="HyperPod nodes: network interfaces, image pulls, lifecycle scripts",
            statements=self._execution_role_statements(),
        )
        self._acknowledge_execution_role(role, self.execution_role_policy)
        self._pull_repositories: set[str] = set()
        self._pull_from_add_on_registry()
        return role

    def _pull_from_add_on_registry(self) -> None:
        """The Region's EKS add-on registry: every add-on this cluster installs pulls there
        (``node_image_pulls``). A Region the library cannot name at synth (a token) or that
        AWS's table does not list: any repository."""
        region = Stack.of(self).region
        arn = None if Token.is_unresolved(region) else addon_registry_arn(region)
        if arn is None:
            self.allow_any_image_pull(
                f"the EKS add-on registry of Region {region} is not known at synth"
            )
            return
        self.allow_registry_pull(arn)

    def allow_image_pull(self, image: str | ContainerImage) -> None:
        """Let the nodes pull ``image`` from its ECR repository (not a ``grant_*``: it takes an
        image, not a grantee): nothing for an image outside ECR, any repository for an ECR
        image whose repository is a token at synth."""
        region = Stack.of(self).region
        partition = (
            None if Token.is_unresolved(region) else partition_of_region(region)
        ) or Aws.PARTITION
        arn = repository_arn_of(image, partition)
        if arn is not None:
            self._add_pull_resource(arn)
        elif is_ecr_like(image):
            self.allow_any_image_pull("an ECR image whose repository is not known at synth")

    def allow_registry_pull(self, repository_arn: str, reason: str = _REGISTRY_PULL_REASON) -> None:
        """Let the nodes pull from ``repository_arn``, which may end in ``repository/*`` (an
        AWS registry account), acknowledged with ``reason``."""
        if self._add_pull_resource(repository_arn) and repository_arn.endswith("*"):
            acknowledge_wildcard_resources(
                self.execution_role_policy, [repository_arn], reason, actions=PULL_ACTIONS
            )

    def allow_any_image_pull(self, reason: str) -> None:
        """Pulls from any repository, where the library cannot name them (``reason``)."""
        self.allow_registry_pull(
            "*", f"Nodes pull from repositories the library cannot name: {reason}."
        )

    def _add_pull_resource(self, arn: str) -> bool:
        """Add ``arn`` to the pull statement once; whether it was new."""
        if arn in self._pull_repositories:
            return False
        self._pull_repositories.add(arn)
        self._image_pulls.add_resources(arn)
        return True

    def _ec2_resources(self, kinds: tuple[str, ...]) -> list[str]:
        stack = Stack.of(self)
        arns = [stack.format_arn(service="ec2", resource=k, resource_name="*") for k in kinds]
        return arns or ["*"]

    def _execution_role_statements(self) -> list[iam.PolicyStatement]:
        """``_NODE_EC2_GRANTS``, image pulls, read of the lifecycle scripts (what HyperPod
        needs, https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites-iam.html)
        and the Pod Identity agent's token exchange (its only resource type is the cluster)."""
        bucket_arn = self.lifecycle_bucket.bucket_arn
        owner = resource_account_condition(Stack.of(self).account)
        in_vpc = {"ArnEquals": {"ec2:Vpc": self.vpc.vpc_arn}}
        #: The pulls, on the repositories registered so far (``allow_image_pull``).
        self._image_pulls = iam.PolicyStatement(actions=list(PULL_ACTIONS))
        prefix = [f"{_LIFECYCLE_PREFIX}/", f"{_LIFECYCLE_PREFIX}/*"]
        return [
            *(
                iam.PolicyStatement(
                    actions=list(actions),
                    resources=self._ec2_resources(kinds),
                    conditions=in_vpc if vpc_only else None,
                )
                for actions, kinds, vpc_only, _ in _NODE_EC2_GRANTS
            ),
            self._image_pulls,
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[f"{bucket_arn}/{_LIFECYCLE_PREFIX}/*"],
                conditions=owner,
            ),
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": prefix}, **owner},
            ),
            iam.PolicyStatement(
                actions=["eks-auth:AssumeRoleForPodIdentity"],
                resources=[self.eks_cluster.cluster_arn],
            ),
        ]

    def _acknowledge_execution_role(self, role: iam.Role, policy: iam.ManagedPolicy) -> None:
        """cdk-nag findings the node role cannot avoid, each with HyperPod's reason."""
        acknowledge(
            role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy]",
            "HyperPod requires its managed instance policy on the node role.",
        )
        reasons: dict[tuple[tuple[str, ...], str], list[str]] = {}  # one per resources and why
        for actions, kinds, _, why in _NODE_EC2_GRANTS:
            reasons.setdefault((kinds, why), []).extend(actions)
        for (kinds, why), joined in reasons.items():
            acknowledge_wildcard_resources(policy, self._ec2_resources(kinds), why, actions=joined)
        acknowledge_wildcard_resources(
            policy,
            [f"{self.lifecycle_bucket.bucket_arn}/{_LIFECYCLE_PREFIX}/*"],
            "Read of the lifecycle scripts under their prefix.",
            actions=["s3:GetObject"],
        )

    def _instance_group(
        self, group: HyperPodInstanceGroup
    ) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        """A group's entry; GPU groups override the subnets when they sit in fewer."""
        override = None
        if group.role == GPU_NODE_ROLE and self.gpu_subnets != self.private_subnets:
            override = sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=[self.node_security_group.security_group_id],
                subnets=[subnet.subnet_id for subnet in self.gpu_subnets],
            )
        return group._render(
            execution_role_arn=self.execution_role.role_arn,
            lifecycle_source_uri=f"s3://{self.lifecycle_bucket.bucket_name}/{_LIFECYCLE_PREFIX}/",
            on_create=_ON_CREATE_SCRIPT,
            override_vpc_config=override,
        )


#: Add-on configuration: the VPC CNI enforces NetworkPolicies (the serving pods' isolation)
#: only with ``enableNetworkPolicy`` (https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html).
_ADDON_CONFIGURATION: dict[str, dict[str, str]] = {"vpc-cni": {"enableNetworkPolicy": "true"}}


def _validate_gpu_zone(
    problems: Problems, region: str, new_vpc: bool, az_id: str | None, cidr: str | None
) -> None:
    """The AZ ID's format and Region (when known), the CIDR's syntax, a CIDR for imported VPCs."""
    if az_id is not None:
        why = az_id_problem(az_id, None if Token.is_unresolved(region) else region)
        if why:
            problems.add("gpu_availability_zone_id", az_id, why)
        if cidr is None and not new_vpc:
            problems.add(
                "gpu_subnet_cidr",
                None,
                "required with gpu_availability_zone_id and an imported VPC (a free IPv4 block of it)",
            )
    if cidr is not None:
        try:
            ipaddress.IPv4Network(cidr)
        except ValueError as error:
            problems.add("gpu_subnet_cidr", cidr, f"must be an IPv4 CIDR block ({error})")
        if az_id is None:
            problems.add("gpu_subnet_cidr", cidr, "only applies with gpu_availability_zone_id")


def _used_blocks(vpc: ec2.IVpc) -> list[ipaddress.IPv4Network]:
    subnets = [*vpc.public_subnets, *vpc.private_subnets, *vpc.isolated_subnets]
    return [ipaddress.IPv4Network(subnet.ipv4_cidr_block) for subnet in subnets]


def _fits(vpc: ec2.IVpc, cidr: str) -> bool:
    """``cidr`` lies in our VPC's CIDR and overlaps none of its subnets."""
    block = ipaddress.IPv4Network(cidr)
    return block.subnet_of(ipaddress.IPv4Network(_VPC_CIDR)) and not any(
        block.overlaps(used) for used in _used_blocks(vpc)
    )


def _free_block(vpc: ec2.IVpc, like: Sequence[ec2.ISubnet]) -> str | None:
    """The first block of our VPC's CIDR, the size of ``like[0]``, no subnet overlaps."""
    used = _used_blocks(vpc)
    size = ipaddress.IPv4Network(like[0].ipv4_cidr_block).prefixlen
    for block in ipaddress.IPv4Network(_VPC_CIDR).subnets(new_prefix=size):
        if not any(block.overlaps(other) for other in used):
            return str(block)
    return None

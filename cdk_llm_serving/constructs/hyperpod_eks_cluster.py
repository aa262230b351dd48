"""``HyperPodEksCluster``: an EKS cluster and the SageMaker HyperPod cluster it orchestrates.

Deploy order, enforced with dependencies so one ``cdk deploy`` succeeds:

1. VPC, node security group, lifecycle bucket and its ``on_create.sh`` upload;
2. EKS cluster (private endpoint), then the node add-ons that must exist before nodes
   join (VPC CNI at a pinned version >= HyperPod's minimum, kube-proxy, pod identity agent);
3. the HyperPod cluster, after the EKS cluster, those add-ons and the script upload;
4. add-ons that need running nodes (CoreDNS), then charts and manifests
   (``HyperPodServingAddons``), ordered after the HyperPod cluster via ``nodes_ready``.

What ``cdk destroy`` removes: the HyperPod and EKS clusters with everything running on
them, the VPC and the node roles. What it keeps: the lifecycle bucket and the VPC flow-log
group (retained), and anything ``HyperPodServingAddons`` retains (the FSx file system).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

from aws_cdk import Acknowledgment, Names, RemovalPolicy, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deployment
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IConstruct

from ..errors import Problems
from ..nag import acknowledge, acknowledge_cdk_internals, acknowledge_wildcard_resources
from ..planning.catalog import Catalog, default_catalog
from .hyperpod_instance_group import HyperPodInstanceGroup

LIFECYCLE_PREFIX = "lifecycle"
ON_CREATE_SCRIPT = "on_create.sh"


@functools.cache
def hyperpod_facts() -> dict:
    return json.loads(resources.files(__package__).joinpath("data", "hyperpod.json").read_text())


def supported_kubernetes_versions() -> tuple[str, ...]:
    return tuple(hyperpod_facts()["kubernetes_versions"])


def _kubectl_layer(scope: Construct, version: str) -> object:
    """The kubectl/helm Lambda layer matching the cluster version (PyPI: aws-cdk.lambda-layer-kubectl-v3x)."""
    if version == "1.33":
        from aws_cdk.lambda_layer_kubectl_v33 import KubectlV33Layer

        return KubectlV33Layer(scope, "KubectlLayer")
    if version == "1.34":
        from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer

        return KubectlV34Layer(scope, "KubectlLayer")
    raise ValueError(f"no kubectl layer packaged for Kubernetes {version}")


class HyperPodEksCluster(Construct):
    """EKS plus HyperPod, ready for multi-node GPU serving.

    :param instance_groups: one CPU ``system`` group for controllers and at least one GPU group.
    :param vpc: an existing VPC with private subnets. Default: a new VPC over two Availability
        Zones with one NAT gateway, an S3 gateway endpoint and flow logs.
    :param gpu_subnet: the one subnet every GPU group (and the FSx file system) uses, so
        multi-node replicas sit close together. Default: the first private subnet. ``None``
        together with ``single_gpu_subnet=False`` spreads GPU groups over all private subnets.
    :param single_gpu_subnet: place all GPU groups in ``gpu_subnet``. Default: ``True``.
    :param kubernetes_version: a version HyperPod supports and we ship a kubectl layer for.
        Default: 1.33.
    :param admin_role_arns: IAM roles granted cluster-admin through EKS access entries.
    :param endpoint_public: also expose the EKS API endpoint publicly. Default: ``False``.
    :param addon_versions: EKS add-on name -> version. Default: the pins in ``data/hyperpod.json``
        (VPC CNI pinned; add-ons left ``null`` there take EKS's default for the version).
    :param cluster_name: HyperPod cluster name. Default: derived from the construct path.
    :param catalog: the planner's instance catalog GPU groups are checked against.
        Default: ``default_catalog()``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        instance_groups: Sequence[HyperPodInstanceGroup],
        vpc: ec2.IVpc | None = None,
        single_gpu_subnet: bool = True,
        kubernetes_version: str = "1.33",
        admin_role_arns: Sequence[str] = (),
        endpoint_public: bool = False,
        addon_versions: Mapping[str, str | None] | None = None,
        cluster_name: str | None = None,
        catalog: Catalog | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.catalog = catalog or default_catalog()
        self.instance_groups = tuple(instance_groups)
        self.kubernetes_version = kubernetes_version
        self._validate(admin_role_arns)
        versions = {**hyperpod_facts()["addon_versions"], **(addon_versions or {})}

        self.vpc = vpc or self._new_vpc()
        private = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets
        self.private_subnets: list[ec2.ISubnet] = list(private)
        self.gpu_subnets: list[ec2.ISubnet] = self.private_subnets[:1] if single_gpu_subnet else self.private_subnets
        self.node_security_group = self._node_security_group()

        self.eks_cluster = eks.Cluster(
            self,
            "Eks",
            version=eks.KubernetesVersion.of(kubernetes_version),
            vpc=self.vpc,
            vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
            endpoint_access=eks.EndpointAccess.PUBLIC_AND_PRIVATE if endpoint_public else eks.EndpointAccess.PRIVATE,
            kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=_kubectl_layer(self, kubernetes_version)),  # type: ignore[arg-type]
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            cluster_logging=[
                eks.ClusterLoggingTypes.API,
                eks.ClusterLoggingTypes.AUDIT,
                eks.ClusterLoggingTypes.AUTHENTICATOR,
                eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
                eks.ClusterLoggingTypes.SCHEDULER,
            ],
        )
        self.eks_cluster.connections.allow_from(self.node_security_group, ec2.Port.all_traffic(), "HyperPod nodes to the EKS control plane")
        self.node_security_group.connections.allow_from(self.eks_cluster.connections, ec2.Port.all_traffic(), "EKS control plane to kubelets and webhooks")
        for index, arn in enumerate(admin_role_arns):
            self.eks_cluster.grant_access(
                f"Admin{index}",
                arn,
                [eks.AccessPolicy.from_access_policy_name("AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER)],
            )

        before_nodes = [self._addon(name, versions.get(name)) for name in hyperpod_facts()["addons_before_nodes"]]
        self.lifecycle_bucket, upload = self._lifecycle_bucket()
        self.execution_role = self._execution_role()

        self.cfn_cluster = sagemaker.CfnCluster(
            self,
            "Resource",
            cluster_name=cluster_name or Names.unique_resource_name(self, max_length=63, separator="-"),
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=self.eks_cluster.cluster_arn)),
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=[self.node_security_group.security_group_id],
                subnets=[subnet.subnet_id for subnet in self.private_subnets],
            ),
            node_recovery="Automatic",
            node_provisioning_mode="Continuous",
            instance_groups=[self._instance_group(group) for group in self.instance_groups],
        )
        # The EKS cluster comes first through the ClusterArn reference. A construct-level
        # dependency on it would also take in the manifests and charts added to it later,
        # which themselves wait for the HyperPod nodes: a cycle.
        for dependency in [upload, *before_nodes]:
            self.cfn_cluster.node.add_dependency(dependency)
        policy = self.execution_role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.cfn_cluster.node.add_dependency(policy)

        after_nodes = [self._addon(name, versions.get(name)) for name in hyperpod_facts()["addons_after_nodes"]]
        for addon in after_nodes:
            addon.node.add_dependency(self.cfn_cluster)
        self.addons: dict[str, eks.Addon] = {addon.node.id: addon for addon in [*before_nodes, *after_nodes]}
        acknowledge_cdk_internals(
            self.eks_cluster.node.find_child("KubectlProvider"),
            "aws-cdk-lib's kubectl provider: its handler runs in the VPC to reach the private EKS endpoint, with the policies and runtime aws-cdk-lib chooses.",
        )
        acknowledge_cdk_internals(self.eks_cluster.node.find_child("Role"), "The EKS service role with AmazonEKSClusterPolicy, as EKS requires.")
        for child in Stack.of(self).node.children:
            if child.node.id.startswith("Custom::CDKBucketDeployment"):
                acknowledge_cdk_internals(child, "aws-cdk-lib's bucket-deployment handler that uploads the lifecycle script: it reads the CDK asset bucket and writes the lifecycle bucket.")

    # -- what dependents need ----------------------------------------------------------

    @property
    def nodes_ready(self) -> IConstruct:
        """Depend on this to run after the HyperPod nodes exist (charts with webhooks, workloads)."""
        return self.cfn_cluster

    @property
    def gpu_groups(self) -> list[HyperPodInstanceGroup]:
        return [group for group in self.instance_groups if group.role == "gpu"]

    # -- parts -------------------------------------------------------------------------

    def _validate(self, admin_role_arns: Sequence[str]) -> None:
        problems = Problems(f"HyperPodEksCluster '{self.node.path}'")
        names: dict[str, int] = {}
        for index, group in enumerate(self.instance_groups):
            group.validate(problems, f"instance_groups[{index}]", self.catalog)
            if group.name in names:
                problems.add(f"instance_groups[{index}].name", group.name, f"already used by instance_groups[{names[group.name]}]; group names must be unique")
            names.setdefault(group.name, index)
        if not any(group.role == "gpu" for group in self.instance_groups):
            problems.add("instance_groups", [g.name for g in self.instance_groups], "needs at least one GPU group to serve on")
        if not any(group.role == "system" for group in self.instance_groups):
            problems.add("instance_groups", [g.name for g in self.instance_groups], "needs a system group: controllers and CoreDNS must not take GPU nodes")
        versions = supported_kubernetes_versions()
        if self.kubernetes_version not in versions:
            problems.add("kubernetes_version", self.kubernetes_version, f"must be one HyperPod supports and we ship a kubectl layer for: {', '.join(versions)}")
        for index, arn in enumerate(admin_role_arns):
            if not arn.startswith("arn:") or ":iam::" not in arn or ":role/" not in arn:
                problems.add(f"admin_role_arns[{index}]", arn, "must be an IAM role ARN (arn:<partition>:iam::<account>:role/<name>)")
        problems.raise_if_any()

    def _new_vpc(self) -> ec2.Vpc:
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                # Pods take VPC addresses (VPC CNI): large private subnets.
                ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=18),
            ],
            gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)},
        )
        flow_logs = logs.LogGroup(self, "FlowLogs", retention=logs.RetentionDays.ONE_YEAR, removal_policy=RemovalPolicy.RETAIN)
        vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs))
        return vpc

    def _node_security_group(self) -> ec2.SecurityGroup:
        group = ec2.SecurityGroup(self, "NodeSecurityGroup", vpc=self.vpc, allow_all_outbound=True, description="HyperPod nodes: EFA/NCCL among themselves, FSx for Lustre")
        group.add_ingress_rule(group, ec2.Port.all_traffic(), "all traffic between nodes (EFA needs it)")
        group.add_ingress_rule(group, ec2.Port.tcp(988), "FSx for Lustre")
        group.add_ingress_rule(group, ec2.Port.tcp_range(1018, 1023), "FSx for Lustre")
        return group

    def _addon(self, name: str, version: str | None) -> eks.Addon:
        return eks.Addon(self, f"Addon-{name}", cluster=self.eks_cluster, addon_name=name, addon_version=version, preserve_on_delete=False)

    def _lifecycle_bucket(self) -> tuple[s3.Bucket, s3_deployment.BucketDeployment]:
        bucket = s3.Bucket(
            self,
            "LifecycleScripts",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            versioned=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        acknowledge(bucket, "AwsSolutions-S1", "Holds only the lifecycle script CloudFormation uploads; the stack's history is its audit trail, server access logs add nothing.")
        script_dir = Path(str(resources.files(__package__).joinpath("lifecycle")))
        upload = s3_deployment.BucketDeployment(
            self,
            "LifecycleUpload",
            destination_bucket=bucket,
            destination_key_prefix=f"{LIFECYCLE_PREFIX}/",
            sources=[s3_deployment.Source.asset(str(script_dir))],
            prune=True,
            retain_on_delete=True,
        )
        return bucket, upload

    def _execution_role(self) -> iam.Role:
        role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSageMakerClusterInstanceRolePolicy")],
            description="HyperPod node execution role (cdk-llm-serving)",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "ec2:AssignPrivateIpAddresses",
                    "ec2:CreateNetworkInterface",
                    "ec2:CreateNetworkInterfacePermission",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DeleteNetworkInterfacePermission",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeVpcs",
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DetachNetworkInterface",
                    "ec2:ModifyNetworkInterfaceAttribute",
                    "ec2:UnassignPrivateIpAddresses",
                ],
                resources=["*"],
            )
        )
        role.add_to_policy(iam.PolicyStatement(actions=["ec2:CreateTags"], resources=[Stack.of(self).format_arn(service="ec2", resource="network-interface", resource_name="*")]))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetAuthorizationToken", "ecr:GetDownloadUrlForLayer"],
                resources=["*"],
            )
        )
        self.lifecycle_bucket.grant_read(role, f"{LIFECYCLE_PREFIX}/*")
        acknowledge(role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy]", "HyperPod requires its managed instance policy on the node role.")
        acknowledge_wildcard_resources(
            role,
            ["*"],
            "HyperPod attaches ENIs in the cluster's subnets (EC2 network-interface actions take no ARN known at synth time) and nodes pull serving images from repositories chosen at deploy time.",
        )
        acknowledge_wildcard_resources(role, [Stack.of(self).format_arn(service="ec2", resource="network-interface", resource_name="*")], "Tags only network interfaces, whose IDs exist only at run time.")
        for action in ("s3:GetBucket*", "s3:GetObject*", "s3:List*"):
            Validations.of(role).acknowledge(Acknowledgment(id=f"AwsSolutions-IAM5[Action::{action}]", reason="Read-only access to the lifecycle-script bucket (CDK's grant_read)."))
        acknowledge_wildcard_resources(role, [f"{self.lifecycle_bucket.bucket_arn}/{LIFECYCLE_PREFIX}/*"], "Read of the lifecycle scripts under their prefix.")
        return role

    def _instance_group(self, group: HyperPodInstanceGroup) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        override = None
        if group.role == "gpu" and self.gpu_subnets != self.private_subnets:
            override = sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=[self.node_security_group.security_group_id],
                subnets=[subnet.subnet_id for subnet in self.gpu_subnets],
            )
        taints = group.effective_taints
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=group.name,
            instance_type=group.instance_type,
            instance_count=group.count,
            execution_role=self.execution_role.role_arn,
            threads_per_core=group.threads_per_core,
            life_cycle_config=sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
                source_s3_uri=f"s3://{self.lifecycle_bucket.bucket_name}/{LIFECYCLE_PREFIX}/",
                on_create=ON_CREATE_SCRIPT,
            ),
            instance_storage_configs=[
                sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                    ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(volume_size_in_gb=group.ebs_volume_gb)
                )
            ],
            on_start_deep_health_checks=list(group.effective_health_checks) or None,
            kubernetes_config=sagemaker.CfnCluster.ClusterKubernetesConfigProperty(
                labels=group.effective_labels,
                taints=[sagemaker.CfnCluster.ClusterKubernetesTaintProperty(key=t.key, value=t.value, effect=t.effect) for t in taints] or None,
            ),
            training_plan_arn=group.training_plan_arn,
            override_vpc_config=override,
        )

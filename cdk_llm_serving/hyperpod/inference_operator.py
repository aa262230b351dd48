"""``HyperPodInferenceOperator``: AWS's SageMaker HyperPod inference operator, once per cluster.

The EKS add-on ``amazon-sagemaker-hyperpod-inference``
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-setup.html)
with what AWS's Helm-to-add-on migration script sets up for it (``helm_to_addon.sh``; every fact
cited in ``assets/inference_operator.json``): the cert-manager, Mountpoint for S3 CSI driver and
metrics-server add-ons, an execution role with AWS's managed policy, and a bucket for the
certificates it generates. Its own load balancer controller and KEDA stay off: those of
``HyperPodServingAddons`` serve (docs/design/hyperpod-cluster.md, "Inference operator").
``HyperPodInferenceOperator.of(addons)`` installs it on the first call and returns it after."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Annotations, Aws, CfnJson, Names, Stack, Token
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .._cdk.arns import HYPERPOD_CLUSTER, check_arn
from .._cdk.nag import acknowledge, acknowledge_wildcard_resources
from .._cdk.role_grants import ExecutionRoleGrants
from ..errors import Problems, checked_props
from ..model_sources import ModelData
from ._eks_addon import eks_addon
from ._facts import inference_operator_facts
from .addons import HyperPodServingAddons
from .cluster import HyperPodEksCluster, private_bucket
from .device_plugins import node_in, required_node_affinity
from .node_image_pulls import inference_operator_registry_arn

__all__ = ["HyperPodInferenceOperator", "inference_operator_facts"]

_CHILD_ID = "InferenceOperator"
#: Id of the managed policy ``enable_cloudwatch_scaling`` creates.
_CLOUDWATCH_SCALING_ID = "CloudWatchScalingPolicy"


#: The Mountpoint for S3 CSI driver's node DaemonSet tolerates every taint, or the worker pods'
#: S3 mounts fail on the tainted GPU nodes (its chart's default tolerates few; the add-on takes
#: the key from v1.8.0; docs/design/hyperpod-cluster.md, "Inference operator").
S3_CSI_CONFIGURATION: dict[str, Any] = {"node": {"tolerateAllTaints": True}}


class HyperPodInferenceOperator(Construct):
    """The inference operator add-on, its dependencies, roles and TLS bucket on one cluster.

    Use ``HyperPodInferenceOperator.of(addons)``; constructing it directly a second time on
    the same add-ons is refused by the construct tree (one child id).

    :param addons: the cluster's serving add-ons (load balancer controller, KEDA).
    :param hyperpod_cluster_arn: the HyperPod cluster's ARN (``hyperpodClusterArn``).
        Default: the ``HyperPodEksCluster``'s; required for an imported cluster.
    :param addon_version: the operator add-on's version. Default: the pin in
        ``assets/inference_operator.json``.
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        addons: HyperPodServingAddons,
        hyperpod_cluster_arn: str | None = None,
        addon_version: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.addons = addons
        self.cluster = addons.cluster
        self.facts = inference_operator_facts()
        self.namespace: str = self.facts["namespace"]
        self.hyperpod_cluster_arn = self._resolve_cluster_arn(hyperpod_cluster_arn)
        self.keda = addons.enable_keda()
        self.tls_bucket = self._render_tls_bucket()
        self.execution_role = self._render_execution_role()
        self.s3_csi_role = iam.Role(
            self,
            "S3CsiDriverRole",
            assumed_by=self._oidc_principal(
                self.facts["s3_csi_namespace"], self.facts["s3_csi_service_account"]
            ),
            description="Mountpoint for S3 CSI driver: reads the weights of the endpoints that use it",
        )
        self._s3_grants = ExecutionRoleGrants(self, self.s3_csi_role)
        self.dependencies = self._render_dependencies()
        self.addon = self._render_addon(addon_version or self.facts["addon"]["version"])

    @classmethod
    def of(
        cls, addons: HyperPodServingAddons, *, hyperpod_cluster_arn: str | None = None
    ) -> HyperPodInferenceOperator:
        """The cluster's installation: created on the first call, the same one after."""
        existing = addons.node.try_find_child(_CHILD_ID)
        if isinstance(existing, HyperPodInferenceOperator):
            return existing
        return cls(addons, _CHILD_ID, addons=addons, hyperpod_cluster_arn=hyperpod_cluster_arn)

    # -- what endpoints request ----------------------------------------------------------

    def add_model_source(self, model_data: ModelData) -> None:
        """Let the S3 CSI driver mount ``model_data``'s prefix (read-only, that prefix only).

        Wiring of the operator's own S3 CSI role for an endpoint's weights, not a grant to a
        grantee: ``HyperPodInferenceEndpoint`` calls it for S3 weights.
        """
        self._s3_grants.model_data_read(model_data)
        self._s3_grants.acknowledge()

    def enable_cloudwatch_scaling(self) -> iam.ManagedPolicy:
        """Let KEDA's operator read CloudWatch for ``cloudWatchTrigger`` autoscaling; created on
        the first call (one per cluster), as a managed policy (HIPAA.Security IAMNoInlinePolicy).
        """
        existing = self.node.try_find_child(_CLOUDWATCH_SCALING_ID)
        if isinstance(existing, iam.ManagedPolicy):
            return existing
        policy = iam.ManagedPolicy(
            self,
            _CLOUDWATCH_SCALING_ID,
            description="KEDA operator: reads CloudWatch metrics for the inference endpoints' scaling",
            statements=[
                iam.PolicyStatement(
                    actions=["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics"],
                    resources=["*"],
                )
            ],
            roles=[self.keda.operator_role],
        )
        acknowledge_wildcard_resources(
            policy,
            ["*"],
            "CloudWatch GetMetricData/GetMetricStatistics have no resource-level permissions "
            "(Service Authorization Reference, Amazon CloudWatch).",
            actions=["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics"],
        )
        return policy

    def controller_pod_template(self) -> dict[str, Any]:
        """The operator's controller pod, for placement checks.

        As the operator's chart renders it (charts/inference-operator/values.yaml ``affinity``:
        amd64 Linux nodes; ``tolerations: []``; config/manager/manager.yaml: no resource
        beyond CPU and memory): it lands on an untainted node, i.e. the system group.
        """
        return {
            "metadata": {"labels": {"control-plane": "hyperpod-inference-controller-manager"}},
            "spec": {
                "affinity": {
                    "nodeAffinity": required_node_affinity(
                        node_in("kubernetes.io/arch", ["amd64"]),
                        node_in("kubernetes.io/os", ["linux"]),
                    )
                },
                "tolerations": [],
                "containers": [
                    {
                        "name": "manager",
                        "image": "hyperpod-inference-operator",
                        "resources": {
                            "requests": {"cpu": "10m", "memory": "64Mi"},
                            "limits": {"cpu": "500m", "memory": "256Mi"},
                        },
                    }
                ],
            },
        }

    # -- resolve -------------------------------------------------------------------------

    def _resolve_cluster_arn(self, given: str | None) -> str:
        """The HyperPod cluster's ARN; an imported cluster must give it and its OIDC provider."""
        problems = Problems(f"HyperPodInferenceOperator '{self.node.path}'")
        try:
            _ = self.cluster.eks_cluster.open_id_connect_provider
        except RuntimeError:
            problems.add(
                "addons.cluster",
                self.cluster.eks_cluster.cluster_name,
                "import the EKS cluster with its open_id_connect_provider: the operator's roles "
                "trust its service accounts through IAM roles for service accounts",
            )
        arn = given
        if arn is None and isinstance(self.cluster, HyperPodEksCluster):
            arn = self.cluster.cfn_cluster.attr_cluster_arn
        if arn is None:
            problems.add(
                "hyperpod_cluster_arn",
                given,
                "required for an imported cluster: the ARN of the HyperPod cluster (hyperpodClusterArn)",
            )
        check_arn(problems, "hyperpod_cluster_arn", given, HYPERPOD_CLUSTER, self)
        problems.raise_if_any()
        assert arn is not None
        return arn

    # -- render --------------------------------------------------------------------------

    def _render_tls_bucket(self) -> s3.Bucket:
        """Private, encrypted, TLS-only, access-logged; retained (it holds the endpoints'
        certificates)."""
        # No AwsSolutions-S1 on it: cdk-nag's rule passes a bucket that is another's log target.
        #: Server access logs of the certificate bucket.
        self.tls_access_logs = private_bucket(self, "TlsCertificatesAccessLogs")
        return private_bucket(
            self,
            "TlsCertificates",
            server_access_logs_bucket=self.tls_access_logs,
            server_access_logs_prefix="tls-certificates/",
        )

    def _oidc_principal(self, namespace: str, service_account: str) -> iam.IPrincipal:
        """IRSA: the cluster's OIDC provider, for exactly one namespace/service account."""
        provider = self.cluster.eks_cluster.open_id_connect_provider
        issuer = provider.open_id_connect_provider_issuer
        conditions = CfnJson(
            self,
            f"Trust-{namespace}-{service_account}",
            value={
                f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                f"{issuer}:aud": "sts.amazonaws.com",
            },
        )
        return iam.OpenIdConnectPrincipal(provider, {"StringEquals": conditions})

    def _render_execution_role(self) -> iam.Role:
        """The operator's role: AWS's managed policy, the TLS bucket's objects, nothing else."""
        prefix = self.facts["execution_role_prefix"]
        role = iam.Role(
            self,
            "ExecutionRole",
            role_name=f"{prefix}-{Names.unique_resource_name(self, max_length=64 - len(prefix) - 1)}",
            assumed_by=iam.CompositePrincipal(
                self._oidc_principal(self.namespace, self.facts["operator_service_account"]),
                iam.ServicePrincipal("sagemaker.amazonaws.com").with_conditions(
                    {"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
                ),
            ),
            description="SageMaker HyperPod inference operator: deploys and registers endpoints",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(
                    self.facts["execution_role_managed_policy"]
                )
            ],
        )
        objects = self.tls_bucket.arn_for_objects("*")
        # In a customer managed policy of its own, not the role's inline default policy
        # (HIPAA.Security IAMNoInlinePolicy).
        grants = ExecutionRoleGrants(self, role, "OperatorRolePolicy")
        actions = ["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject"]
        grants.add(iam.PolicyStatement(actions=actions, resources=[objects]))
        assert grants.policy is not None  # add() created it
        #: The execution role's own grants (the certificate bucket's objects).
        self.execution_role_policy = grants.policy
        acknowledge(
            role,
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{self.facts['execution_role_managed_policy']}]",
            "AmazonSageMakerHyperPodInferenceAccess is the policy AWS documents for the operator's "
            "execution role (helm_to_addon.sh); the add-on requires the role-name prefix it is scoped to.",
        )
        acknowledge_wildcard_resources(
            grants.policy,
            [objects],
            "The operator names the certificate objects it writes; the bucket holds nothing else.",
            actions=actions,
        )
        return role

    def _render_dependencies(self) -> dict[str, Any]:
        """cert-manager (the cluster's one, ``enable_cert_manager``), metrics-server and the S3
        CSI driver (IRSA), after the nodes."""
        versions: dict[str, str] = self.facts["dependencies"]
        eks_cluster = self.cluster.eks_cluster
        deps: dict[str, Any] = {}
        # cert-manager: one per cluster, shared with the multi-node service's TLS.
        deps["cert-manager"] = self.addons.enable_cert_manager()
        deps["metrics-server"] = eks_addon(
            self,
            "Addon-metrics-server",
            cluster=eks_cluster,
            addon_name="metrics-server",
            addon_version=versions["metrics-server"],
        )
        s3_csi = "aws-mountpoint-s3-csi-driver"
        deps[s3_csi] = eks.CfnAddon(
            self,
            f"Addon-{s3_csi}",
            cluster_name=eks_cluster.cluster_name,
            addon_name=s3_csi,
            addon_version=versions[s3_csi],
            service_account_role_arn=self.s3_csi_role.role_arn,
            resolve_conflicts="OVERWRITE",
            configuration_values=json.dumps(S3_CSI_CONFIGURATION, separators=(",", ":")),
        )
        for dependency in deps.values():
            dependency.node.add_dependency(self.cluster.nodes_ready)
        return deps

    def _configuration_values(self) -> dict[str, Any]:
        """The add-on's configuration (keys as helm_to_addon.sh passes them)."""
        alb_here = self.addons.load_balancer_controller is not None
        if not alb_here:
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:inferenceOperatorNoLoadBalancerController",
                "the add-ons install no AWS Load Balancer Controller: the inference operator's "
                "endpoints need one in the cluster (install it, or pass alb settings yourself)",
            )
        return {
            "executionRoleArn": self.execution_role.role_arn,
            "tlsCertificateS3Bucket": self.tls_bucket.bucket_name,
            "hyperpodClusterArn": self.hyperpod_cluster_arn,
            "alb": {"enabled": False},
            "keda": {"enabled": False},
        }

    def _render_addon(self, version: str) -> eks.Addon:
        # The operator's images: its Region's registry (node_image_registries.json).
        region = Stack.of(self).region
        registry = None if Token.is_unresolved(region) else inference_operator_registry_arn(region)
        if isinstance(self.cluster, HyperPodEksCluster):
            if registry is not None:
                self.cluster.allow_registry_pull(registry)
            else:
                self.cluster.allow_any_image_pull(
                    f"the inference operator's registry in Region {region} is not known at synth"
                )
        addon = eks_addon(
            self,
            "Addon",
            cluster=self.cluster.eks_cluster,
            addon_name=self.facts["addon"]["name"],
            addon_version=version,
            configuration_values=self._configuration_values(),
        )
        # The operator's chart creates cert-manager Issuers and Certificates for its own
        # webhook: it waits for cert-manager's webhook as the service's TLS objects do.
        for prerequisite in (
            *self.dependencies.values(),
            self.addons.enable_cert_manager_webhook(),
            self.cluster.fsx_csi_driver,
            self.keda.chart,
            self.execution_role,
            self.execution_role_policy,
        ):
            addon.node.add_dependency(prerequisite)
        if self.addons.load_balancer_controller is not None:
            addon.node.add_dependency(self.addons.load_balancer_controller)
        return addon

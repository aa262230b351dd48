"""``VllmReplicaAutoscaling``: more LeaderWorkerSet replicas when requests queue up.

KEDA scales the LeaderWorkerSet (it has a scale subresource) on the queue depth that
``VllmObservability`` records in Amazon Managed Prometheus: ``vllm:requests_waiting``
per replica above the threshold adds a replica. KEDA's operator queries AMP with an EKS
Pod Identity role allowed ``aps:QueryMetrics`` on that workspace only. The replica
ceiling is what the GPU group holds: group nodes // nodes per replica.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from ..errors import Problems
from .addons import HyperPodServingAddons
from .cluster import HyperPodEksCluster, hyperpod_facts
from .multi_node_service import LWS_API_VERSION, VllmMultiNodeService
from .observability import VllmObservability

KEDA_NAMESPACE = "keda"
KEDA_OPERATOR_ACCOUNT = "keda-operator"


class VllmReplicaAutoscaling(Construct):
    """Scale replicas of ``service`` between ``min_replicas`` and what the GPU group holds.

    :param waiting_requests_per_replica: queue depth per replica that KEDA holds. Default: 8.
    :param min_replicas: Default: 1.
    :param max_replicas: Default: the GPU group's nodes // nodes per replica.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: HyperPodEksCluster,
        addons: HyperPodServingAddons,
        service: VllmMultiNodeService,
        observability: VllmObservability,
        waiting_requests_per_replica: int = 8,
        min_replicas: int = 1,
        max_replicas: int | None = None,
    ) -> None:
        super().__init__(scope, id)
        ceiling = service.group.count // service.nodes
        max_replicas = max_replicas if max_replicas is not None else ceiling
        problems = Problems(f"VllmReplicaAutoscaling '{self.node.path}'")
        if min_replicas < 1:
            problems.add(
                "min_replicas",
                min_replicas,
                "must be at least 1 (a LeaderWorkerSet at 0 cannot report its queue)",
            )
        if not max(min_replicas, 1) <= max_replicas <= ceiling:
            problems.add(
                "max_replicas",
                max_replicas,
                f"must be between min_replicas ({min_replicas}) and {ceiling}: GPU group {service.group.name!r} holds {service.group.count} nodes, {service.nodes} per replica",
            )
        if waiting_requests_per_replica < 1:
            problems.add(
                "waiting_requests_per_replica", waiting_requests_per_replica, "must be at least 1"
            )
        problems.raise_if_any()
        self.service, self.observability = service, observability
        self.min_replicas, self.max_replicas, self.threshold = (
            min_replicas,
            max_replicas,
            waiting_requests_per_replica,
        )

        pin = hyperpod_facts()["charts"]["keda"]
        self.keda = eks.HelmChart(
            self,
            "Keda",
            cluster=cluster.eks_cluster,
            chart=pin["chart"],
            repository=pin["repository"],
            version=pin["version"],
            namespace=KEDA_NAMESPACE,
            create_namespace=True,
            wait=True,
            values={"tolerations": [], "nodeSelector": {"cdk-llm-serving/role": "system"}},
        )
        self.keda.node.add_dependency(cluster.nodes_ready)

        self.query_role = iam.Role(
            self,
            "QueryRole",
            assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com").with_session_tags(),
            description="KEDA operator: reads the vLLM queue depth from Amazon Managed Prometheus",
        )
        self.query_role.add_to_policy(
            iam.PolicyStatement(
                actions=["aps:QueryMetrics"], resources=[observability.workspace.attr_arn]
            )
        )
        self.pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "QueryIdentity",
            cluster_name=cluster.eks_cluster.cluster_name,
            namespace=KEDA_NAMESPACE,
            service_account=KEDA_OPERATOR_ACCOUNT,
            role_arn=self.query_role.role_arn,
        )
        self.pod_identity.node.add_dependency(cluster.addons["Addon-eks-pod-identity-agent"])

        self.manifest = eks.KubernetesManifest(
            self,
            "ScaledObject",
            cluster=cluster.eks_cluster,
            manifest=self.keda_objects(),
            overwrite=True,
        )
        for dependency in (self.keda, self.pod_identity, service.lws_manifest, observability.rules):
            self.manifest.node.add_dependency(dependency)

    def keda_objects(self) -> list[dict[str, Any]]:
        name = self.service.name
        return [
            {
                "apiVersion": "keda.sh/v1alpha1",
                "kind": "TriggerAuthentication",
                "metadata": {"name": f"{name}-amp", "namespace": self.service.namespace},
                "spec": {"podIdentity": {"provider": "aws"}},
            },
            {
                "apiVersion": "keda.sh/v1alpha1",
                "kind": "ScaledObject",
                "metadata": {"name": name, "namespace": self.service.namespace},
                "spec": {
                    "scaleTargetRef": {
                        "apiVersion": LWS_API_VERSION,
                        "kind": "LeaderWorkerSet",
                        "name": name,
                    },
                    "minReplicaCount": self.min_replicas,
                    "maxReplicaCount": self.max_replicas,
                    "cooldownPeriod": 900,
                    "triggers": [
                        {
                            "type": "prometheus",
                            "metadata": {
                                "serverAddress": self.observability.workspace.attr_prometheus_endpoint,
                                "query": "vllm:requests_waiting",
                                "threshold": str(self.threshold),
                                "awsRegion": Aws.REGION,
                                "identityOwner": "operator",
                            },
                            "authenticationRef": {"name": f"{name}-amp"},
                        }
                    ],
                },
            },
        ]

"""``VllmReplicaAutoscaling``: more LeaderWorkerSet replicas when requests queue up.

KEDA scales the LeaderWorkerSet (it has a scale subresource) on the queue depth that
``VllmObservability`` records in Amazon Managed Prometheus: ``vllm:requests_waiting``
per replica above the threshold adds a replica. KEDA's operator queries AMP with an EKS
Pod Identity role allowed ``aps:QueryMetrics`` on the watched workspaces only. KEDA and
that identity exist once per cluster, in ``HyperPodServingAddons`` (``enable_keda``), so
several services on one cluster each add only their ScaledObject. The replica ceiling is
what the GPU group holds: group nodes // nodes per replica. The default maximum is what is
still free of the group when the autoscaling is added: its nodes minus every other
consumer's reservation (services, endpoints, other autoscaling), // nodes per replica, so
two autoscaled services with defaults synthesize (the first takes what the second leaves
free; give ``max_replicas`` to share differently).

A GPU group that cluster node autoscaling may grow (``HyperPodInstanceGroup(max_count=...)``
with ``HyperPodEksCluster(node_autoscaling=...)``) holds its ``max_count``: the maximum
replicas may exceed the nodes the group has today, and a replica KEDA adds pends until
HyperPod's Karpenter adds its nodes (``node_autoscaling``).

Scale-in is drain-safe: every pod of the scaled LeaderWorkerSet sleeps in preStop until the
load balancer has deregistered it and its in-flight requests have finished
(``multi_node_manifests.drain_before_stop``), and ``longest_request`` must fit in that window.
"""

from __future__ import annotations

import math
from typing import Any

from aws_cdk import Aws, Duration
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from .._cdk.durations import Span
from .._cdk.validation import check_at_least, whole_seconds
from ..errors import Problems, checked_props
from .constants import KEDA_API_VERSION, LWS_API_VERSION, QUEUE_DEPTH_RULE
from .multi_node_manifests import NLB_DEREGISTRATION_DELAY_SECONDS, drain_before_stop
from .multi_node_service import VllmMultiNodeService
from .observability import VllmObservability

__all__ = ["VllmReplicaAutoscaling"]

#: ``longest_request``'s default: 5 minutes.
_LONGEST_REQUEST = Span.of_seconds(300)


class VllmReplicaAutoscaling(Construct):
    """Scale replicas of ``service`` between ``min_replicas`` and what the GPU group holds.

    :param service: the service to scale; its add-ons install KEDA once for all services.
    :param observability: the service's ``VllmObservability`` (KEDA queries its workspace).
    :param waiting_requests_per_replica: queue depth per replica that KEDA holds. Default: 8.
    :param min_replicas: Default: 1.
    :param max_replicas: Default: the GPU group's nodes still free at this point (its
        nodes, or its ``max_count`` when it autoscales, minus what other consumers reserved
        before, see ``free_gpu_nodes``) // nodes per replica, and at least ``min_replicas``.
    :param longest_request: the longest request the workload expects (prompt and full
        generation). A replica being scaled in keeps serving for the NLB's deregistration
        delay (300 s) plus a health-check interval before it stops, so a request up to this
        long finishes; longer than the deregistration delay is refused (the NLB may cut the
        connection). Default: 5 minutes.
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        service: VllmMultiNodeService,
        observability: VllmObservability,
        waiting_requests_per_replica: int = 8,
        min_replicas: int = 1,
        max_replicas: int | None = None,
        longest_request: Duration = _LONGEST_REQUEST.duration,
    ) -> None:
        super().__init__(scope, id)
        ceiling = service.group.capacity // service.nodes
        if max_replicas is None:
            free = service.cluster.free_gpu_nodes(service.group.name, service)
            max_replicas = max(min_replicas, free // service.nodes)
        self._validate(
            service,
            observability,
            ceiling,
            waiting_requests_per_replica,
            min_replicas,
            max_replicas,
            longest_request,
        )
        service.cluster.reserve_gpu_nodes(service, service.group.name, max_replicas * service.nodes)
        self.service, self.observability = service, observability
        self.min_replicas, self.max_replicas, self.threshold = (
            min_replicas,
            max_replicas,
            waiting_requests_per_replica,
        )

        #: How long a replica is kept after the queue drops, and how often one more may go: the
        #: planner's cold start of a replica (``service.cold_start``), at least the HPA's own
        #: 300 s default and at most 1800 s, the HPA's limit of a policy's ``periodSeconds``
        #: (autoscaling/v2 ``HPAScalingPolicy``).
        self.scale_in_window_seconds: int = min(
            1800, max(300, math.ceil(service.cold_start.total_seconds))
        )
        # KEDA owns the replica count from here: the LWS manifest no longer pins it.
        service.hand_replicas_to(self)
        #: preStop sleep and termination grace of the scaled pods (``drain_before_stop``).
        self.drain = drain_before_stop(service.lws["spec"])
        self.longest_request = longest_request
        service.warn_rollout_at(max_replicas)
        keda = service.addons.enable_keda()
        #: KEDA's operator may query the workspace: a customer managed policy of this scaling's
        #: own on the operator's role (one per scaled service), not the role's inline default
        #: policy (HIPAA.Security ``IAMNoInlinePolicy``).
        self.query_policy = iam.ManagedPolicy(
            self,
            "QueryPolicy",
            description=f"KEDA operator: queries the {service.name} metrics workspace",
            statements=[observability.query_statement()],
            roles=[keda.operator_role],
        )
        self.keda = keda.chart
        self.query_role = keda.operator_role
        self.pod_identity = keda.operator_identity
        self.manifest = eks.KubernetesManifest(
            self,
            "ScaledObject",
            cluster=service.cluster.eks_cluster,
            manifest=self.keda_objects(),
            overwrite=True,
        )
        for dependency in (
            self.keda,
            self.pod_identity,
            self.query_policy,
            service.lws_manifest,
            observability.rules,
        ):
            self.manifest.node.add_dependency(dependency)

    def _validate(
        self,
        service: VllmMultiNodeService,
        observability: VllmObservability,
        ceiling: int,
        waiting_requests_per_replica: int,
        min_replicas: int,
        max_replicas: int,
        longest_request: Duration,
    ) -> None:
        problems = Problems(f"VllmReplicaAutoscaling '{self.node.path}'")
        if observability.service is not service:
            problems.add(
                "observability",
                observability.node.path,
                f"must watch the scaled service {service.node.path}: KEDA reads its queue depth there",
            )
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
                f"must be between min_replicas ({min_replicas}) and {ceiling}: GPU group {service.group.name!r} holds {service.group.capacity} nodes"
                + (" at its max_count" if service.group.autoscaled else "")
                + f", {service.nodes} per replica",
            )
        if (
            not 0
            < whole_seconds(longest_request, _LONGEST_REQUEST)
            <= NLB_DEREGISTRATION_DELAY_SECONDS
        ):
            problems.add(
                "longest_request",
                _LONGEST_REQUEST.given(longest_request).human(),
                f"must be more than 0 and at most the NLB's deregistration delay "
                f"({NLB_DEREGISTRATION_DELAY_SECONDS} s): a scaled-in replica serves its "
                "in-flight requests only that long",
            )
        check_at_least(problems, "waiting_requests_per_replica", waiting_requests_per_replica, 1)
        problems.raise_if_any()

    def keda_objects(self) -> list[dict[str, Any]]:
        """A TriggerAuthentication (the operator's identity) and the ScaledObject on queue depth."""
        name = self.service.name
        return [
            {
                "apiVersion": KEDA_API_VERSION,
                "kind": "TriggerAuthentication",
                "metadata": {"name": f"{name}-amp", "namespace": self.service.namespace},
                "spec": {"podIdentity": {"provider": "aws"}},
            },
            {
                "apiVersion": KEDA_API_VERSION,
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
                    # cooldownPeriod only delays scaling to 0 (KEDA, scaledobject-spec
                    # "cooldownPeriod"; min_replicas is at least 1 here); scale-in between
                    # replicas is the HPA's, 300 s by default. Hold a replica at least as long
                    # as a new one takes to start, and remove one at a time, so a dip in the
                    # queue does not drop a replica the next burst waits minutes for
                    # (https://keda.sh/docs/2.17/reference/scaledobject-spec/#horizontalpodautoscalerconfig,
                    # https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#configurable-scaling-behavior).
                    "advanced": {
                        "horizontalPodAutoscalerConfig": {
                            "behavior": {
                                "scaleDown": {
                                    "stabilizationWindowSeconds": self.scale_in_window_seconds,
                                    "policies": [
                                        {
                                            "type": "Pods",
                                            "value": 1,
                                            "periodSeconds": self.scale_in_window_seconds,
                                        }
                                    ],
                                }
                            }
                        }
                    },
                    "triggers": [
                        {
                            "type": "prometheus",
                            "metadata": {
                                "serverAddress": self.observability.workspace.attr_prometheus_endpoint,
                                "query": QUEUE_DEPTH_RULE,
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

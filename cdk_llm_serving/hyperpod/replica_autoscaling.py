"""``VllmReplicaAutoScaling``: more LeaderWorkerSet replicas when requests queue up.

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

Scale to zero is an explicit opt-in: ``min_replicas=0`` with
``scale_to_zero=ScaleToZero(wake=...)``, one of two wakes. ``WakeOnConnect()``: a client's
connection wakes the service; a small always-on proxy (``wake_proxy``) stays the NLB's
registered target at zero replicas, so the connection counts in the NLB's ``NewFlowCount``,
which KEDA watches. ``WakeSchedule(...)``: a schedule wakes it, and nothing else (no NLB metric
is documented to count a connection while its target group is empty, ``WAKE_SOURCE``). See
``ScaleToZero``, ``WakeOnConnect`` and ``WakeSchedule``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import zoneinfo
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations, Aws, CfnOutput, Duration, Fn
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from .._cdk.durations import Span
from .._cdk.nag import acknowledge_wildcard_resources
from .._cdk.validation import check_at_least, whole_seconds
from ..errors import Problems, checked_props
from .constants import KEDA_API_VERSION, LWS_API_VERSION, QUEUE_DEPTH_RULE, REQUESTS_RUNNING_RULE
from .multi_node_manifests import (
    NLB_DEREGISTRATION_DELAY_SECONDS,
    NLB_HEALTH_CHECK_INTERVAL_SECONDS,
    drain_before_stop,
)
from .multi_node_service import VllmMultiNodeService
from .node_readiness import group_budget
from .observability import VllmObservability
from .prefix_routing import PROXY_IMAGE
from .wake_proxy import WAKE_PROXY_TIMEOUT_MARGIN_SECONDS, WakeProxyDeployment

__all__ = [
    "ScaleToZero",
    "VllmReplicaAutoScaling",
    "WakeOnConnect",
    "WakeSchedule",
    "WakeTime",
    "default_load_balancer_prefix",
]

#: The running-requests trigger's threshold (``_running_trigger``): the trigger asks for
#: ``ceil(running / threshold)`` replicas, so it asks for a second replica only once a million
#: requests run at once; queue depth, not this trigger, scales beyond one replica.
RUNNING_TRIGGER_THRESHOLD = 1_000_000
#: ``longest_request``'s default: 5 minutes.
_LONGEST_REQUEST = Span.of_seconds(300)
#: ``ScaleToZero.max_first_request_wait``'s default: 1 hour.
_MAX_FIRST_REQUEST_WAIT = Span.of_seconds(3600)

#: Why no load-balancer metric wakes a service at zero (issue 30, decided): at zero replicas
#: the NLB's target group has no registered target, and no ``AWS/NetworkELB`` metric is
#: documented to count a client's connection then (ELB user guide, "CloudWatch metrics for your
#: Network Load Balancer",
#: https://docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-cloudwatch-metrics.html):
#: ``NewFlowCount`` counts "new flows (or connections) established from clients to targets"
#: (there is no target); ``TCP_ELB_Reset_Count``'s documented causes are an idle timeout and a
#: target turning unhealthy under existing connections (same guide, "Troubleshoot your Network
#: Load Balancer", "Increase in TCP_ELB_Reset_Count metric",
#: https://docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-troubleshooting.html#elb-reset-count-metric);
#: ``UnhealthyRoutingFlowCount`` counts fail-open routing, which needs registered (unhealthy)
#: targets; ``RejectedFlowCount`` "flows (or connections) rejected by the load balancer" names
#: no cause. So a service at zero wakes either on a schedule (``WakeSchedule``), or on a
#: connection to a target kept registered at zero (``WakeOnConnect``: the wake proxy, so the
#: flow is one "from clients to targets"), and scale to zero is refused without a wake.
WAKE_SOURCE = "https://docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-cloudwatch-metrics.html"
#: Seconds from the schedule's start to KEDA's activation: KEDA asks each trigger whether it is
#: active every ``pollingInterval``, 30 s by default
#: (https://keda.sh/docs/2.17/reference/scaledobject-spec/#pollinginterval).
WAKE_DETECTION_SECONDS = 30
#: Seconds from a client's first attempt to KEDA seeing it (``WakeOnConnect``): ELB publishes
#: its metrics "in 60-second intervals" (``WAKE_SOURCE``'s page) and KEDA polls every 30 s
#: (``pollingInterval``'s default, above); the metric's arrival in CloudWatch after its minute
#: is ASSUMED to take up to 60 s more.
CONNECT_DETECTION_SECONDS = 60 + 60 + 30
#: One field of a "Linux format cron" expression: numbers, names, ``*``, ``,``, ``-``, ``/``.
_CRON_FIELD = re.compile(r"[0-9A-Za-z*,/-]+")
#: Pulling and starting the vLLM image on a new node (ASSUMED: AWS's vLLM DLC is about 10-15 GB;
#: no published figure).
IMAGE_PULL_SECONDS = 300
#: The NLB health check's healthy threshold under scale to zero: the lowest NLB takes (2-10,
#: ELB user guide, "Health checks for Network Load Balancer target groups",
#: https://docs.aws.amazon.com/elasticloadbalancing/latest/network/target-group-health-checks.html;
#: the AWS Load Balancer Controller's ``aws-load-balancer-healthcheck-healthy-threshold``
#: defaults to 3,
#: https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/#healthcheck-healthy-threshold),
#: so a woken replica takes traffic 2 intervals after it serves, not 3.
WAKE_HEALTHY_THRESHOLD = 2
#: What the AWS Load Balancer Controller drops from a Service's namespace and name when it
#: names the NLB (kubernetes-sigs/aws-load-balancer-controller
#: ``pkg/service/model_build_load_balancer.go``, ``invalidLoadBalancerNamePattern``).
_NOT_ALNUM = re.compile("[^0-9A-Za-z]")


def default_load_balancer_prefix(namespace: str, service_name: str) -> str:
    """The controller's NLB name for a Service without ``aws-load-balancer-name``, up to its
    hash: ``k8s-<namespace[:8]>-<name[:8]>-`` of the alphanumerics
    (``buildLoadBalancerName``: ``fmt.Sprintf("k8s-%.8s-%.8s-%.10s", ...)``, same file)."""
    return f"k8s-{_NOT_ALNUM.sub('', namespace)[:8]}-{_NOT_ALNUM.sub('', service_name)[:8]}-"


@dataclass(frozen=True)
class WakeTime:
    """How long a first request after idle waits for a replica woken from zero, in seconds.

    ``node_start`` and ``image_pull`` are the new nodes', ``weights_and_engine`` the planner's
    cold start of the replica (``VllmMultiNodeService.cold_start``: download, load, engine).
    """

    detection: int
    node_start: int
    image_pull: int
    weights_and_engine: int
    health_check: int

    @property
    def total_seconds(self) -> int:
        """The first request's wait: what a client's retry budget must cover."""
        return (
            self.detection
            + self.node_start
            + self.image_pull
            + self.weights_and_engine
            + self.health_check
        )


@dataclass(frozen=True)
class WakeSchedule:
    """When a service scaled to zero is woken: KEDA's ``cron`` scaler asks for one replica from
    ``start`` to ``end`` (https://keda.sh/docs/2.17/scalers/cron/: "Linux format cron" of 5
    fields, an IANA ``timezone``, start and end not the same). Outside the window the service
    goes to zero once idle for ``ScaleToZero.idle_after``; a request then is refused, and
    nothing wakes the service before the next ``start`` (``WAKE_SOURCE``: no load-balancer
    metric is documented to count it). The first request is served
    ``VllmReplicaAutoScaling.first_request_wait`` after ``start``: set ``start`` that much
    before the hours clients expect.

    :param start: cron expression of the window's start, e.g. ``"0 7 * * 1-5"``.
    :param end: cron expression of its end, e.g. ``"0 19 * * 1-5"``.
    :param timezone: IANA time zone of both. Default: ``"UTC"``.
    """

    start: str
    end: str
    timezone: str = "UTC"

    def validate(self, problems: Problems, prop: str) -> None:
        """5 cron fields each, start and end apart, a time zone Python's IANA database knows."""
        for name in ("start", "end"):
            value = getattr(self, name)
            fields = str(value).split()
            if len(fields) != 5 or not all(_CRON_FIELD.fullmatch(f) for f in fields):
                problems.add(
                    f"{prop}.{name}",
                    value,
                    "a cron expression of 5 fields (minute hour day-of-month month day-of-week)",
                )
        if " ".join(str(self.start).split()) == " ".join(str(self.end).split()):
            problems.add(f"{prop}.end", self.end, "not the same as start (KEDA refuses it)")
        try:
            zoneinfo.ZoneInfo(self.timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            problems.add(f"{prop}.timezone", self.timezone, "an IANA time zone, e.g. 'UTC'")

    def trigger(self) -> dict[str, Any]:
        """The KEDA ``cron`` trigger: one replica within the window."""
        return {
            "type": "cron",
            "metadata": {
                "timezone": self.timezone,
                "start": self.start,
                "end": self.end,
                "desiredReplicas": "1",
            },
        }


@dataclass(frozen=True)
class WakeOnConnect:
    """Wake a service at zero replicas when a client connects to its load balancer.

    The service's load-balanced Service selects the wake proxy's pods (``wake_proxy``: nginx
    on the system nodes, a TCP pass-through to the leaders, TLS end to end) instead of the
    leaders, so the NLB keeps registered, healthy targets at zero replicas and counts a
    client's connection in ``NewFlowCount`` ("new flows (or connections) established from
    clients to targets", ``WAKE_SOURCE``). KEDA's ``aws-cloudwatch`` scaler watches it and
    activates the LeaderWorkerSet on any flow (``activationTargetMetricValue`` 0,
    https://keda.sh/docs/2.17/scalers/aws-cloudwatch/; activation is what moves a target
    between 0 and 1,
    https://keda.sh/docs/2.17/concepts/scaling-deployments/#activating-and-scaling-thresholds).
    No request is held: at zero the proxy closes the connection at once (no leader to dial),
    and the client retries for ``VllmReplicaAutoScaling.first_request_wait``. Needs the AWS
    Load Balancer Controller; refused with ``routing`` (the router is already the NLB's
    always-on target, and its behaviour with no leader was not verified here).

    ASSUMED: the NLB's own health checks are not client flows and do not count in
    ``NewFlowCount`` (the page counts flows "from clients"), so an idle service still goes to
    zero; a client that keeps connecting keeps it awake.

    :param image: the wake proxy's nginx image. Default: ``prefix_routing.PROXY_IMAGE``.
    """

    image: str = PROXY_IMAGE

    def validate(self, problems: Problems, prop: str) -> None:
        if (
            not isinstance(self.image, str)
            or not self.image
            or any(c.isspace() for c in self.image)
        ):
            problems.add(f"{prop}.image", self.image, "a container image reference")

    @staticmethod
    def trigger(dimension: str, authentication: str) -> dict[str, Any]:
        """KEDA's ``aws-cloudwatch`` trigger on the NLB ``dimension``'s ``NewFlowCount``.

        The target value is never reached, so it only moves the service between 0 and 1
        replica (``activationTargetMetricValue``); queue depth scales beyond. KEDA's scaler
        (kedacore/keda ``pkg/scalers/aws_cloudwatch_scaler.go``) takes the newest datapoint of
        the window (``metricCollectionTime``, a multiple of ``metricStatPeriod``),
        ``minMetricValue`` when CloudWatch has none (ELB reports nothing without traffic), and
        is active when the value is above the activation value.
        """
        return {
            "type": "aws-cloudwatch",
            "metadata": {
                "namespace": "AWS/NetworkELB",
                "metricName": "NewFlowCount",
                "dimensionName": "LoadBalancer",
                "dimensionValue": dimension,
                "metricStat": "Sum",
                "metricStatPeriod": "60",
                "metricCollectionTime": "120",
                "targetMetricValue": "1000000",
                "activationTargetMetricValue": "0",
                "minMetricValue": "0",
                "awsRegion": Aws.REGION,
                "identityOwner": "operator",
            },
            "authenticationRef": {"name": authentication},
        }


@dataclass(frozen=True)
class ScaleToZero:
    """Let ``VllmReplicaAutoScaling(min_replicas=0)`` remove the last replica when idle.

    KEDA's queue-depth trigger reads a serving replica, so at zero replicas it cannot wake the
    service, and neither can an NLB whose target group is empty (``WAKE_SOURCE``). The wake is
    a client's connection through an always-on proxy (``wake=WakeOnConnect()``) or a schedule
    (``wake=WakeSchedule(...)``); scale to zero without one is refused. Chosen over KEDA's
    HTTP add-on (its interceptor holds requests while a target scales from zero, but it routes
    HTTP by host: it would sit in the data path, in front of the TLS that vLLM terminates, with
    its own timeouts far below a GPU replica's cold start;
    https://keda.sh/http-add-on/0.14/user-guide/autoscale-an-app/). The price: no request is
    held. With ``WakeOnConnect`` a first client retries for
    ``VllmReplicaAutoScaling.first_request_wait`` (also a stack output) and two small proxy
    pods run on the system nodes; with ``WakeSchedule`` a request outside the window is
    refused and the window's first requests wait ``first_request_wait`` after its start.

    With it on, the Service asks for ``WAKE_HEALTHY_THRESHOLD`` healthy checks, so a woken
    replica takes traffic sooner.

    :param wake: what wakes the service (``WakeOnConnect`` or ``WakeSchedule``). Required:
        ``None`` is refused.
    :param idle_after: how long the service has no queued request (and, with
        ``WakeOnConnect``, no new connection; outside its window with ``WakeSchedule``) before
        its last replica goes (KEDA's ``cooldownPeriod``); its nodes go ``consolidate_after``
        later (``NodeAutoScaling``). Idle GPU nodes cost their hourly price; a wake costs the
        first client ``first_request_wait``. Default: the wake time (so a service is never
        stopped for less time than it takes to start), at least 15 minutes.
    :param node_start: how long HyperPod takes to add the replica's nodes. Default: the
        library's node budget (``node_readiness.group_budget``, ASSUMED and long).
    :param max_first_request_wait: the longest first-request wait this service accepts: a
        wake time above it is refused (raise it knowingly, or keep a replica). Default: 1 hour.
    """

    wake: WakeOnConnect | WakeSchedule | None = None
    idle_after: Duration | None = None
    node_start: Duration | None = None
    max_first_request_wait: Duration = _MAX_FIRST_REQUEST_WAIT.duration

    def validate(self, problems: Problems, prop: str) -> None:
        """A wake; durations in whole seconds, more than 0."""
        if not isinstance(self.wake, WakeOnConnect | WakeSchedule):
            problems.add(
                f"{prop}.wake",
                self.wake,
                "WakeOnConnect() or WakeSchedule(start=..., end=...): at zero replicas no "
                "series is scraped, so nothing else would wake the service",
            )
        else:
            self.wake.validate(problems, f"{prop}.wake")
        for name in ("idle_after", "node_start"):
            value = getattr(self, name)
            if value is not None and whole_seconds(value) <= 0:
                problems.add(f"{prop}.{name}", value.to_human_string(), "more than 0 seconds")
        if whole_seconds(self.max_first_request_wait, _MAX_FIRST_REQUEST_WAIT) <= 0:
            problems.add(
                f"{prop}.max_first_request_wait",
                self.max_first_request_wait.to_human_string(),
                "more than 0 seconds",
            )

    def wake_time(self, service: VllmMultiNodeService) -> WakeTime:
        """The wake of ``service`` from zero: detection, nodes, image, weights and engine."""
        node_start = (
            whole_seconds(self.node_start)
            if self.node_start is not None
            else int(
                group_budget(dataclasses.replace(service.group, count=service.nodes)).to_seconds()
            )
        )
        return WakeTime(
            detection=(
                CONNECT_DETECTION_SECONDS
                if isinstance(self.wake, WakeOnConnect)
                else WAKE_DETECTION_SECONDS
            ),
            node_start=node_start,
            image_pull=IMAGE_PULL_SECONDS,
            weights_and_engine=math.ceil(service.cold_start.total_seconds),
            health_check=WAKE_HEALTHY_THRESHOLD * NLB_HEALTH_CHECK_INTERVAL_SECONDS,
        )


class VllmReplicaAutoScaling(Construct):
    """Scale replicas of ``service`` between ``min_replicas`` and what the GPU group holds.

    :param service: the service to scale; its add-ons install KEDA once for all services.
    :param observability: the service's ``VllmObservability`` (KEDA queries its workspace).
    :param waiting_requests_per_replica: queue depth per replica that KEDA holds. Default: 8.
    :param min_replicas: 0 only with ``scale_to_zero``. Default: 1.
    :param max_replicas: Default: the GPU group's nodes still free at this point (its
        nodes, or its ``max_count`` when it autoscales, minus what other consumers reserved
        before, see ``free_gpu_nodes``) // nodes per replica, and at least ``min_replicas``.
    :param longest_request: the longest request the workload expects (prompt and full
        generation). A replica being scaled in keeps serving for the NLB's deregistration
        delay (300 s) plus a health-check interval before it stops, so a request up to this
        long finishes; longer than the deregistration delay is refused (the NLB may cut the
        connection). Default: 5 minutes.
    :param scale_to_zero: with ``min_replicas=0``: remove the last replica when idle, woken by
        a client's connection or a schedule (``ScaleToZero``, ``WakeOnConnect``,
        ``WakeSchedule``). Needs a GPU group that node
        autoscaling may shrink to 0 nodes. Default:
        ``None`` (at least one replica serves).
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
        scale_to_zero: ScaleToZero | None = None,
    ) -> None:
        super().__init__(scope, id)
        ceiling = service.group.capacity // service.nodes
        if max_replicas is None:
            free = service.cluster.free_gpu_nodes(service.group.name, service)
            max_replicas = max(min_replicas, 1, free // service.nodes)
        #: A first request's wait after idle (``ScaleToZero``); ``None`` without scale to zero.
        self.wake: WakeTime | None = (
            scale_to_zero.wake_time(service) if scale_to_zero is not None else None
        )
        self._scale_to_zero_given = scale_to_zero or ScaleToZero()
        self._validate(
            service,
            observability,
            ceiling,
            waiting_requests_per_replica,
            min_replicas,
            max_replicas,
            longest_request,
        )
        self.scale_to_zero = scale_to_zero
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
        # KEDA's own series: the wake alarm's source (``node_panels``).
        observability.scrape_keda_operator()
        self.query_role = keda.operator_role
        self.pod_identity = keda.operator_identity
        #: KEDA's cooldown before the last replica goes (``ScaleToZero.idle_after``); ``None``
        #: without scale to zero.
        self.idle_after_seconds: int | None = None
        #: With ``WakeOnConnect``: the wake proxy (``wake_proxy``), its manifest, the NLB's name
        #: prefix and ``LoadBalancer`` dimension KEDA watches, and KEDA's CloudWatch policy.
        self.wake_proxy: WakeProxyDeployment | None = None
        self.wake_proxy_manifest: eks.KubernetesManifest | None = None
        self.load_balancer_name_prefix: str | None = None
        self.load_balancer_dimension: str | None = None
        self.wake_policy: iam.ManagedPolicy | None = None
        if self.wake is not None and scale_to_zero is not None:
            self._prepare_wake(scale_to_zero)
            if isinstance(scale_to_zero.wake, WakeOnConnect):
                self._wake_on_connect(scale_to_zero.wake, keda.operator_role)
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
        if self.wake_policy is not None:
            self.manifest.node.add_dependency(self.wake_policy)

    @property
    def first_request_wait(self) -> Duration | None:
        """How long a client's first request after idle may wait (its retry budget): the wake
        from zero (``wake``); ``None`` without scale to zero."""
        return Duration.seconds(self.wake.total_seconds) if self.wake is not None else None

    def _prepare_wake(self, options: ScaleToZero) -> None:
        """KEDA's cooldown before the last replica goes, the NLB's healthy threshold, the wait."""
        service, wake = self.service, self.wake
        assert wake is not None
        self.idle_after_seconds = (
            whole_seconds(options.idle_after)
            if options.idle_after is not None
            else max(900, wake.total_seconds)
        )
        if self.idle_after_seconds < wake.total_seconds:
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:scale-to-zero-idle-shorter-than-wake",
                f"scale_to_zero.idle_after ({self.idle_after_seconds} s) is shorter than the wake "
                f"from zero ({wake.total_seconds} s): a quiet spell that short stops the service "
                "and the next window's first client waits longer than the spell lasted",
            )
        prefix = "service.beta.kubernetes.io/aws-load-balancer"
        service.service["metadata"]["annotations"][f"{prefix}-healthcheck-healthy-threshold"] = str(
            WAKE_HEALTHY_THRESHOLD
        )
        CfnOutput(
            self,
            "FirstRequestWaitSeconds",
            value=str(wake.total_seconds),
            description=(
                f"Retry budget of a first request to {service.name} after idle: the wake from "
                "zero replicas (detection, nodes, image, weights, engine, health check)"
                if isinstance(options.wake, WakeOnConnect)
                else f"How long after its wake schedule's start {service.name} serves from "
                "zero replicas (nodes, image, weights, engine, health check): the first "
                "requests' retry budget"
            ),
        )

    def _wake_on_connect(self, wake: WakeOnConnect, operator_role: iam.IRole) -> None:
        """The wake proxy in front of the leaders, the NLB's CloudWatch dimension, KEDA's read."""
        service = self.service
        self.wake_proxy = WakeProxyDeployment(
            name=service.name,
            namespace=service.namespace,
            leader_labels=tuple(service.workload.leader_labels().items()),
            vpc_cidr=service.vpc_cidr,
            longest_request_seconds=whole_seconds(self.longest_request, _LONGEST_REQUEST)
            + WAKE_PROXY_TIMEOUT_MARGIN_SECONDS,
            pre_stop_seconds=self.drain["pre_stop_seconds"],
            grace_seconds=self.drain["grace_seconds"],
            image=wake.image,
        )
        # The Service's spec and annotations are read at synth: re-pointed here.
        self.wake_proxy.front(service.service)
        self.wake_proxy_manifest = eks.KubernetesManifest(
            self,
            "WakeProxy",
            cluster=service.cluster.eks_cluster,
            manifest=self.wake_proxy.manifests(),
            overwrite=True,
        )
        self.wake_proxy_manifest.node.add_dependency(service.network_policy_resource)
        service.service_resource.node.add_dependency(self.wake_proxy_manifest)
        self.load_balancer_name_prefix = default_load_balancer_prefix(
            service.namespace, service.workload.service_name
        )
        # The NLB keeps the controller's own name, ``k8s-<ns>-<name>-<10 hex>``; its DNS name
        # is ``<lb name>-<id>.elb.<region>.amazonaws.com`` and its CloudWatch dimension
        # ``LoadBalancer`` is ``net/<lb name>/<id>`` (the tail of its ARN; ``WAKE_SOURCE``'s
        # page, "Metric dimensions"). Cut from the hostname after the known prefix; no rename
        # (the controller ignores ``aws-load-balancer-name`` set after the Service exists: "If
        # you modify this annotation after service creation, there is no effect", its
        # annotations page), so turning the wake on keeps a running service's NLB and hostname.
        after_prefix = Fn.select(
            1, Fn.split(self.load_balancer_name_prefix, service.load_balancer_hostname)
        )
        hash_and_id = Fn.split("-", Fn.select(0, Fn.split(".", after_prefix)))
        self.load_balancer_dimension = (
            f"net/{self.load_balancer_name_prefix}{Fn.select(0, hash_and_id)}"
            f"/{Fn.select(1, hash_and_id)}"
        )
        # ``GetMetricData`` is what KEDA's aws-cloudwatch scaler calls (kedacore/keda
        # ``pkg/scalers/aws_cloudwatch_scaler.go``); CloudWatch's read actions take no resource
        # ARN ("Actions, resources, and condition keys for Amazon CloudWatch",
        # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html).
        self.wake_policy = iam.ManagedPolicy(
            self,
            "WakePolicy",
            description=f"KEDA operator: reads the NLB metric that wakes {service.name}",
            statements=[iam.PolicyStatement(actions=["cloudwatch:GetMetricData"], resources=["*"])],
            roles=[operator_role],
        )
        acknowledge_wildcard_resources(
            self.wake_policy,
            ["*"],
            "cloudwatch:GetMetricData supports no resource-level permissions",
        )

    def _running_trigger(self, name: str) -> dict[str, Any]:
        """Keeps a service scaled to zero from going while a request runs.

        Queue depth is 0 and ``NewFlowCount`` is 0 for a client that sends one request after
        another over kept-alive connections: without this trigger, such a service would go to
        zero under its running requests. KEDA's scaler is active while the query's value is
        above ``activationThreshold`` (default 0; https://keda.sh/docs/2.17/concepts/scaling-deployments/#activating-and-scaling-thresholds),
        and the HPA asks for ``ceil(value / threshold)`` replicas from it (``AverageValue``;
        https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#algorithm-details):
        with ``RUNNING_TRIGGER_THRESHOLD`` above any running count it asks for 1 at most, so
        queue depth alone scales beyond one replica."""
        return self._prometheus_trigger(
            name, REQUESTS_RUNNING_RULE, RUNNING_TRIGGER_THRESHOLD, activationThreshold="0"
        )

    def _prometheus_trigger(
        self, name: str, query: str, threshold: int, **extra: str
    ) -> dict[str, Any]:
        """A KEDA ``prometheus`` trigger on this service's AMP workspace, signed with the
        operator's Pod Identity (``<name>-amp`` TriggerAuthentication)."""
        return {
            "type": "prometheus",
            "metadata": {
                "serverAddress": self.observability.server_address,
                "query": query,
                "threshold": str(threshold),
                **extra,
                "awsRegion": Aws.REGION,
                "identityOwner": "operator",
            },
            "authenticationRef": {"name": f"{name}-amp"},
        }

    def _wake_triggers(self) -> list[dict[str, Any]]:
        """The wake's trigger: ``NewFlowCount`` of the NLB (``WakeOnConnect``), or the
        schedule's ``cron`` (one replica within the window). Queue depth scales beyond."""
        assert self.scale_to_zero is not None
        wake = self.scale_to_zero.wake
        if isinstance(wake, WakeOnConnect):
            assert self.load_balancer_dimension is not None
            return [wake.trigger(self.load_balancer_dimension, f"{self.service.name}-amp")]
        assert wake is not None
        return [wake.trigger()]

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
        problems = Problems(f"VllmReplicaAutoScaling '{self.node.path}'")
        if observability.service is not service:
            problems.add(
                "observability",
                observability.node.path,
                f"must watch the scaled service {service.node.path}: KEDA reads its queue depth there",
            )
        if min_replicas < 0 or (min_replicas == 0 and self.wake is None):
            problems.add(
                "min_replicas",
                min_replicas,
                "must be at least 1, or 0 with scale_to_zero=ScaleToZero(wake=...) (a "
                "LeaderWorkerSet at 0 cannot report its queue: WakeOnConnect or WakeSchedule "
                "wakes it)",
            )
        if self.wake is not None:
            self._validate_scale_to_zero(problems, service, min_replicas)
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

    def _validate_scale_to_zero(
        self, problems: Problems, service: VllmMultiNodeService, min_replicas: int
    ) -> None:
        """Scale to zero needs min 0, nodes that follow, a wake schedule, a bounded wake."""
        wake = self.wake
        assert wake is not None
        # ``scale_to_zero`` is given here; ``self.scale_to_zero`` is set after validation.
        options = self._scale_to_zero_given
        options.validate(problems, "scale_to_zero")
        if min_replicas != 0:
            problems.add(
                "scale_to_zero",
                f"ScaleToZero(...) with min_replicas={min_replicas}",
                "needs min_replicas=0 (or leave scale_to_zero out to keep a replica)",
            )
        if not service.group.autoscaled:
            problems.add(
                "scale_to_zero",
                "ScaleToZero(...)",
                f"needs GPU group {service.group.name!r} to shrink to 0 nodes: give it "
                "max_count (HyperPodInstanceGroup.gpu(..., count=0, max_count=N)) and the cluster "
                "node_autoscaling=NodeAutoScaling(); else its nodes idle at 0 replicas",
            )
        elif service.group.count != 0:
            problems.add(
                "scale_to_zero",
                "ScaleToZero(...)",
                f"needs GPU group {service.group.name!r} created with count=0 (it has "
                f"{service.group.count}): Karpenter removes only the nodes it added",
            )
        if isinstance(options.wake, WakeOnConnect):
            if service.addons.load_balancer_controller is None:
                problems.add(
                    "scale_to_zero.wake",
                    "WakeOnConnect()",
                    "needs the AWS Load Balancer Controller (HyperPodServingAddons): the wake "
                    "proxy's NLB targets and the NewFlowCount metric are its load balancer's; "
                    "use WakeSchedule(...) without it",
                )
            if service.router is not None:
                problems.add(
                    "scale_to_zero.wake",
                    "WakeOnConnect()",
                    f"cannot be combined with routing on service {service.name!r}: the router "
                    "is already the load balancer's target, in front of the leaders (turn "
                    "routing off, or use WakeSchedule(...))",
                )
        limit = whole_seconds(options.max_first_request_wait, _MAX_FIRST_REQUEST_WAIT)
        if wake.total_seconds > limit:
            problems.add(
                "scale_to_zero.max_first_request_wait",
                _MAX_FIRST_REQUEST_WAIT.given(options.max_first_request_wait).human(),
                f"must cover the wake from zero: {wake.total_seconds} s estimated ("
                f"detection {wake.detection}, nodes {wake.node_start}, image {wake.image_pull}, "
                f"weights and engine {wake.weights_and_engine}, health check "
                f"{wake.health_check}); raise it, or keep min_replicas at 1",
            )

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
                    "cooldownPeriod": self.idle_after_seconds or 900,
                    # cooldownPeriod only delays scaling to 0 (KEDA, scaledobject-spec
                    # "cooldownPeriod"; ScaleToZero.idle_after); scale-in between
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
                        self._prometheus_trigger(name, QUEUE_DEPTH_RULE, self.threshold),
                        *(self._wake_triggers() if self.wake is not None else []),
                        *([self._running_trigger(name)] if self.wake is not None else []),
                    ],
                },
            },
        ]

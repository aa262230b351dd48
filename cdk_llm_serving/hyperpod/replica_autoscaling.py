"""``VllmReplicaAutoScaling``: more LeaderWorkerSet replicas when requests queue up.

KEDA scales the LeaderWorkerSet (through its scale subresource) on the queue depth that
``VllmObservability`` records in Amazon Managed Prometheus, with an EKS Pod Identity role
allowed ``aps:QueryMetrics`` on the watched workspaces only; KEDA and that identity exist once
per cluster (``HyperPodServingAddons.enable_keda``). The service hands its replica count over
(``VllmMultiNodeService.hand_replicas_to``): its pods then drain before they stop, and
``longest_request`` must fit in that window. The default maximum is what is still free of the
GPU group (its ``max_count`` when node autoscaling may grow it) // nodes per replica.

Scale to zero is an explicit opt-in, ``min_replicas=0`` with ``ScaleToZero(wake=...)``: a
client's connection through an always-on proxy (``WakeOnConnect``, ``wake_proxy``) or a
schedule (``WakeSchedule``) wakes the service. Why nothing else can, and the wake's timings:
``docs/design/multi-node-service.md``, "Scale to zero".
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

from .._cdk.nag import acknowledge_wildcard_resources
from .._cdk.validation import check_at_least, whole_seconds
from ..errors import Problems, checked_props
from .addons import KedaInstallation
from .constants import KEDA_API_VERSION, QUEUE_DEPTH_RULE, REQUESTS_RUNNING_RULE
from .multi_node_manifests import (
    NLB_DEREGISTRATION_DELAY_SECONDS,
    NLB_HEALTH_CHECK_INTERVAL_SECONDS,
)
from .multi_node_service import VllmMultiNodeService
from .node_readiness import group_budget
from .observability import VllmObservability
from .prefix_routing import PROXY_IMAGE, check_image
from .wake_proxy import WAKE_PROXY_TIMEOUT_MARGIN_SECONDS, WakeProxyDeployment

__all__ = [
    "ScaleToZero",
    "VllmReplicaAutoScaling",
    "WakeOnConnect",
    "WakeSchedule",
    "WakeTime",
    "default_load_balancer_prefix",
]

#: The running-requests trigger's threshold (``_running_trigger``): it asks for a second
#: replica only once a million requests run at once; queue depth scales beyond one replica.
RUNNING_TRIGGER_THRESHOLD = 1_000_000
_LONGEST_REQUEST = Duration.minutes(5)
_MAX_FIRST_REQUEST_WAIT = Duration.hours(1)
#: From the schedule's start to KEDA's activation: its default ``pollingInterval``
#: (https://keda.sh/docs/2.17/reference/scaledobject-spec/#pollinginterval).
WAKE_DETECTION_SECONDS = 30
#: From a client's first attempt to KEDA seeing it: ELB's 60 s metric interval, KEDA's 30 s
#: poll, and the metric's arrival in CloudWatch, ASSUMED to take up to 60 s more.
CONNECT_DETECTION_SECONDS = 60 + 60 + 30
#: One field of a "Linux format cron" expression: numbers, names, ``*``, ``,``, ``-``, ``/``.
_CRON_FIELD = re.compile(r"[0-9A-Za-z*,/-]+")
#: Pulling and starting the vLLM image on a new node (ASSUMED: AWS's vLLM DLC is about 10-15 GB;
#: no published figure).
IMAGE_PULL_SECONDS = 300
#: The NLB's healthy threshold under scale to zero: the lowest it takes (the controller's
#: default is 3), so a woken replica takes traffic one interval sooner
#: (https://docs.aws.amazon.com/elasticloadbalancing/latest/network/target-group-health-checks.html).
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
        """The first request's wait, all its parts: what a client's retry budget must cover."""
        return sum(dataclasses.astuple(self))


@dataclass(frozen=True)
class WakeSchedule:
    """When a service scaled to zero is woken: KEDA's ``cron`` scaler asks for one replica from
    ``start`` to ``end`` (https://keda.sh/docs/2.17/scalers/cron/). Outside the window the
    service goes to zero once idle for ``ScaleToZero.idle_after``, and a request then is
    refused until the next ``start``. The first request is served
    ``VllmReplicaAutoScaling.first_request_wait`` after ``start``: set ``start`` that much
    before the hours clients expect.

    :param start: cron expression of the window's start (5 fields), e.g. ``"0 7 * * 1-5"``.
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

    The wake proxy (``wake_proxy``) stands in front of the leaders
    (``VllmMultiNodeService.add_front``), so the NLB keeps a healthy target at zero replicas
    and counts the client's connection in ``NewFlowCount``; KEDA's ``aws-cloudwatch`` scaler
    activates the LeaderWorkerSet on any flow. No request is held: at zero the proxy closes the
    connection and the client retries for ``VllmReplicaAutoScaling.first_request_wait``. Needs
    the AWS Load Balancer Controller; refused with ``routing`` (the router is already the
    NLB's always-on target).

    ASSUMED: the NLB's own health checks are not client flows and do not count in
    ``NewFlowCount`` (the page counts flows "from clients"), so an idle service still goes to
    zero; a client that keeps connecting keeps it awake.

    :param image: the wake proxy's nginx image. Default: ``prefix_routing.PROXY_IMAGE``.
    """

    image: str = PROXY_IMAGE

    def validate(self, problems: Problems, prop: str) -> None:
        check_image(problems, f"{prop}.image", self.image)

    @staticmethod
    def trigger(dimension: str, authentication: str) -> dict[str, Any]:
        """KEDA's ``aws-cloudwatch`` trigger on the NLB ``dimension``'s ``NewFlowCount``: the
        target value is never reached, so it only moves the service between 0 and 1 replica
        (``activationTargetMetricValue``; https://keda.sh/docs/2.17/scalers/aws-cloudwatch/);
        no datapoint (no traffic) reads as ``minMetricValue``."""
        metadata = {
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
        }
        return _aws_trigger("aws-cloudwatch", metadata, authentication)


def _aws_trigger(kind: str, metadata: dict[str, str], authentication: str) -> dict[str, Any]:
    """A KEDA trigger that signs its AWS calls with the operator's Pod Identity."""
    return {
        "type": kind,
        "metadata": {**metadata, "awsRegion": Aws.REGION, "identityOwner": "operator"},
        "authenticationRef": {"name": authentication},
    }


@dataclass(frozen=True)
class ScaleToZero:
    """Let ``VllmReplicaAutoScaling(min_replicas=0)`` remove the last replica when idle.

    At zero replicas neither the queue-depth trigger nor an NLB with an empty target group can
    wake the service, so a wake is required: a client's connection through an always-on proxy
    (``WakeOnConnect``) or a schedule (``WakeSchedule``). No request is held while the service
    wakes (why not KEDA's HTTP add-on: design note). With it on, the Service asks for
    ``WAKE_HEALTHY_THRESHOLD`` healthy checks, so a woken replica takes traffic sooner.

    :param wake: what wakes the service (``WakeOnConnect`` or ``WakeSchedule``). Required:
        ``None`` is refused.
    :param idle_after: how long the service has no queued request (and, with
        ``WakeOnConnect``, no new connection; outside its window with ``WakeSchedule``) before
        its last replica goes (KEDA's ``cooldownPeriod``); its nodes go ``consolidate_after``
        later (``NodeAutoScaling``). Default: the wake time (so a service is never stopped for
        less time than it takes to start), at least 15 minutes.
    :param node_start: how long HyperPod takes to add the replica's nodes. Default: the
        library's node budget (``node_readiness.group_budget``, ASSUMED and long).
    :param max_first_request_wait: the longest first-request wait this service accepts: a
        wake time above it is refused (raise it knowingly, or keep a replica). Default: 1 hour.
    """

    wake: WakeOnConnect | WakeSchedule | None = None
    idle_after: Duration | None = None
    node_start: Duration | None = None
    max_first_request_wait: Duration = _MAX_FIRST_REQUEST_WAIT

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
        for name in ("idle_after", "node_start", "max_first_request_wait"):
            value = getattr(self, name)
            if value is not None and whole_seconds(value) <= 0:
                problems.add(f"{prop}.{name}", value.to_human_string(), "more than 0 seconds")

    def wake_time(self, service: VllmMultiNodeService) -> WakeTime:
        """The wake of ``service`` from zero: detection, nodes, image, weights and engine."""
        node_start = self.node_start or group_budget(
            dataclasses.replace(service.group, count=service.nodes)
        )
        return WakeTime(
            detection=(
                CONNECT_DETECTION_SECONDS
                if isinstance(self.wake, WakeOnConnect)
                else WAKE_DETECTION_SECONDS
            ),
            node_start=whole_seconds(node_start),
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
        long finishes; longer than the deregistration delay is refused. Default: 5 minutes.
    :param scale_to_zero: with ``min_replicas=0``: remove the last replica when idle, woken by
        a client's connection or a schedule (``ScaleToZero``). Needs a GPU group that node
        autoscaling may shrink to 0 nodes. Default: ``None`` (at least one replica serves).
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
        longest_request: Duration = _LONGEST_REQUEST,
        scale_to_zero: ScaleToZero | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.service, self.observability = service, observability
        if max_replicas is None:
            free = service.cluster.free_gpu_nodes(service.group.name, service)
            max_replicas = max(min_replicas, 1, free // service.nodes)
        #: A first request's wait after idle (``ScaleToZero``); ``None`` without scale to zero.
        self.wake: WakeTime | None = scale_to_zero.wake_time(service) if scale_to_zero else None
        self.scale_to_zero, self.longest_request = scale_to_zero, longest_request
        self.min_replicas, self.max_replicas = min_replicas, max_replicas
        self.threshold = waiting_requests_per_replica
        self._validate()
        #: How long a replica is kept after the queue drops, and how often one more may go: the
        #: replica's cold start, within the HPA's 300 s default and its 1800 s limit of a
        #: policy's ``periodSeconds`` (autoscaling/v2 ``HPAScalingPolicy``).
        self.scale_in_window_seconds: int = min(
            1800, max(300, math.ceil(service.cold_start.total_seconds))
        )
        service.cluster.reserve_gpu_nodes(service, service.group.name, max_replicas * service.nodes)
        service.hand_replicas_to(self, max_replicas=max_replicas)
        keda = service.addons.enable_keda()
        self._allow_queries(keda)
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
        if scale_to_zero is not None:
            self._prepare_wake(scale_to_zero)
            if isinstance(scale_to_zero.wake, WakeOnConnect):
                self._wake_on_connect(scale_to_zero.wake, keda.operator_role)
        self.manifest = self._scaled_object_manifest()

    @property
    def first_request_wait(self) -> Duration | None:
        """How long a client's first request after idle may wait (its retry budget): the wake
        from zero (``wake``); ``None`` without scale to zero."""
        return Duration.seconds(self.wake.total_seconds) if self.wake is not None else None

    def _allow_queries(self, keda: KedaInstallation) -> None:
        """KEDA's operator may query the workspace: a customer managed policy of this scaling's
        own on the operator's role (one per scaled service), not the role's inline default
        policy (HIPAA.Security ``IAMNoInlinePolicy``); and KEDA's own series are scraped (the
        wake alarm's source, ``node_panels``)."""
        self.query_policy = iam.ManagedPolicy(
            self,
            "QueryPolicy",
            description=f"KEDA operator: queries the {self.service.name} metrics workspace",
            statements=[self.observability.query_statement()],
            roles=[keda.operator_role],
        )
        self.keda = keda.chart
        self.observability.scrape_keda_operator()
        self.query_role = keda.operator_role
        self.pod_identity = keda.operator_identity

    def _scaled_object_manifest(self) -> eks.KubernetesManifest:
        """The TriggerAuthentication and ScaledObject, once KEDA, its identity and policies,
        the LeaderWorkerSet and the recording rules are there."""
        manifest = eks.KubernetesManifest(
            self,
            "ScaledObject",
            cluster=self.service.cluster.eks_cluster,
            manifest=self.keda_objects(),
            overwrite=True,
        )
        wake = [self.wake_policy] if self.wake_policy is not None else []
        manifest.node.add_dependency(
            self.keda,
            self.pod_identity,
            self.query_policy,
            self.service.lws_manifest,
            self.observability.rules,
            *wake,
        )
        return manifest

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
        service.set_healthy_threshold(WAKE_HEALTHY_THRESHOLD)
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
            longest_request_seconds=whole_seconds(self.longest_request)
            + WAKE_PROXY_TIMEOUT_MARGIN_SECONDS,
            image=wake.image,
        )
        self.wake_proxy_manifest = eks.KubernetesManifest(
            self,
            "WakeProxy",
            cluster=service.cluster.eks_cluster,
            manifest=self.wake_proxy.manifests(),
            overwrite=True,
        )
        service.add_front(self.wake_proxy.front(), self.wake_proxy_manifest)
        self.load_balancer_name_prefix = default_load_balancer_prefix(
            service.namespace, service.service_name
        )
        self.load_balancer_dimension = self._load_balancer_dimension(self.load_balancer_name_prefix)
        # KEDA's aws-cloudwatch scaler calls GetMetricData, which takes no resource ARN
        # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html).
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

    def _load_balancer_dimension(self, prefix: str) -> str:
        """The NLB's ``LoadBalancer`` dimension, ``net/<lb name>/<id>``, cut from its hostname
        ``<lb name>-<id>.elb.<region>.amazonaws.com`` after the controller's name ``prefix``
        (the NLB keeps the controller's name: design note, "Scale to zero")."""
        hostname = self.service.load_balancer_hostname
        after_prefix = Fn.select(1, Fn.split(prefix, hostname))
        hash_and_id = Fn.split("-", Fn.select(0, Fn.split(".", after_prefix)))
        return f"net/{prefix}{Fn.select(0, hash_and_id)}/{Fn.select(1, hash_and_id)}"

    def _running_trigger(self, name: str) -> dict[str, Any]:
        """Keeps a service scaled to zero from going while a request runs (queue depth and new
        flows are 0 for a client reusing a connection): active above 0, and asking for
        ``ceil(running / RUNNING_TRIGGER_THRESHOLD)`` replicas, 1 at most
        (https://keda.sh/docs/2.17/concepts/scaling-deployments/#activating-and-scaling-thresholds,
        https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#algorithm-details)."""
        return self._prometheus_trigger(
            name, REQUESTS_RUNNING_RULE, RUNNING_TRIGGER_THRESHOLD, activationThreshold="0"
        )

    def _prometheus_trigger(
        self, name: str, query: str, threshold: int, **extra: str
    ) -> dict[str, Any]:
        """A KEDA ``prometheus`` trigger on this service's AMP workspace, signed with the
        operator's Pod Identity (``<name>-amp`` TriggerAuthentication)."""
        server = self.observability.server_address
        metadata = {"serverAddress": server, "query": query, "threshold": str(threshold), **extra}
        return _aws_trigger("prometheus", metadata, f"{name}-amp")

    def _triggers(self) -> list[dict[str, Any]]:
        """Queue depth; with scale to zero, the wake's trigger (``NewFlowCount`` of the NLB, or
        the schedule's ``cron``) and the running requests."""
        name = self.service.name
        triggers = [self._prometheus_trigger(name, QUEUE_DEPTH_RULE, self.threshold)]
        wake = self.scale_to_zero.wake if self.scale_to_zero is not None else None
        if isinstance(wake, WakeOnConnect):
            assert self.load_balancer_dimension is not None
            triggers.append(wake.trigger(self.load_balancer_dimension, f"{name}-amp"))
        elif wake is not None:
            triggers.append(wake.trigger())
        if wake is not None:
            triggers.append(self._running_trigger(name))
        return triggers

    def _validate(self) -> None:
        problems = Problems(f"VllmReplicaAutoScaling '{self.node.path}'")
        service, observability, scale_to_zero = self.service, self.observability, self.scale_to_zero
        min_replicas, max_replicas = self.min_replicas, self.max_replicas
        if observability.service is not service:
            problems.add(
                "observability",
                observability.node.path,
                f"must watch the scaled service {service.node.path}: KEDA reads its queue depth there",
            )
        if min_replicas < 0 or (min_replicas == 0 and scale_to_zero is None):
            problems.add(
                "min_replicas",
                min_replicas,
                "must be at least 1, or 0 with scale_to_zero=ScaleToZero(wake=...) (a "
                "LeaderWorkerSet at 0 cannot report its queue: WakeOnConnect or WakeSchedule "
                "wakes it)",
            )
        if scale_to_zero is not None:
            self._validate_scale_to_zero(problems, scale_to_zero)
        ceiling = service.group.capacity // service.nodes
        if not max(min_replicas, 1) <= max_replicas <= ceiling:
            problems.add(
                "max_replicas",
                max_replicas,
                f"must be between min_replicas ({min_replicas}) and {ceiling}: GPU group {service.group.name!r} holds {service.group.capacity} nodes"
                + (" at its max_count" if service.group.autoscaled else "")
                + f", {service.nodes} per replica",
            )
        if not 0 < whole_seconds(self.longest_request) <= NLB_DEREGISTRATION_DELAY_SECONDS:
            problems.add(
                "longest_request",
                self.longest_request.to_human_string(),
                f"must be more than 0 and at most the NLB's deregistration delay "
                f"({NLB_DEREGISTRATION_DELAY_SECONDS} s): a scaled-in replica serves its "
                "in-flight requests only that long",
            )
        check_at_least(problems, "waiting_requests_per_replica", self.threshold, 1)
        problems.raise_if_any()

    def _validate_scale_to_zero(self, problems: Problems, options: ScaleToZero) -> None:
        """Scale to zero needs min 0, nodes that follow, a wake, a bounded wake time."""
        service, wake = self.service, self.wake
        assert wake is not None
        options.validate(problems, "scale_to_zero")
        if self.min_replicas != 0:
            problems.add(
                "scale_to_zero",
                f"ScaleToZero(...) with min_replicas={self.min_replicas}",
                "needs min_replicas=0 (or leave scale_to_zero out to keep a replica)",
            )
        group = service.group
        if not group.autoscaled:
            problems.add(
                "scale_to_zero",
                "ScaleToZero(...)",
                f"needs GPU group {group.name!r} to shrink to 0 nodes: give it "
                "max_count (HyperPodInstanceGroup.gpu(..., count=0, max_count=N)) and the cluster "
                "node_auto_scaling=NodeAutoScaling(); else its nodes idle at 0 replicas",
            )
        elif group.count != 0:
            problems.add(
                "scale_to_zero",
                "ScaleToZero(...)",
                f"needs GPU group {group.name!r} created with count=0 (it has "
                f"{group.count}): Karpenter removes only the nodes it added",
            )
        if isinstance(options.wake, WakeOnConnect):
            self._validate_wake_on_connect(problems)
        if wake.total_seconds > whole_seconds(options.max_first_request_wait):
            problems.add(
                "scale_to_zero.max_first_request_wait",
                options.max_first_request_wait.to_human_string(),
                f"must cover the wake from zero: {wake.total_seconds} s estimated ("
                f"detection {wake.detection}, nodes {wake.node_start}, image {wake.image_pull}, "
                f"weights and engine {wake.weights_and_engine}, health check "
                f"{wake.health_check}); raise it, or keep min_replicas at 1",
            )

    def _validate_wake_on_connect(self, problems: Problems) -> None:
        """The wake proxy needs the load balancer controller and no router in front."""
        service = self.service
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
                "is already the load balancer's target, in front of the leaders (routing=False, "
                "or use WakeSchedule(...))",
            )

    def keda_objects(self) -> list[dict[str, Any]]:
        """A TriggerAuthentication (the operator's identity) and the ScaledObject on queue depth."""
        name, namespace = self.service.name, self.service.namespace
        # cooldownPeriod only delays scaling to 0; scale-in between replicas is the HPA's: hold
        # a replica as long as a new one takes to start, and remove one at a time
        # (https://keda.sh/docs/2.17/reference/scaledobject-spec/#horizontalpodautoscalerconfig).
        window = self.scale_in_window_seconds
        policy = {"type": "Pods", "value": 1, "periodSeconds": window}
        scale_down = {"stabilizationWindowSeconds": window, "policies": [policy]}
        return [
            {
                "apiVersion": KEDA_API_VERSION,
                "kind": "TriggerAuthentication",
                "metadata": {"name": f"{name}-amp", "namespace": namespace},
                "spec": {"podIdentity": {"provider": "aws"}},
            },
            {
                "apiVersion": KEDA_API_VERSION,
                "kind": "ScaledObject",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "scaleTargetRef": self.service.scale_target,
                    "minReplicaCount": self.min_replicas,
                    "maxReplicaCount": self.max_replicas,
                    "cooldownPeriod": self.idle_after_seconds or 900,
                    "advanced": {
                        "horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": scale_down}}
                    },
                    "triggers": self._triggers(),
                },
            },
        ]

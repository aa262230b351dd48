"""The inference operator's KV cache, intelligent routing, prefill/decode and auto scaling specs, typed.

Each renders one field of ``InferenceEndpointConfig`` (CRD ``inference.sagemaker.aws.amazon.com/v1``
in aws/sagemaker-hyperpod-cli ``helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd``):
``kvCacheSpec``, ``intelligentRoutingSpec``, ``pdSpec`` and ``autoScalingSpec``. What the CRD
and AWS's pages say of each field (sagemaker-hyperpod-model-deployment-caching-routing.html,
sagemaker-hyperpod-model-deployment-dpd.html): docs/design/observability.md ("Inference
operator specs").
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from ..core.endpoint_metrics import metric_name_problem
from ..errors import Problems
from ..planning.instance_types import InstanceType

__all__ = [
    "InferenceAutoScaling",
    "InferenceKvCache",
    "InferencePrefillDecode",
    "InferenceRouting",
    "KvCacheL2Backend",
    "RoutingStrategy",
]


@dataclass(frozen=True)
class InferenceAutoScaling:
    """``autoScalingSpec``: KEDA scales the worker pods on a CloudWatch metric of the endpoint.

    The defaults follow AWS's example (invocations per pod per collection period:
    https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-autoscaling.html).

    :param max_replicas: at most the listed GPU groups' nodes (one pod per node).
    :param min_replicas: 0 scales to zero (``activation_value`` wakes it). Default: 1.
    :param metric_name: ``AWS/SageMaker`` metric of the registered endpoint. Default:
        ``Invocations``.
    :param target_value: the metric's target per pod (``metricType: Average``). Default: 60
        (invocations per pod per minute).
    :param statistic: Default: ``Sum``.
    :param activation_value: value that scales from 0 to 1. Default: 0.
    :param polling_interval: seconds between checks (CRD default 30).
    :param cooldown_period: seconds before scaling to zero (CRD default 300).
    """

    max_replicas: int
    min_replicas: int = 1
    metric_name: str = "Invocations"
    target_value: float = 60
    statistic: str = "Sum"
    activation_value: float = 0
    polling_interval: int = 30
    cooldown_period: int = 300

    def validate(self, problems: Problems, prop: str) -> None:
        if self.min_replicas < 0:
            problems.add(f"{prop}.min_replicas", self.min_replicas, "must be at least 0")
        if self.max_replicas < max(self.min_replicas, 1):
            problems.add(
                f"{prop}.max_replicas", self.max_replicas, "must be at least min_replicas and 1"
            )
        if self.target_value <= 0:
            problems.add(f"{prop}.target_value", self.target_value, "must be positive")
        if (wrong_case := metric_name_problem(self.metric_name)) is not None:
            problems.add(f"{prop}.metric_name", self.metric_name, wrong_case)
        for name in ("polling_interval", "cooldown_period"):
            if getattr(self, name) < 0:
                problems.add(f"{prop}.{name}", getattr(self, name), "must be at least 0")

    def _render(self, endpoint_name: str, variant_name: str) -> dict[str, Any]:
        return {
            "minReplicaCount": self.min_replicas,
            "maxReplicaCount": self.max_replicas,
            "pollingInterval": self.polling_interval,
            "cooldownPeriod": self.cooldown_period,
            "cloudWatchTrigger": {
                "name": f"{endpoint_name}-{self.metric_name}".lower()[:63],
                "namespace": "AWS/SageMaker",
                "metricName": self.metric_name,
                "dimensions": [
                    {"name": "EndpointName", "value": endpoint_name},
                    {"name": "VariantName", "value": variant_name},
                ],
                "metricStat": self.statistic,
                "metricType": "Average",
                "targetValue": self.target_value,
                "activationTargetValue": self.activation_value,
                "metricCollectionPeriod": 60,
                "minValue": 0,
            },
        }


# Every kvCacheSpec / intelligentRoutingSpec claim above:
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-caching-routing.html
#: Redis URLs (redis-py's ``from_url`` schemes: ``redis://``, ``rediss://`` for TLS).
_REDIS_URL = re.compile(r"^rediss?://[^\s/]+(:\d+)?(/.*)?$")
#: CRD default of ``pdSpec.routingThreshold``.
DEFAULT_ROUTING_THRESHOLD = 4096


class KvCacheL2Backend(enum.Enum):
    """``kvCacheSpec.l2CacheSpec.l2CacheBackend`` (CRD pattern ``(?i)redis|tieredstorage``)."""

    #: HyperPod managed tiered storage: the cluster's ``TieredStorageConfig`` must be on.
    TIERED_STORAGE = "tieredstorage"
    #: A Redis cluster you run (``redis_url``); in transit encryption is not guaranteed when it
    #: is outside the HyperPod cluster's VPC (AWS's caching-and-routing page).
    REDIS = "redis"

    def __str__(self) -> str:
        return self.value


class RoutingStrategy(enum.Enum):
    """``intelligentRoutingSpec.routingStrategy`` (CRD enum; AWS's page for each meaning)."""

    #: Requests with the same prompt prefix go to the same instance (CRD default).
    PREFIX_AWARE = "prefixaware"
    #: To the instance with the highest KV-cache hit rate.
    KV_AWARE = "kvaware"
    #: Requests of one user session go to the same instance.
    SESSION = "session"
    #: Evenly, without regard to the KV cache.
    ROUND_ROBIN = "roundrobin"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class InferenceKvCache:
    """``kvCacheSpec``: the operator's managed tiered KV cache.

    Cost in host memory: L1 is CPU memory on the worker's node, sized by the operator (AWS
    publishes no figure); L2 ``TIERED_STORAGE`` takes the cluster's
    ``TieredStorage.memory_percentage`` of every node's memory (default 5 %: 102.4 GiB of a
    p5en.48xlarge's 2,048 GiB), shared by the cluster's nodes; L2 ``REDIS`` lives in your Redis.

    :param l1_cpu_offload: ``enableL1Cache``: offload KV blocks to the node's CPU memory.
        Default: ``True`` (the CRD's default).
    :param l2_backend: ``KvCacheL2Backend`` of the shared L2 tier, or ``None`` for L1 only.
        Default: ``KvCacheL2Backend.TIERED_STORAGE`` (the endpoint turns the cluster's tiered
        storage on).
    :param redis_url: ``l2CacheLocalUrl``, with ``REDIS`` only (``redis://`` or ``rediss://``).
        Default: none.
    """

    l1_cpu_offload: bool = True
    l2_backend: KvCacheL2Backend | None = KvCacheL2Backend.TIERED_STORAGE
    redis_url: str | None = None

    @classmethod
    def l1_only(cls) -> InferenceKvCache:
        """CPU offloading on the node, no shared tier (no cluster memory taken)."""
        return cls(l2_backend=None)

    @classmethod
    def with_redis(cls, url: str) -> InferenceKvCache:
        """L1 plus a Redis L2 at ``url``."""
        return cls(l2_backend=KvCacheL2Backend.REDIS, redis_url=url)

    @property
    def uses_tiered_storage(self) -> bool:
        return self.l2_backend is KvCacheL2Backend.TIERED_STORAGE

    def validate(self, problems: Problems, prop: str) -> None:
        if not self.l1_cpu_offload and self.l2_backend is None:
            problems.add(
                prop,
                "l1_cpu_offload=False, l2_backend=None",
                "at least one tier (or kv_cache=None for no KV cache spec)",
            )
        if self.l2_backend is not None and not isinstance(self.l2_backend, KvCacheL2Backend):
            problems.add(
                f"{prop}.l2_backend",
                self.l2_backend,
                f"a KvCacheL2Backend: {', '.join(b.value for b in KvCacheL2Backend)}",
            )
        if self.l2_backend is KvCacheL2Backend.REDIS:
            if not self.redis_url or not _REDIS_URL.match(self.redis_url):
                problems.add(
                    f"{prop}.redis_url",
                    self.redis_url,
                    "the Redis cluster's URL (redis://host:port or rediss://host:port) with the "
                    "redis backend",
                )
        elif self.redis_url is not None:
            problems.add(
                f"{prop}.redis_url",
                self.redis_url,
                "only with l2_backend=KvCacheL2Backend.REDIS (tiered storage needs no URL)",
            )

    def render(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "enableL1Cache": self.l1_cpu_offload,
            "enableL2Cache": self.l2_backend is not None,
        }
        if self.l2_backend is not None:
            spec["l2CacheSpec"] = {"l2CacheBackend": self.l2_backend.value}
            if self.redis_url:
                spec["l2CacheSpec"]["l2CacheLocalUrl"] = self.redis_url
        return spec


@dataclass(frozen=True)
class InferenceRouting:
    """``intelligentRoutingSpec``: the operator's router in front of the worker pods.

    Set it when the endpoint is created: the operator rejects it added to an existing
    deployment, and ``enabled`` cannot change once set (CRD). To add it to a deployed endpoint,
    deploy a new one (another ``name`` and ``endpoint_name``) and move traffic.

    :param strategy: ``RoutingStrategy``. Default: ``PREFIX_AWARE`` (the CRD's default).
    """

    strategy: RoutingStrategy = RoutingStrategy.PREFIX_AWARE

    def validate(self, problems: Problems, prop: str) -> None:
        if not isinstance(self.strategy, RoutingStrategy):
            problems.add(
                f"{prop}.strategy",
                self.strategy,
                f"a RoutingStrategy: {', '.join(s.value for s in RoutingStrategy)}",
            )

    def render(self) -> dict[str, Any]:
        return {"enabled": True, "routingStrategy": self.strategy.value}


@dataclass(frozen=True)
class InferencePrefillDecode:
    """``pdSpec``: prefill and decode in their own Deployments, on their own instance types.

    Each role's pods take the whole node's GPUs and EFA devices (the worker's configuration is
    shared; the KV cache moves between roles over EFA), on nodes of its instance type
    (``nodeSelector`` on ``node.kubernetes.io/instance-type``). Both types must be among the
    endpoint's ``instance_types``, have EFA, and their groups hold every role's pods, one a node.

    When it pays (AWS's "When DPD helps"): dense models of 70B+ parameters, 4,000+ input tokens,
    2+ requests per second sustained, 256+ output tokens; ``plan(...).disaggregation`` applies
    the rule to a ``Workload``. What it costs: at least two nodes (one per role) where colocated
    serving needs one, and the KV transfer over EFA.

    :param prefill_instance_type: the prefill pods' type (``InstanceType`` or name).
    :param decode_instance_type: the decode pods' type.
    :param prefill_replicas: prefill pods (CRD minimum 1). Default: 1.
    :param decode_replicas: decode pods (CRD minimum 1). Default: 1.
    :param routing_threshold: requests of at least this many input tokens take the
        disaggregated path; shorter ones prefill on the decoder (0: always). Default: 4096 (CRD).
    :param same_availability_zone: ``topologySpec.sameAZ``. Default: ``True`` (CRD; EFA needs it).
    :param prefill_auto_scaling: ``InferenceAutoScaling`` of the prefill pods. Default: none.
    :param decode_auto_scaling: ``InferenceAutoScaling`` of the decode pods. Default: none.
    """

    prefill_instance_type: InstanceType | str
    decode_instance_type: InstanceType | str
    prefill_replicas: int = 1
    decode_replicas: int = 1
    routing_threshold: int = DEFAULT_ROUTING_THRESHOLD
    same_availability_zone: bool = True
    prefill_auto_scaling: InferenceAutoScaling | None = None
    decode_auto_scaling: InferenceAutoScaling | None = None

    def roles(self) -> dict[str, tuple[InstanceType | str, int, InferenceAutoScaling | None]]:
        """``prefill`` and ``decode``: each role's type, replicas and autoscaling."""
        return {
            "prefill": (
                self.prefill_instance_type,
                self.prefill_replicas,
                self.prefill_auto_scaling,
            ),
            "decode": (self.decode_instance_type, self.decode_replicas, self.decode_auto_scaling),
        }

    def ceiling(self, role: str) -> int:
        """The most pods ``role`` runs: its autoscaling maximum, else its replicas."""
        _, replicas, auto_scaling = self.roles()[role]
        return auto_scaling.max_replicas if auto_scaling is not None else replicas

    def validate(self, problems: Problems, prop: str) -> None:
        for role, (_, replicas, auto_scaling) in self.roles().items():
            if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
                problems.add(f"{prop}.{role}_replicas", replicas, "an integer of at least 1 (CRD)")
            if auto_scaling is not None:
                auto_scaling.validate(problems, f"{prop}.{role}_auto_scaling")
        threshold = self.routing_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            problems.add(
                f"{prop}.routing_threshold",
                threshold,
                "an integer of at least 0 input tokens (0: always disaggregate)",
            )
        elif threshold > 2**31 - 1:
            problems.add(f"{prop}.routing_threshold", threshold, "at most 2147483647 (int32)")

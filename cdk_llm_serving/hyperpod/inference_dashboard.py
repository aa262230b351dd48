"""``InferenceEndpointDashboard`` and ``InferenceEndpointAlarms`` of a ``HyperPodInferenceEndpoint``.

The operator registers a SageMaker endpoint, so the dashboard reads the ``AWS/SageMaker``
metrics the pool endpoints use (``core.dashboard.pools_row``); UNCONFIRMED that SageMaker adds
``InstanceType`` to an operator-registered endpoint's metrics (a row stays empty for a type
without series). With ``prometheus_workspace``, PromQL charts of vLLM's own series follow (KV
cache, routing, prefill/decode) and the alarms are Prometheus alerting rules there. Every
series, its vLLM source and the alarms' reasons: docs/design/observability.md ("HyperPod
inference endpoint").

ASSUMED: the scrape labels each series with the pod's ``namespace`` and ``pod``, and the
operator names the endpoint's pods after the ``InferenceEndpointConfig`` (its troubleshooting
pages show ``<prefill|decode>-<endpoint>`` containers); no AWS page lists the labels.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from ..core.dashboard import FULL_WIDTH, ServingDashboard, pools_row
from ..core.promql_charts import PromQLCharts
from ..errors import Problems, checked_props
from .inference_endpoint import HyperPodInferenceEndpoint
from .observability import alarm_rule, rule_file

__all__ = ["InferenceEndpointAlarms", "InferenceEndpointDashboard"]

#: The roles' pods under P/D. ASSUMED (see the module doc): each role's pod names carry the role.
ROLES = ("prefill", "decode")


class CachePanel(NamedTuple):
    """One PromQL chart of the KV cache, routing or P/D row."""

    title: str
    query: str
    unit: str


def pod_selector(endpoint: HyperPodInferenceEndpoint, role: str | None = None) -> str:
    """PromQL label matchers of ``endpoint``'s pods, or of one P/D role's (``prefill``,
    ``decode``): a second matcher on ``pod`` (PromQL ANDs matchers on one label)."""
    pods = f'namespace="{endpoint.namespace}",pod=~".*{endpoint.name}.*"'
    return pods if role is None else f'{pods},pod=~".*{role}.*"'


def cache_panels(endpoint: HyperPodInferenceEndpoint) -> list[CachePanel]:
    """The KV-cache, offload, P/D-transfer and queue charts of ``endpoint``'s pods."""
    pods = pod_selector(endpoint)

    def ratio(hits: str, queries: str) -> str:
        return (
            f"sum(rate({hits}_total{{{pods}}}[5m])) / "
            f"clamp_min(sum(rate({queries}_total{{{pods}}}[5m])), 1)"
        )

    panels = [
        CachePanel(
            "GPU prefix-cache hit rate",
            ratio("vllm:prefix_cache_hits", "vllm:prefix_cache_queries"),
            "",
        ),
        CachePanel(
            "Tiered KV-cache hit rate (L1 CPU / L2)",
            ratio("vllm:external_prefix_cache_hits", "vllm:external_prefix_cache_queries"),
            "",
        ),
        CachePanel(
            "Tokens loaded from the tiered KV cache per second",
            f"sum(rate(vllm:external_prefix_cache_hits_total{{{pods}}}[5m]))",
            " tok/s",
        ),
        CachePanel(
            "Requests waiting per pod (prefill and decode apart)",
            f"sum by (pod) (vllm:num_requests_waiting{{{pods}}})",
            "",
        ),
    ]
    if endpoint.kv_cache is not None:
        panels.append(
            CachePanel(
                "Cached prompt tokens per second by tier (device GPU, host L1, L2 / remote)",
                f"sum by (source) (rate(vllm:prompt_tokens_cached_by_source_total{{{pods}}}[5m]))",
                " tok/s",
            )
        )
    if endpoint.prefill_decode is not None:
        panels += _prefill_decode_panels(endpoint)
    return panels


def _prefill_decode_panels(endpoint: HyperPodInferenceEndpoint) -> list[CachePanel]:
    """Each role's queue, the KV transfer (NIXL) and where the decoders' prompt tokens came from."""
    pods, decode = pod_selector(endpoint), pod_selector(endpoint, "decode")
    return [
        *(
            CachePanel(
                f"Requests waiting on the {role} pods",
                f"sum by (pod) (vllm:num_requests_waiting{{{pod_selector(endpoint, role)}}})",
                "",
            )
            for role in ROLES
        ),
        CachePanel(
            "KV cache moved prefill -> decode (NIXL)",
            f"sum(rate(vllm:nixl_bytes_transferred_sum{{{pods}}}[5m]))",
            " B/s",
        ),
        CachePanel(
            "Failed KV transfers per second (NIXL)",
            f"sum(rate(vllm:nixl_num_failed_transfers_total{{{pods}}}[5m]))",
            "/s",
        ),
        CachePanel(
            "KV transfer time p99 (NIXL)",
            "histogram_quantile(0.99, sum by (le) "
            f"(rate(vllm:nixl_xfer_time_seconds_bucket{{{pods}}}[5m])))",
            " s",
        ),
        CachePanel(
            "Decode pods' prompt tokens: from prefill vs recomputed",
            f"sum by (source) (rate(vllm:prompt_tokens_by_source_total{{{decode}}}[5m]))",
            " tok/s",
        ),
    ]


class InferenceEndpointAlarms(Construct):
    """Prometheus alerting rules of ``endpoint``'s paths in ``prometheus_workspace``.

    Add it with the workspace the operator's metrics reach; it costs one rule groups namespace.
    Every alarm is labelled ``severity: page`` and ``path``:

    * colocated: ``InferenceQueueDepthHigh`` (``worker``), more than ``max_waiting_requests``
      waiting over the workers for 5 minutes;
    * under P/D: ``InferencePrefillQueueDepthHigh`` and ``InferenceDecodeQueueDepthHigh``,
      ``InferenceDecodeKvCacheSaturated`` (a decode pod's KV cache above
      ``kv_cache_saturation`` for 10 minutes) and ``InferenceKvTransferFailing`` (any failed
      NIXL transfer for 5 minutes);
    * with ``kv_cache``: ``InferenceKvCacheTierNoHits``, lookups but not one hit for 30 minutes.

    :param endpoint: the endpoint to watch.
    :param prometheus_workspace: the Amazon Managed Prometheus workspace its metrics reach.
    :param max_waiting_requests: waiting requests (per path, summed over its pods) that alarm
        after 5 minutes. Default: 32 (as ``VllmObservability``).
    :param kv_cache_saturation: a decode pod's KV-cache usage (0-1) that alarms after 10
        minutes. Default: 0.95 (as ``VllmObservability``).
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint: HyperPodInferenceEndpoint,
        prometheus_workspace: aps.CfnWorkspace,
        max_waiting_requests: int = 32,
        kv_cache_saturation: float = 0.95,
    ) -> None:
        super().__init__(scope, id)
        problems = Problems(f"InferenceEndpointAlarms '{self.node.path}'")
        if isinstance(max_waiting_requests, bool) or max_waiting_requests < 1:
            problems.add("max_waiting_requests", max_waiting_requests, "an integer of at least 1")
        if not 0 < kv_cache_saturation <= 1:
            problems.add("kv_cache_saturation", kv_cache_saturation, "a share above 0, at most 1")
        problems.raise_if_any()
        self.endpoint = endpoint
        self.max_waiting_requests = max_waiting_requests
        self.kv_cache_saturation = kv_cache_saturation
        self.rules = aps.CfnRuleGroupsNamespace(
            self,
            "Rules",
            name=f"{endpoint.name}-alerts",
            workspace=prometheus_workspace.attr_arn,
            data=self.rule_groups(),
        )

    def rule_groups(self) -> str:
        """The Prometheus rule file (one group of alerting rules)."""
        return rule_file({"name": f"{self.endpoint.name}-alerts", "rules": self.alarm_rules()})

    def alarm_rules(self) -> list[dict[str, Any]]:
        """Each alerting rule (the class doc lists them)."""
        endpoint = self.endpoint
        rules = (
            [self._rule("InferenceQueueDepthHigh", "worker", "5m", *self._queue_depth(None))]
            if endpoint.prefill_decode is None
            else self._prefill_decode_rules()
        )
        if endpoint.kv_cache is not None:
            pods = pod_selector(endpoint)
            rules.append(
                self._rule(
                    "InferenceKvCacheTierNoHits",
                    "kv-cache",
                    "30m",
                    f"sum(rate(vllm:external_prefix_cache_queries_total{{{pods}}}[15m])) > 0 "
                    f"and sum(rate(vllm:external_prefix_cache_hits_total{{{pods}}}[15m])) == 0",
                    "the tiered KV cache (L1 CPU / L2) answers no lookup: prompts are recomputed",
                )
            )
        return rules

    def _rule(self, name: str, path: str, for_: str, expr: str, summary: str) -> dict[str, Any]:
        labels = {"severity": "page", "endpoint": self.endpoint.name, "path": path}
        return alarm_rule(
            name, expr, for_=for_, labels=labels, summary=f"{self.endpoint.name}: {summary}"
        )

    def _queue_depth(self, role: str | None) -> tuple[str, str]:
        """The expression and summary of a queue-depth alarm on the workers or a P/D role."""
        waiting, pods = self.max_waiting_requests, pod_selector(self.endpoint, role)
        expr = f"sum(vllm:num_requests_waiting{{{pods}}}) > {waiting}"
        if role is None:
            return expr, f"more than {waiting} requests waiting on the workers"
        return expr, f"more than {waiting} requests waiting on the {role} pods: add {role} replicas"

    def _prefill_decode_rules(self) -> list[dict[str, Any]]:
        """Each role's queue, the decode pods' KV cache and failed KV transfers."""
        saturation, pods = self.kv_cache_saturation, pod_selector(self.endpoint)
        decode = pod_selector(self.endpoint, "decode")
        return [
            *(
                self._rule(
                    f"Inference{role.title()}QueueDepthHigh", role, "5m", *self._queue_depth(role)
                )
                for role in ROLES
            ),
            self._rule(
                "InferenceDecodeKvCacheSaturated",
                "decode",
                "10m",
                f"max(vllm:kv_cache_usage_perc{{{decode}}}) > {saturation:g}",
                f"a decode pod's KV cache above {saturation:.0%}: transfers wait for memory, "
                "requests queue",
            ),
            self._rule(
                "InferenceKvTransferFailing",
                "kv-transfer",
                "5m",
                f"sum(rate(vllm:nixl_num_failed_transfers_total{{{pods}}}[5m])) > 0",
                "KV transfers from prefill to decode fail (NIXL): decoders recompute prompts",
            ),
        ]


class InferenceEndpointDashboard(ServingDashboard):
    """A header naming the types in priority order, the whole endpoint, then a line per type;
    with ``prometheus_workspace``, the KV cache, routing and P/D charts.

    :param endpoint: the endpoint to show.
    :param dashboard_name: Default: generated by CloudFormation.
    :param prometheus_workspace: the Amazon Managed Prometheus workspace the operator's metrics
        reach (HyperPod observability). Default: none (no PromQL row, no widget function).
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint: HyperPodInferenceEndpoint,
        dashboard_name: str | None = None,
        prometheus_workspace: aps.CfnWorkspace | None = None,
    ) -> None:
        super().__init__(scope, id, dashboard_name=dashboard_name)
        types = "  \n".join(
            f"{priority}. `{instance_type}`"
            for priority, instance_type in enumerate(endpoint.instance_types, start=1)
        )
        self.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"# HyperPod endpoint {endpoint.endpoint_name}\n"
                f"Serving `{endpoint.config.served_model_name}` on, most preferred first:  \n{types}",
                width=FULL_WIDTH,
                height=3,
            ),
            cloudwatch.GraphWidget(
                title="Invocations and errors (all types)",
                left=[endpoint.metric_invocations()],
                right=[
                    endpoint.metric_invocation_4xx_errors(),
                    endpoint.metric_invocation_5xx_errors(),
                ],
                width=FULL_WIDTH,
            ),
        )
        self.add_widgets(*pools_row(endpoint, endpoint.instance_types))
        if prometheus_workspace is not None:
            charts = PromQLCharts.of_workspace(
                self,
                prometheus_workspace,
                "Draws the inference endpoint's KV-cache charts from Amazon Managed Prometheus",
            )
            self.add_in_pairs(
                [charts.chart(p.title, p.query, unit=p.unit) for p in cache_panels(endpoint)]
            )

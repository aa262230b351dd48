"""``InferenceEndpointDashboard``: a CloudWatch dashboard of a ``HyperPodInferenceEndpoint``.

The endpoint the operator registers is a SageMaker endpoint, so its metrics are the
``AWS/SageMaker`` ones the pool endpoints use; the per-type row (one chart per measure, a line
per listed instance type labelled with its priority) comes from the same builder as
``PoolEndpointDashboard`` (``sagemaker.dashboard.pools_row``). Whether SageMaker adds the ``InstanceType`` dimension to
an operator-registered endpoint's metrics as it does for instance pools is UNCONFIRMED (no
AWS source says either way); a row stays empty for a type that has no series.

With ``prometheus_workspace`` (the Amazon Managed Prometheus workspace the operator's
``metrics.enabled`` scrape lands in, through HyperPod observability), a row of PromQL charts
follows for the KV cache, routing and prefill/decode (#29), drawn by the same custom-widget
Lambda as ``VllmDashboard`` (``_cdk/assets/amp_widget``). The series are vLLM's own, as the
pinned vLLM (0.32.0) registers them (prometheus_client adds ``_total`` to counters):

* ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits`` (vllm/v1/metrics/loggers.py):
  tokens looked up in and found in the GPU prefix cache: the hit rate routing raises.
* ``vllm:external_prefix_cache_queries`` / ``vllm:external_prefix_cache_hits`` (same file:
  "External prefix cache ... from KV connector cross-instance cache sharing"): the tiered
  cache's (L1 CPU / L2) hit rate, and, as tokens per second, the traffic loaded back from it.
  vLLM exposes no series for what LMCache writes out.
* ``vllm:nixl_bytes_transferred`` (histogram, vllm/distributed/kv_transfer/kv_connector/v1/
  nixl/stats.py): the KV cache moved from prefill to decode pods under P/D.
* ``vllm:num_requests_waiting`` (loggers.py): queue depth, per pod, so prefill and decode pods
  show apart; under P/D one chart per role (prefill pods, decode pods).
* ``vllm:prompt_tokens_cached_by_source`` (loggers.py: "Prefix-cache hit tokens by the cache
  tier that supplied them: device (local HBM), host (offloaded to DRAM), disk, p2p ... or
  external_unspecified"; ``source`` values from vllm/v1/metrics/cache_hit_source.py): the cache
  per tier, GPU (``device``), L1 CPU (``host``), L2 and remote (``p2p``, ``disk``,
  ``external_unspecified``: a connector that does not say which tier, as LMCache's may not).
* Under P/D, on the decode pods: ``vllm:prompt_tokens_by_source`` (``source`` one of
  ``local_compute``, ``local_cache_hit``, ``external_kv_transfer``; vllm/v1/metrics/stats.py
  ``PromptTokenStats.ALL_SOURCES``): prompt tokens that arrived from the prefill pods against
  those the decoder recomputed (AWS's DPD troubleshooting: a decoder that "Retrieved 0 out of N
  required tokens" falls back to local recompute); ``vllm:nixl_num_failed_transfers`` and
  ``vllm:nixl_xfer_time_seconds`` (nixl/stats.py): failed transfers and their duration.

``InferenceEndpointAlarms`` puts Prometheus alerting rules for the endpoint in the same
workspace, one or more per path: the colocated workers' queue; under P/D the prefill queue, the
decode queue, the decode pods' KV cache and failed KV transfers; with a KV-cache tier, a tier
that answers no lookup. The workspace's alert manager routes them (``VllmObservability``'s
sends every alert to its SNS topic).

ASSUMED: the scrape labels each series with the pod's ``namespace`` and ``pod`` (the Prometheus
Kubernetes pod role's usual relabelling) and the operator names the endpoint's pods after the
``InferenceEndpointConfig`` (its troubleshooting pages show ``<prefill|decode>-<endpoint>``
containers); no AWS page lists the labels.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import yaml
from aws_cdk import Duration
from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from ..errors import Problems, checked_props
from ..sagemaker.dashboard import pools_row
from .dashboard import promql_widget_function
from .inference_endpoint import HyperPodInferenceEndpoint

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
        decode = pod_selector(endpoint, "decode")
        panels += [
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
    return panels


class InferenceEndpointAlarms(Construct):
    """Prometheus alerting rules of ``endpoint``'s paths in ``prometheus_workspace``.

    When to add it: with the workspace the operator's metrics reach (as for
    ``InferenceEndpointDashboard(prometheus_workspace=)``). What it costs: one rule groups
    namespace (Amazon Managed Prometheus bills rule evaluation by samples queried). Every
    alert is labelled ``severity: page`` and ``path`` (``worker``, ``prefill``, ``decode``,
    ``kv-transfer``, ``kv-cache``):

    * colocated: ``InferenceQueueDepthHigh``, more than ``max_waiting_requests`` waiting over
      the workers for 5 minutes;
    * under P/D: ``InferencePrefillQueueDepthHigh`` and ``InferenceDecodeQueueDepthHigh`` (each
      role's pods; the remedy differs: more prefill or more decode replicas),
      ``InferenceDecodeKvCacheSaturated`` (``vllm:kv_cache_usage_perc`` above
      ``kv_cache_saturation`` on a decode pod for 10 minutes: AWS's DPD troubleshooting, the
      decoder's buffer "full under high concurrency", scale ``decodingSpec.replicas``) and
      ``InferenceKvTransferFailing`` (any ``vllm:nixl_num_failed_transfers`` for 5 minutes: the
      decoders recompute prompts, P/D buys nothing);
    * with ``kv_cache``: ``InferenceKvCacheTierNoHits``, lookups in the tier but not one hit
      for 30 minutes (a tier that is down or never filled; prompts are recomputed).

    :param endpoint: the endpoint to watch.
    :param prometheus_workspace: the Amazon Managed Prometheus workspace its metrics reach.
    :param max_waiting_requests: waiting requests (per path, summed over its pods) that alert
        after 5 minutes. Default: 32 (as ``VllmObservability``).
    :param kv_cache_saturation: a decode pod's KV-cache usage (0-1) that alerts after 10
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
        """The Prometheus rule file (one group of alerts)."""
        return str(
            yaml.safe_dump(
                {"groups": [{"name": f"{self.endpoint.name}-alerts", "rules": self.alerts()}]},
                sort_keys=False,
                width=1_000_000,
            )
        )

    def alerts(self) -> list[dict[str, Any]]:
        """Each alert rule (the class doc lists them)."""
        endpoint, waiting = self.endpoint, self.max_waiting_requests
        name = endpoint.name

        def alert(alert_name: str, path: str, expr: str, for_: str, summary: str) -> dict[str, Any]:
            return {
                "alert": alert_name,
                "expr": expr,
                "for": for_,
                "labels": {"severity": "page", "endpoint": name, "path": path},
                "annotations": {"summary": f"{name}: {summary}"},
            }

        rules = []
        if endpoint.prefill_decode is None:
            rules.append(
                alert(
                    "InferenceQueueDepthHigh",
                    "worker",
                    f"sum(vllm:num_requests_waiting{{{pod_selector(endpoint)}}}) > {waiting}",
                    "5m",
                    f"more than {waiting} requests waiting on the workers",
                )
            )
        else:
            for role in ROLES:
                rules.append(
                    alert(
                        f"Inference{role.title()}QueueDepthHigh",
                        role,
                        f"sum(vllm:num_requests_waiting{{{pod_selector(endpoint, role)}}}) "
                        f"> {waiting}",
                        "5m",
                        f"more than {waiting} requests waiting on the {role} pods: add {role} "
                        "replicas",
                    )
                )
            decode = pod_selector(endpoint, "decode")
            rules += [
                alert(
                    "InferenceDecodeKvCacheSaturated",
                    "decode",
                    f"max(vllm:kv_cache_usage_perc{{{decode}}}) > {self.kv_cache_saturation:g}",
                    "10m",
                    f"a decode pod's KV cache above {self.kv_cache_saturation:.0%}: transfers "
                    "wait for memory, requests queue",
                ),
                alert(
                    "InferenceKvTransferFailing",
                    "kv-transfer",
                    "sum(rate(vllm:nixl_num_failed_transfers_total"
                    f"{{{pod_selector(endpoint)}}}[5m])) > 0",
                    "5m",
                    "KV transfers from prefill to decode fail (NIXL): decoders recompute prompts",
                ),
            ]
        if endpoint.kv_cache is not None:
            pods = pod_selector(endpoint)
            rules.append(
                alert(
                    "InferenceKvCacheTierNoHits",
                    "kv-cache",
                    f"sum(rate(vllm:external_prefix_cache_queries_total{{{pods}}}[15m])) > 0 "
                    f"and sum(rate(vllm:external_prefix_cache_hits_total{{{pods}}}[15m])) == 0",
                    "30m",
                    "the tiered KV cache (L1 CPU / L2) answers no lookup: prompts are recomputed",
                )
            )
        return rules


class InferenceEndpointDashboard(Construct):
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
        super().__init__(scope, id)
        self.dashboard = cloudwatch.Dashboard(
            self, "Resource", dashboard_name=dashboard_name, default_interval=Duration.hours(3)
        )
        types = "  \n".join(
            f"{priority}. `{instance_type}`"
            for priority, instance_type in enumerate(endpoint.instance_types, start=1)
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"# HyperPod endpoint {endpoint.endpoint_name}\n"
                f"Serving `{endpoint.config.served_model_name}` on, most preferred first:  \n{types}",
                width=24,
                height=3,
            ),
            cloudwatch.GraphWidget(
                title="Invocations and errors (all types)",
                left=[endpoint.metric_invocations()],
                right=[
                    endpoint.metric_invocation_4xx_errors(),
                    endpoint.metric_invocation_5xx_errors(),
                ],
                width=24,
            ),
        )
        self.dashboard.add_widgets(*pools_row(endpoint, endpoint.instance_types))
        if prometheus_workspace is not None:
            self._add_cache_row(endpoint, prometheus_workspace)

    def _add_cache_row(
        self, endpoint: HyperPodInferenceEndpoint, workspace: aps.CfnWorkspace
    ) -> None:
        """The PromQL charts, through a widget function that reads only ``workspace``."""
        function = promql_widget_function(
            self,
            workspace,
            "Draws the inference endpoint's KV-cache charts from Amazon Managed Prometheus",
        )
        widgets = [
            cloudwatch.CustomWidget(
                function_arn=function.function_arn,
                title=panel.title,
                params={"query": panel.query, "title": panel.title, "unit": panel.unit},
                width=12,
                height=6,
                update_on_refresh=True,
                update_on_resize=True,
                update_on_time_range_change=True,
            )
            for panel in cache_panels(endpoint)
        ]
        for start in range(0, len(widgets), 2):
            self.dashboard.add_widgets(*widgets[start : start + 2])

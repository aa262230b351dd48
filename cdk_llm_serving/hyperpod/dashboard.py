"""``VllmDashboard``: a CloudWatch dashboard of the vLLM SLO series kept in Amazon Managed Prometheus.

CloudWatch cannot plot PromQL by itself, so each chart is a CloudWatch custom widget: a
small Lambda function (``_cdk/assets/amp_widget``) runs the PromQL range query for the
dashboard's time range, signed with its own role (``aps:QueryMetrics`` on this workspace
only), and returns the chart. Thresholds drawn are the ones the alerting rules use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from aws_cdk import Duration
from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .._cdk.widget_function import WidgetFunctionSpec, widget_function
from ..errors import checked_props
from .constants import (
    E2E_P99_RULE,
    GENERATION_TOKENS_RATE_RULE,
    INTER_TOKEN_P99_RULE,
    KV_CACHE_USAGE_RULE,
    QUEUE_DEPTH_RULE,
    REQUESTS_RUNNING_RULE,
    SPEC_ACCEPTANCE_RULE,
    TTFT_P99_RULE,
)
from .node_panels import add_scaling_panels
from .observability import (
    OFFLOAD_HIT_RATE_RULE,
    OFFLOAD_LOAD_RATE_RULE,
    OFFLOAD_STORE_RATE_RULE,
    PREFIX_CACHE_HIT_RATE_RULE,
    ROUTER_HEALTHY_RULE,
    ROUTER_PREFIX_HIT_RULE,
    ROUTER_REQUESTS_RULE,
    VllmObservability,
)

if TYPE_CHECKING:
    from .replica_autoscaling import VllmReplicaAutoScaling

WIDGET_CODE = Path(__file__).parents[1] / "_cdk" / "assets" / "amp_widget"


class _Panel(NamedTuple):
    """One chart: a recorded series and, for alerted series, the alert's threshold."""

    title: str
    query: str
    unit: str
    threshold: Callable[[VllmObservability], float] | None


PANELS: tuple[_Panel, ...] = (
    _Panel(
        "Time to first token p99",
        TTFT_P99_RULE,
        " s",
        lambda observability: observability.ttft_p99_threshold_seconds,
    ),
    _Panel("Inter-token latency p99", INTER_TOKEN_P99_RULE, " s", None),
    _Panel("End-to-end latency p99", E2E_P99_RULE, " s", None),
    _Panel(
        "Requests waiting (queue depth)",
        QUEUE_DEPTH_RULE,
        "",
        lambda observability: observability.max_waiting_requests,
    ),
    _Panel("Requests running", REQUESTS_RUNNING_RULE, "", None),
    _Panel(
        "KV-cache usage",
        KV_CACHE_USAGE_RULE,
        "",
        lambda observability: observability.kv_cache_saturation,
    ),
    _Panel("Generated tokens per second", GENERATION_TOKENS_RATE_RULE, "", None),
    _Panel("Speculative-decoding acceptance rate", SPEC_ACCEPTANCE_RULE, "", None),
    _Panel("Prefix-cache hit rate (GPU)", PREFIX_CACHE_HIT_RATE_RULE, "", None),
    _Panel("KV offload hit rate (host memory)", OFFLOAD_HIT_RATE_RULE, "", None),
    _Panel("KV offload loads (host to GPU)", OFFLOAD_LOAD_RATE_RULE, " B/s", None),
    _Panel("KV offload stores (GPU to host)", OFFLOAD_STORE_RATE_RULE, " B/s", None),
)

#: The prefix-aware router's panels (``VllmMultiNodeService(routing=)``), when it has one.
ROUTER_PANELS = (
    _Panel("Router: requests per replica", ROUTER_REQUESTS_RULE, " req/s", None),
    _Panel("Router: prefix-hit share of decisions", ROUTER_PREFIX_HIT_RULE, "", None),
    _Panel("Router: healthy replicas", ROUTER_HEALTHY_RULE, "", None),
)


class VllmDashboard(Construct):
    """TTFT, inter-token and end-to-end p99, queue, KV cache, throughput, MTP acceptance,
    prefix-cache hit rate and the host-memory KV offload's hit rate and traffic."""

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        observability: VllmObservability,
        dashboard_name: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.function = self._render_widget_function(observability)
        self.dashboard = cloudwatch.Dashboard(
            self, "Resource", dashboard_name=dashboard_name, default_interval=Duration.hours(3)
        )
        self.dashboard.add_widgets(_header(observability))
        panels = [*PANELS, *(ROUTER_PANELS if observability.service.router else ())]
        widgets = [self._panel_widget(panel, observability) for panel in panels]
        for left, right in zip(widgets[::2], widgets[1::2], strict=False):
            self.dashboard.add_widgets(left, right)
        if len(widgets) % 2:
            self.dashboard.add_widgets(widgets[-1])

    def _render_widget_function(self, observability: VllmObservability) -> lambda_.Function:
        """The custom-widget Lambda: queries only this workspace, logs to its own group."""
        return promql_widget_function(
            self, observability.workspace, "Draws vLLM SLO charts from Amazon Managed Prometheus"
        )

    def add_scaling_panels(self, autoscaling: VllmReplicaAutoScaling) -> None:
        """Serving, asked-for and pending replicas of ``autoscaling`` and the alarm on pending
        replicas (``node_panels``); the rules live in this dashboard's workspace."""
        #: The scaling rules and alarm (``node_panels.scaling_rule_groups``).
        self.scaling_rules = add_scaling_panels(
            self, self.dashboard, self.promql_widget, autoscaling
        )

    def promql_widget(
        self, title: str, query: str, unit: str, threshold: float | None
    ) -> cloudwatch.CustomWidget:
        """One PromQL chart of this dashboard's workspace (dashed line at ``threshold``)."""
        params: dict[str, object] = {"query": query, "title": title, "unit": unit}
        if threshold is not None:
            params["threshold"] = threshold
        return cloudwatch.CustomWidget(
            function_arn=self.function.function_arn,
            title=title,
            params=params,
            width=12,
            height=6,
            update_on_refresh=True,
            update_on_resize=True,
            update_on_time_range_change=True,
        )

    def _panel_widget(
        self, panel: _Panel, observability: VllmObservability
    ) -> cloudwatch.CustomWidget:
        """One chart; alerted series carry their alert threshold (drawn as a dashed line)."""
        threshold = panel.threshold(observability) if panel.threshold is not None else None
        return self.promql_widget(panel.title, panel.query, panel.unit, threshold)


def _header(observability: VllmObservability) -> cloudwatch.TextWidget:
    """What is served where, and where the alerts go."""
    service = observability.service
    return cloudwatch.TextWidget(
        markdown=(
            f"# vLLM {service.name}\n{service.nodes} node(s) per replica x {service.replicas} replica(s) on `{service.group.instance_type}`. "
            "Alerts (TTFT p99, queue depth, KV-cache saturation) fire in Amazon Managed Prometheus and reach the alerts SNS topic; "
            "red dashed lines mark their thresholds."
        ),
        width=24,
        height=2,
    )


def promql_widget_function(
    scope: Construct, workspace: aps.CfnWorkspace, role_description: str
) -> lambda_.Function:
    """The PromQL custom-widget Lambda of a HyperPod dashboard (``WIDGET_CODE``): it may query
    ``workspace`` only (``aps:QueryMetrics`` on its ARN) and logs to its own group."""
    return widget_function(
        scope,
        "Widget",
        WidgetFunctionSpec(
            code=WIDGET_CODE,
            description="CloudWatch custom widget: PromQL charts from Amazon Managed Prometheus",
            role_description=role_description,
            statements=[
                iam.PolicyStatement(actions=["aps:QueryMetrics"], resources=[workspace.attr_arn])
            ],
            environment={"PROMETHEUS_ENDPOINT": workspace.attr_prometheus_endpoint},
        ),
    )

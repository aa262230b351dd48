"""``VllmDashboard``: a CloudWatch dashboard of the vLLM SLO series kept in Amazon Managed Prometheus.

CloudWatch cannot plot PromQL by itself, so each chart is a CloudWatch custom widget: a
small Lambda function (``lambda/amp_widget``) runs the PromQL range query for the
dashboard's time range, signed with its own role (``aps:QueryMetrics`` on this workspace
only), and returns the chart. Thresholds drawn are the ones the alerting rules use.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from .._cdk.nag import acknowledge_wildcard_resources
from .observability import VllmObservability

WIDGET_CODE = Path(__file__).parent / "assets" / "amp_widget"

#: (title, PromQL, unit, threshold attribute of VllmObservability or None)
PANELS: tuple[tuple[str, str, str, str | None], ...] = (
    ("Time to first token p99", "vllm:ttft_seconds:p99", " s", "ttft_p99_threshold_seconds"),
    ("Inter-token latency p99", "vllm:inter_token_latency_seconds:p99", " s", None),
    ("End-to-end latency p99", "vllm:e2e_request_latency_seconds:p99", " s", None),
    ("Requests waiting (queue depth)", "vllm:requests_waiting", "", "max_waiting_requests"),
    ("Requests running", "vllm:requests_running", "", None),
    ("KV-cache usage", "vllm:kv_cache_usage", "", "kv_cache_saturation"),
    ("Generated tokens per second", "vllm:generation_tokens_per_second", "", None),
    ("Speculative-decoding acceptance rate", "vllm:spec_decode_acceptance_rate", "", None),
)


class VllmDashboard(Construct):
    """TTFT, inter-token and end-to-end p99, queue, KV cache, throughput, MTP acceptance."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        observability: VllmObservability,
        dashboard_name: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        log_group = logs.LogGroup(
            self,
            "WidgetLogs",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.RETAIN,
        )
        role = iam.Role(
            self,
            "WidgetRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Draws vLLM SLO charts from Amazon Managed Prometheus",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["aps:QueryMetrics"], resources=[observability.workspace.attr_arn]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[f"{log_group.log_group_arn}:*"],
            )
        )
        acknowledge_wildcard_resources(
            role,
            [f"{log_group.log_group_arn}:*"],
            "Log streams of the widget function's own log group; their names are made by Lambda.",
        )
        self.function = lambda_.Function(
            self,
            "Widget",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.handler",
            code=lambda_.Code.from_asset(str(WIDGET_CODE), exclude=["__pycache__", "*.pyc"]),
            role=role,
            log_group=log_group,
            timeout=Duration.seconds(30),
            memory_size=256,
            environment={"PROMETHEUS_ENDPOINT": observability.workspace.attr_prometheus_endpoint},
            description="CloudWatch custom widget: PromQL charts from Amazon Managed Prometheus",
        )
        self.dashboard = cloudwatch.Dashboard(
            self, "Resource", dashboard_name=dashboard_name, default_interval=Duration.hours(3)
        )
        service = observability.service
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    f"# vLLM {service.name}\n{service.nodes} node(s) per replica x {service.replicas} replica(s) on `{service.group.instance_type}`. "
                    "Alerts (TTFT p99, queue depth, KV-cache saturation) fire in Amazon Managed Prometheus and reach the alerts SNS topic; "
                    "red dashed lines mark their thresholds."
                ),
                width=24,
                height=2,
            )
        )
        widgets = []
        for title, query, unit, threshold_attribute in PANELS:
            params: dict[str, object] = {"query": query, "title": title, "unit": unit}
            if threshold_attribute:
                params["threshold"] = getattr(observability, threshold_attribute)
            widgets.append(
                cloudwatch.CustomWidget(
                    function_arn=self.function.function_arn,
                    title=title,
                    params=params,
                    width=12,
                    height=6,
                    update_on_refresh=True,
                    update_on_resize=True,
                    update_on_time_range_change=True,
                )
            )
        for left, right in zip(widgets[::2], widgets[1::2], strict=True):
            self.dashboard.add_widgets(left, right)

"""PromQL charts on a CloudWatch dashboard: a custom widget querying CloudWatch's PromQL API.

aws-cdk-lib 2.275 has no PromQL graph widget, so each chart is a CloudWatch custom widget
backed by one small function. It is the project's PromQL chart function (the file under
``hyperpod/assets/amp_widget``, shared by path, not by import), pointed at CloudWatch's
Prometheus-compatible endpoint ``https://monitoring.<region>.<url suffix>`` and signing for
SigV4 service ``monitoring`` (see ``token_metrics`` for the AWS sources). Its role may call
``cloudwatch:GetMetricData`` and ``cloudwatch:ListMetrics`` (what querying CloudWatch's PromQL
endpoint requires: https://docs.aws.amazon.com/grafana/latest/userguide/cloudwatch-promql.html;
neither has resource-level permissions: "specify a wildcard character (*) as the resource",
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/permissions-reference-cw.html)
and write its own log group.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from constructs import Construct

from .._cdk.widget_function import WidgetFunctionSpec, widget_function

#: The chart function's code (standard library + botocore, in the Lambda Python runtime).
CHART_CODE = Path(__file__).parents[1] / "hyperpod" / "assets" / "amp_widget"


class PromQLCharts(Construct):
    """The function behind PromQL custom widgets; ``chart`` makes a widget.

    One per stack (``of``): its role reads CloudWatch metrics of the account and region,
    which is what every dashboard of the stack needs, so dashboards share it.
    """

    #: The construct id of the stack's single instance.
    SINGLETON_ID = "CdkLlmServingPromQLCharts"

    @classmethod
    def of(cls, scope: Construct) -> PromQLCharts:
        """The stack's chart function, created on first use."""
        stack = Stack.of(scope)
        found = stack.node.try_find_child(cls.SINGLETON_ID)
        if isinstance(found, PromQLCharts):
            return found
        return cls(stack, cls.SINGLETON_ID)

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.function = widget_function(
            self,
            "Chart",
            WidgetFunctionSpec(
                code=CHART_CODE,
                description="CloudWatch custom widget: PromQL charts from CloudWatch (detailed observability)",
                role_description="Draws PromQL charts of SageMaker detailed-observability metrics",
                statements=[
                    iam.PolicyStatement(
                        actions=["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"],
                        resources=["*"],
                    )
                ],
                environment={
                    "PROMETHEUS_ENDPOINT": f"https://monitoring.{stack.region}.{stack.url_suffix}",
                    "SIGV4_SERVICE": "monitoring",
                },
                wildcards=["*"],
                wildcard_reason="CloudWatch GetMetricData/ListMetrics have no resource-level permissions.",
            ),
        )

    def chart(self, title: str, query: str, unit: str, width: int) -> cloudwatch.CustomWidget:
        return cloudwatch.CustomWidget(
            function_arn=self.function.function_arn,
            title=title,
            # The chart function reads no unit as "" (``params.get("unit", "")``).
            params={"query": query, "title": title, **({"unit": unit} if unit else {})},
            width=width,
            height=6,
            update_on_refresh=True,
            update_on_resize=True,
            update_on_time_range_change=True,
        )

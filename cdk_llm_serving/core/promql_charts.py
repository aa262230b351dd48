"""PromQL charts on a CloudWatch dashboard: custom widgets drawn by one chart function.

aws-cdk-lib has no PromQL graph widget, so every PromQL chart of both serving paths is a
``cloudwatch.CustomWidget`` backed by the function in ``_cdk/assets/amp_widget``, pointed at one
Prometheus-compatible source: CloudWatch's PromQL API (SageMaker detailed observability) or an
Amazon Managed Prometheus workspace (HyperPod). Sources and permissions:
``docs/design/observability.md`` ("PromQL charts").
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnResource, Stack
from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .._cdk.stacks import stack_of
from .._cdk.widget_function import WidgetFunctionSpec, widget_function

#: The chart function's code (standard library + botocore, in the Lambda Python runtime).
CHART_CODE = Path(__file__).parents[1] / "_cdk" / "assets" / "amp_widget"
#: The construct id of the stack's one CloudWatch PromQL chart function (``PromQLCharts.of``).
SINGLETON_ID = "CdkLlmServingPromQLCharts"
#: CloudWatch's PromQL API permissions; ASSUMED: ``QueryMetrics`` has no resource-level
#: permissions, like the other two (docs/design/observability.md, "PromQL charts").
_CLOUDWATCH_PROMQL_ACTIONS = [
    "cloudwatch:QueryMetrics",
    "cloudwatch:GetMetricData",
    "cloudwatch:ListMetrics",
]


class PromQLCharts:
    """One PromQL source and the function that draws its charts; ``chart`` makes a widget.

    :param function: the chart function (``of`` or ``of_workspace`` make it).
    """

    def __init__(self, function: lambda_.IFunction) -> None:
        self.function = function

    @classmethod
    def of(cls, scope: Construct) -> PromQLCharts:
        """CloudWatch's PromQL API (SigV4 service ``monitoring``): one function per stack,
        created on first use, since its read-only role serves every dashboard of the stack."""
        stack = stack_of(scope)
        holder = stack.node.try_find_child(SINGLETON_ID)
        if holder is None:
            holder = Construct(stack, SINGLETON_ID)
            _cloudwatch_chart_function(holder)
        return cls(holder.node.find_child("Chart"))  # type: ignore[arg-type]

    @classmethod
    def of_workspace(
        cls, scope: Construct, workspace: aps.CfnWorkspace, role_description: str
    ) -> PromQLCharts:
        """An Amazon Managed Prometheus workspace: a function ``Widget`` under ``scope`` that may
        query that workspace only (``aps:QueryMetrics`` on its ARN)."""
        spec = WidgetFunctionSpec(
            code=CHART_CODE,
            description="CloudWatch custom widget: PromQL charts from Amazon Managed Prometheus",
            role_description=role_description,
            statements=[
                iam.PolicyStatement(actions=["aps:QueryMetrics"], resources=[workspace.attr_arn])
            ],
            environment={"PROMETHEUS_ENDPOINT": workspace.attr_prometheus_endpoint},
        )
        return cls(widget_function(scope, "Widget", spec))

    def chart(
        self,
        title: str,
        query: str,
        *,
        unit: str = "",
        width: int = 12,
        threshold: float | None = None,
    ) -> cloudwatch.CustomWidget:
        """A chart of ``query`` (a line per series; a dashed line at ``threshold``)."""
        params: dict[str, object] = {"query": query, "title": title, "unit": unit}
        if threshold is not None:
            params["threshold"] = threshold
        return cloudwatch.CustomWidget(
            function_arn=self.function.function_arn,
            title=title,
            params=params,
            width=width,
            height=6,
            update_on_refresh=True,
            update_on_resize=True,
            update_on_time_range_change=True,
        )


def _cloudwatch_chart_function(scope: Construct) -> lambda_.Function:
    """The function ``Chart`` reading CloudWatch's PromQL endpoint of the stack's region."""
    stack = Stack.of(scope)
    function = widget_function(
        scope,
        "Chart",
        WidgetFunctionSpec(
            code=CHART_CODE,
            description="CloudWatch custom widget: PromQL charts from CloudWatch (detailed observability)",
            role_description="Draws PromQL charts of SageMaker detailed-observability metrics",
            statements=[iam.PolicyStatement(actions=_CLOUDWATCH_PROMQL_ACTIONS, resources=["*"])],
            environment={
                "PROMETHEUS_ENDPOINT": f"https://monitoring.{stack.region}.{stack.url_suffix}",
                "SIGV4_SERVICE": "monitoring",
            },
            wildcards=["*"],
            wildcard_reason="CloudWatch QueryMetrics/GetMetricData/ListMetrics have no resource-level permissions.",
        ),
    )
    # cfn-lint's IAM action list (W3037) predates cloudwatch:QueryMetrics: silenced on this policy.
    policy = function.role.node.find_child("Policy") if function.role else None
    cfn_policy = policy.node.default_child if policy is not None else None
    if isinstance(cfn_policy, CfnResource):
        cfn_policy.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3037"]}})
    return function

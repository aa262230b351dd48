"""PromQL charts on a CloudWatch dashboard: a custom widget querying CloudWatch's PromQL API.

aws-cdk-lib 2.275 has no PromQL graph widget, so each chart is a CloudWatch custom widget
backed by one small function. It is the project's PromQL chart function
(``_cdk/assets/amp_widget``, which both serving paths' dashboards run), pointed at CloudWatch's
Prometheus-compatible endpoint ``https://monitoring.<region>.<url suffix>`` and signing for
SigV4 service ``monitoring`` (see ``token_metrics`` for the AWS sources). Its role may call
``cloudwatch:QueryMetrics``, ``cloudwatch:GetMetricData`` and ``cloudwatch:ListMetrics``: the
"Required permissions" of SageMaker's PromQL endpoint
(https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-detailed-observability-promql.html,
"PromQL endpoint and authentication"; Grafana's guide names only the latter two,
https://docs.aws.amazon.com/grafana/latest/userguide/cloudwatch-promql.html). ASSUMED: like the
other two, QueryMetrics has no resource-level permissions, so ``*``; for GetMetricData and
ListMetrics AWS says "specify a wildcard character (*) as the resource",
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/permissions-reference-cw.html)
and write its own log group.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnResource, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from constructs import Construct

from .._cdk.stacks import stack_of
from .._cdk.widget_function import WidgetFunctionSpec, widget_function
from .widget_grid import CustomCell

#: The chart function's code (standard library + botocore, in the Lambda Python runtime).
CHART_CODE = Path(__file__).parents[1] / "_cdk" / "assets" / "amp_widget"


class PromQLCharts(Construct):
    """The function behind PromQL custom widgets; ``chart`` makes a widget.

    One per stack (``of``): its role reads CloudWatch metrics of the account and region,
    which is what every dashboard of the stack needs, so dashboards share it.
    """

    #: The construct id of the stack's single instance.
    SINGLETON_ID = "CdkLlmServingPromQLCharts"

    @classmethod
    def of(cls, scope: Construct) -> PromQLCharts:
        """The stack's chart function, created on first use (found in the construct tree after)."""
        stack = stack_of(scope)
        found = stack.node.try_find_child(cls.SINGLETON_ID)
        return found if isinstance(found, PromQLCharts) else cls(stack, cls.SINGLETON_ID)

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        self._function_arn: str | None = None
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
                        actions=[
                            "cloudwatch:QueryMetrics",
                            "cloudwatch:GetMetricData",
                            "cloudwatch:ListMetrics",
                        ],
                        resources=["*"],
                    )
                ],
                environment={
                    "PROMETHEUS_ENDPOINT": f"https://monitoring.{stack.region}.{stack.url_suffix}",
                    "SIGV4_SERVICE": "monitoring",
                },
                wildcards=["*"],
                wildcard_reason="CloudWatch QueryMetrics/GetMetricData/ListMetrics have no resource-level permissions.",
            ),
        )
        # cfn-lint's IAM action list (W3037) predates cloudwatch:QueryMetrics, which AWS's
        # PromQL endpoint requires (above): that one rule is silenced on this policy alone.
        policy = self.function.role.node.find_child("Policy") if self.function.role else None
        cfn_policy = policy.node.default_child if policy is not None else None
        if isinstance(cfn_policy, CfnResource):
            cfn_policy.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3037"]}})

    @property
    def function_arn(self) -> str:
        """The function's ARN (a token), read from the kernel once for every chart."""
        if self._function_arn is None:
            self._function_arn = self.function.function_arn
        return self._function_arn

    def chart(self, title: str, query: str, unit: str, width: int) -> cloudwatch.CustomWidget:
        """The chart as an aws-cdk-lib widget, for ``Dashboard.add_widgets``."""
        return cloudwatch.CustomWidget(
            function_arn=self.function_arn,
            title=title,
            params=_params(title, query, unit),
            width=width,
            height=6,
            update_on_refresh=True,
            update_on_resize=True,
            update_on_time_range_change=True,
        )

    def cell(self, title: str, query: str, unit: str, width: int) -> CustomCell:
        """The same chart as a ``widget_grid`` cell (the same widget body, built in Python)."""
        return CustomCell(
            function_arn=self.function_arn,
            title=title,
            params=_params(title, query, unit),
            width=width,
            height=6,
        )


def _params(title: str, query: str, unit: str) -> dict[str, str]:
    # The chart function reads no unit as "" (``params.get("unit", "")``).
    return {"query": query, "title": title, **({"unit": unit} if unit else {})}

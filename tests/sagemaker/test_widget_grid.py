"""``widget_grid``: the dashboard body written in Python is the one aws-cdk-lib's ``Dashboard``
writes for the same widgets (rows, wrapping, tokens, numbers, non-ASCII), compared on the
synthesized templates; the Duration and stack look-ups answer what aws-cdk-lib answers."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sns as sns

from cdk_llm_serving._cdk.durations import human, seconds
from cdk_llm_serving._cdk.stacks import region_of_stack, stack_of
from cdk_llm_serving.core.graph_widget import GraphWidget, metric_line
from cdk_llm_serving.core.widget_grid import (
    AlarmStatusCell,
    CustomCell,
    TextCell,
    WidgetGrid,
    dashboard_body,
)
from tests.support.builders import new_stack, template_of


def _graph(title: str, width: int) -> GraphWidget:
    """A chart with a whole float (written ``1`` by JavaScript) and a non-ASCII title."""
    return GraphWidget(
        title=f"{title} (µs)",
        region="us-east-1",
        lines=[metric_line("AWS/SageMaker", "ModelLatency", [("EndpointName", "e")], label="é")],
        width=width,
        properties={"annotations": {"horizontal": [{"value": 1.0}, {"value": 0.7}]}},
    )


def _rows() -> list[list[Any]]:
    """Charts in the order of both dashboards; the third row (5+5+4+5+5+6) wraps."""
    return [
        [_graph("one", 12), _graph("two", 12)],
        [_graph(f"p{index}", width) for index, width in enumerate((5, 5, 4, 5, 5, 6))],
    ]


def _custom_params() -> dict[str, str]:
    return {"query": 'rate(x{a="b"}[5m])', "title": "q"}


def test_the_grid_writes_the_body_aws_cdk_lib_writes():
    stack = new_stack()
    function_arn = sns.CfnTopic(stack, "Topic").attr_topic_arn  # any token attribute
    alarm = cloudwatch.Alarm(
        stack,
        "Alarm",
        metric=cloudwatch.Metric(namespace="N", metric_name="M"),
        threshold=1,
        evaluation_periods=1,
    )

    reference = cloudwatch.Dashboard(stack, "Reference", default_interval=Duration.hours(3))
    reference.add_widgets(cloudwatch.TextWidget(markdown="# Título\nline", width=24, height=3))
    for row in _rows():
        reference.add_widgets(*row)
    reference.add_widgets(
        *(
            cloudwatch.CustomWidget(
                function_arn=function_arn, title="q", params=_custom_params(), width=8, height=6
            )
            for _ in range(3)
        )
    )
    reference.add_widgets(
        cloudwatch.AlarmStatusWidget(alarms=[alarm], title="Alarms", width=24, height=3)
    )

    cells: list[list[Any]] = [[TextCell("# Título\nline", width=24, height=3)]]
    cells += _rows()
    cells.append(
        [
            CustomCell(
                function_arn=function_arn, title="q", params=_custom_params(), width=8, height=6
            )
            for _ in range(3)
        ]
    )
    cells.append([AlarmStatusCell([alarm.alarm_arn], title="Alarms", width=24, height=3)])
    cloudwatch.CfnDashboard(
        stack, "Grid", dashboard_body=dashboard_body(WidgetGrid(cells), start="-PT3H")
    )

    resources = template_of(stack)["Resources"]
    bodies = [
        body["Properties"]["DashboardBody"]
        for body in resources.values()
        if body["Type"] == "AWS::CloudWatch::Dashboard"
    ]
    assert len(bodies) == 2
    assert bodies[0] == bodies[1]
    assert "Fn::Join" in bodies[0]  # the tokens were resolved, not written as text


def test_the_grid_reports_the_height_of_its_rows_so_later_widgets_go_below():
    grid = WidgetGrid([[TextCell("a", width=24, height=3)], [], [_graph("b", 12)]])
    assert (grid.width, grid.height) == (24, 9)


@pytest.mark.parametrize(
    "duration", [Duration.millis(200), Duration.seconds(60), Duration.hours(1)]
)
def test_duration_facts_are_aws_cdk_libs_own(duration):
    assert seconds(duration, integral=False) == duration.to_seconds(integral=False)
    assert human(duration) == duration.to_human_string()
    assert seconds(duration, integral=False) == seconds(duration, integral=False)


def test_an_integral_seconds_look_up_still_refuses_a_fraction():
    with pytest.raises(RuntimeError):
        seconds(Duration.millis(200))


def test_stack_and_region_are_the_scopes_own():
    stack = new_stack()
    child = cloudwatch.Dashboard(stack, "Dashboard")
    assert stack_of(child) is Stack.of(child)
    assert region_of_stack(child) == "us-east-1"

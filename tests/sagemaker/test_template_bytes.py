"""Template bytes of one pool endpoint, and the short dashboard body that keeps them down.

CloudFormation's 1,000,000-byte limit applies to the template as uploaded, i.e. as aws-cdk-lib
writes it: ``JSON.stringify(template, undefined, 1)``, which ``json.dumps(indent=1,
ensure_ascii=False)`` reproduces byte for byte. Issue #19: at most 25 KB per endpoint with
scaling, alarms and dashboard.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdk_llm_serving import InstancePool, PoolEndpointAlarms, PoolEndpointDashboard
from cdk_llm_serving.core.graph_widget import SAME, expression_line, metric_line, shorten
from cdk_llm_serving.core.promql_charts import PromQLCharts
from tests.support.builders import new_stack, pool_endpoint, template_of
from tests.support.template_helpers import flatten, only_resource, resources_of_type

#: Bytes one endpoint may add to a template, as written (issue #19: 25 KB; issue #27: 30 KB,
#: the variant alarms read each pool's series instead of the variant's UNCONFIRMED one).
#: Issue #32: 30.5 KB, the model role's confused-deputy trust condition (``aws:SourceArn``,
#: about 190 bytes as written per model).
ENDPOINT_BYTES_LIMIT = 30_500


def written_bytes(template: dict) -> int:
    return len(json.dumps(template, indent=1, ensure_ascii=False).encode())


@pytest.fixture(scope="module")
def bench_template() -> dict:
    """``make bench``'s endpoint: two pools, scaling, alarms and dashboard, in a stack of its own."""
    stack = new_stack("Bytes")
    endpoint = pool_endpoint(
        stack,
        pools=[
            InstancePool("ml.p5.48xlarge", max_concurrency=20),
            InstancePool("ml.g6e.12xlarge", max_concurrency=8),
        ],
    )
    endpoint.auto_scale(min_capacity=1, max_capacity=4)
    alarms = PoolEndpointAlarms(stack, "Alarms", endpoint=endpoint)
    PoolEndpointDashboard(stack, "Dashboard", endpoint=endpoint, alarms=alarms.alarms)
    return template_of(stack)


def test_one_endpoint_writes_at_most_30_5_kb(bench_template):
    resources = bench_template["Resources"]
    # What a second endpoint would share: the stack's one PromQL chart function.
    shared = {k for k in resources if k.startswith(PromQLCharts.SINGLETON_ID)}
    assert shared, "the shared chart function moved: update this test's notion of 'shared'"
    without = {**bench_template, "Resources": {k: resources[k] for k in shared}}
    per_endpoint = written_bytes(bench_template) - written_bytes(without)
    heaviest = sorted(
        ((written_bytes(body), key) for key, body in resources.items() if key not in shared),
        reverse=True,
    )[:3]
    assert per_endpoint <= ENDPOINT_BYTES_LIMIT, f"{per_endpoint} bytes; heaviest: {heaviest}"


# ----------------------------------------------------------------------- the short dashboard body


def expand(lines: list[list[Any]]) -> list[list[Any]]:
    """The metrics array as CloudWatch reads it: ``"."`` is the previous metric's value at the
    same position (Dashboard Body Structure, "Format for Each Metric in the Array")."""
    out: list[list[Any]] = []
    previous: list[Any] | None = None
    for line in lines:
        if isinstance(line[0], dict):
            out.append(line)
            previous = None
            continue
        values = [v for v in line if not isinstance(v, dict)]
        assert previous is not None or SAME not in values, f"'.' in a first metric: {line}"
        full = [previous[i] if v == SAME else v for i, v in enumerate(values)]  # type: ignore[index]
        out.append(full + line[len(values) :])
        previous = full
    return out


def test_shorten_repeats_values_but_names_each_written_value():
    dims = [("EndpointName", "e"), ("VariantName", "v")]
    lines = [
        metric_line("NS", "M", [*dims, ("InstanceType", "a")], label="1"),
        metric_line("NS", "M", [*dims, ("InstanceType", "b")], label="2"),
        expression_line("m1 + m2"),
        metric_line("NS", "M", [*dims, ("InstanceType", "b")]),
    ]
    short = shorten(lines)
    assert short[1] == [".", ".", ".", ".", ".", ".", "InstanceType", "b", {"label": "2"}]
    assert short[3] == lines[3]  # after an expression, written in full
    assert expand(short) == lines


def graph_widgets(template: dict) -> dict[str, dict]:
    _, dashboard = only_resource(template, "AWS::CloudWatch::Dashboard")
    body = json.loads(flatten(dashboard["Properties"]["DashboardBody"], "<token>"))
    return {
        w["properties"]["title"]: w["properties"] for w in body["widgets"] if w["type"] == "metric"
    }


def test_pool_charts_read_full_metrics_with_the_widgets_period_and_stat(pool_template):
    charts = graph_widgets(pool_template)
    invocations = charts["Invocations per pool"]
    assert (invocations["period"], invocations["stat"], "view" in invocations) == (60, "Sum", False)
    lines = expand(invocations["metrics"])
    types = [line[line.index("InstanceType") + 1] for line in lines]
    assert types == ["ml.g6e.12xlarge", "ml.g6.12xlarge", "ml.g6e.2xlarge"]
    assert all(line[:2] == ["AWS/SageMaker", "Invocations"] for line in lines)
    assert all(
        line[line.index("EndpointName") + 1].startswith("GptOss20bPoolEndpoint") for line in lines
    )


def test_the_fleet_chart_draws_the_scaling_policys_own_queries(pool_template):
    (policy,) = resources_of_type(
        pool_template, "AWS::ApplicationAutoScaling::ScalingPolicy"
    ).values()
    spec = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    queries = spec["CustomizedMetricSpecification"]["Metrics"]
    chart = graph_widgets(pool_template)["Fleet utilization vs target"]
    lines = expand(chart["metrics"])
    (expression,) = [q["Expression"] for q in queries if "Expression" in q]
    assert [line[0]["expression"] for line in lines if isinstance(line[0], dict)] == [expression]
    drawn = {
        line[-1]["id"]: (
            line[:2],
            sorted(zip(line[2:-1:2], line[3:-1:2], strict=True)),
            line[-1].get("stat", chart["stat"]),
        )
        for line in lines
        if not isinstance(line[0], dict)
    }
    asked = {
        q["Id"]: (
            [q["MetricStat"]["Metric"]["Namespace"], q["MetricStat"]["Metric"]["MetricName"]],
            sorted((d["Name"], d["Value"]) for d in q["MetricStat"]["Metric"]["Dimensions"]),
            q["MetricStat"]["Stat"],
        )
        for q in queries
        if "MetricStat" in q
    }
    assert drawn == asked
    assert chart["annotations"]["horizontal"] == [
        {"value": spec["TargetValue"], "label": "target", "yAxis": "left"}
    ]

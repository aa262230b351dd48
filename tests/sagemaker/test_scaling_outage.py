"""The synthesized scaling expression through outages, idle fleets, empty pools and intervals.

Evaluated with ``tests.support.metric_math`` (CloudWatch's documented missing-data rules) on
the expression string the policy carries, against the true utilization
sum(n_i*c_i)/sum(n_i*cap_i). Target tracking holds on a metric with no data (Application
Auto Scaling: insufficient data is not read as low utilization), so an outage must read as
missing, never as 0.
"""

from __future__ import annotations

import pytest

from cdk_llm_serving import ConfigurationError, InstancePool
from cdk_llm_serving.core.fleet_utilization import (
    MAX_ALARM_METRICS,
    PoolCapacity,
    concurrency_sample_seconds,
    fleet_utilization_queries,
)
from tests.support.builders import new_stack, pool_endpoint, template_of
from tests.support.metric_math import evaluate_queries
from tests.support.template_helpers import resources_of_type

FIVE = [
    ("ml.p5.48xlarge", 20.0),
    ("ml.p5en.48xlarge", 24.0),
    ("ml.p4d.24xlarge", 12.0),
    ("ml.g6e.12xlarge", 8.0),
    ("ml.g6.12xlarge", 4.0),
]
FILL_MODES = pytest.mark.parametrize("fill_without_data", [True, False], ids=["fill", "nofill"])


def policy_metrics(pools: list[tuple[str, float]], **endpoint_options) -> list[dict]:
    stack = new_stack("Outage")
    endpoint = pool_endpoint(
        stack,
        pools=[InstancePool(t, max_concurrency=cap) for t, cap in pools],
        **endpoint_options,
    )
    endpoint.auto_scale(max_capacity=10)
    (policy,) = [
        p["Properties"]
        for p in resources_of_type(
            template_of(stack), "AWS::ApplicationAutoScaling::ScalingPolicy"
        ).values()
        if p["Properties"]["PolicyType"] == "TargetTrackingScaling"
    ]
    metrics: list[dict] = policy["TargetTrackingScalingPolicyConfiguration"][
        "CustomizedMetricSpecification"
    ]["Metrics"]
    return metrics


@pytest.fixture(scope="module")
def five_pool_metrics() -> list[dict]:
    return policy_metrics(FIVE)


def observed(fleet: dict[int, tuple[int, float]], samples_per_instance: int) -> dict:
    """pool index (1-based) -> (instances, concurrency per instance); empty pools publish nothing."""
    values: dict[str, float | None] = {}
    for index in range(1, len(FIVE) + 1):
        n, c = fleet.get(index, (0, 0.0))
        values[f"samples{index}"] = float(n * samples_per_instance) if n else None
        values[f"load{index}"] = n * samples_per_instance * c if n else None
    return values


def true_utilization(fleet: dict[int, tuple[int, float]]) -> float:
    load = sum(n * c for n, c in fleet.values())
    capacity = sum(n * FIVE[i - 1][1] for i, (n, _) in fleet.items())
    return load / capacity


@FILL_MODES
def test_a_metrics_outage_reads_missing_not_zero(five_pool_metrics, fill_without_data):
    nothing = {q["Id"]: None for q in five_pool_metrics if "MetricStat" in q}
    value = evaluate_queries(five_pool_metrics, nothing, fill_without_data=fill_without_data)
    assert value is None, "with no data at all the policy must hold, not read 0 and scale in"


@FILL_MODES
@pytest.mark.parametrize("interval", [10, 60], ids=["10s", "60s"])
def test_a_fleet_of_idle_instances_reads_zero(five_pool_metrics, fill_without_data, interval):
    fleet = {1: (2, 0.0), 4: (3, 0.0)}
    value = evaluate_queries(
        five_pool_metrics, observed(fleet, 60 // interval), fill_without_data=fill_without_data
    )
    assert value == pytest.approx(0.0)


@FILL_MODES
@pytest.mark.parametrize("interval", [10, 60], ids=["10s", "60s"])
@pytest.mark.parametrize(
    "fleet",
    [
        {1: (3, 14.0)},  # four pools empty
        {1: (2, 15.0), 2: (1, 20.0), 3: (1, 9.0), 4: (4, 6.0), 5: (2, 1.0)},  # all five
        {2: (1, 30.0), 5: (6, 2.0)},  # primary empty
        {1: (1, 0.0), 3: (2, 12.0)},  # an idle pool next to a busy one
    ],
    ids=["one-pool", "five-pools", "primary-empty", "idle-and-busy"],
)
def test_the_expression_is_the_true_utilization(
    five_pool_metrics, fill_without_data, interval, fleet
):
    # A 60 s period: 6 samples per instance at 10 s, 1 at a 60 s publication interval.
    value = evaluate_queries(
        five_pool_metrics, observed(fleet, 60 // interval), fill_without_data=fill_without_data
    )
    assert value == pytest.approx(true_utilization(fleet))


def test_five_pools_are_the_most_one_target_tracking_metric_takes(five_pool_metrics):
    assert len([q for q in five_pool_metrics if "MetricStat" in q]) == MAX_ALARM_METRICS
    six = [PoolCapacity(f"ml.g6.{n}xlarge", 4.0) for n in (2, 4, 8, 12, 16, 24)]
    with pytest.raises(ConfigurationError, match="at most 5 pools"):
        fleet_utilization_queries("e", "v", six)


def test_the_sample_interval_follows_the_publication_frequency():
    # Enhanced metrics: the configured frequency applies to invocation metrics too.
    assert concurrency_sample_seconds(True, 60) == 60
    assert concurrency_sample_seconds(True, 10) == 10
    # Without: ConcurrentRequestsPerModel is AWS's 10-second high-resolution metric.
    assert concurrency_sample_seconds(False, 60) == 10

"""The asynchronous backlog policy weighs each pool's instances by what one of them sustains.

AWS's ``ApproximateBacklogSizePerInstance`` counts every instance as one (a g6e.2xlarge like a
g6e.12xlarge). The synthesized expression is evaluated with ``tests.support.metric_math``
(CloudWatch's documented missing-data rules) against the true backlog per first-pool-sized
instance, ``ApproximateBacklogSize / sum(n_i * cap_i / cap_1)``, on mixed pools, missing data,
an empty pool and a fleet at zero.
"""

from __future__ import annotations

import pytest
from aws_cdk import aws_s3 as s3

from cdk_llm_serving import AsyncInference, ConfigurationError, InstancePool
from cdk_llm_serving.core.fleet_utilization import (
    BACKLOG_PER_INSTANCE_METRIC,
    HOST_COUNT_METRIC,
    HOST_NAMESPACE,
)
from tests.support.builders import new_stack, pool_endpoint, template_of
from tests.support.metric_math import evaluate_queries
from tests.support.template_helpers import resources_of_type

#: A g6e.12xlarge (4 GPUs) first, a g6e.2xlarge (1 GPU) second: not equal instances.
POOLS = [("ml.g6e.12xlarge", 16.0), ("ml.g6e.2xlarge", 4.0), ("ml.g6.12xlarge", 8.0)]
FILL_MODES = pytest.mark.parametrize("fill_without_data", [True, False], ids=["fill", "nofill"])


def async_policies(pools: list[InstancePool]) -> tuple[dict, list[dict], list[dict]]:
    stack = new_stack("AsyncBacklog")
    endpoint = pool_endpoint(
        stack,
        pools=pools,
        async_inference=AsyncInference(output_bucket=s3.Bucket(stack, "Out")),
    )
    endpoint.auto_scale(min_capacity=0, max_capacity=6)
    template = template_of(stack)
    policies = [
        p["Properties"]
        for p in resources_of_type(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    ]
    tracking = next(p for p in policies if p["PolicyType"] == "TargetTrackingScaling")
    alarms = [
        a["Properties"] for a in resources_of_type(template, "AWS::CloudWatch::Alarm").values()
    ]
    return tracking["TargetTrackingScalingPolicyConfiguration"], policies, alarms


@pytest.fixture(scope="module")
def weighted() -> list[dict]:
    config, _, _ = async_policies([InstancePool(t, max_concurrency=c) for t, c in POOLS])
    metrics: list[dict] = config["CustomizedMetricSpecification"]["Metrics"]
    return metrics


def observed(backlog: float | None, fleet: dict[int, int], samples: int) -> dict:
    """AWS's per-instance backlog (every instance counted as one) and each pool's host samples;
    an empty pool publishes nothing."""
    instances = sum(fleet.values())
    values: dict[str, float | None] = {
        "backlog": None if backlog is None or instances == 0 else backlog / instances
    }
    for index in range(1, len(POOLS) + 1):
        n = fleet.get(index, 0)
        values[f"hosts{index}"] = float(n * samples) if n else None
    return values


def true_backlog(backlog: float, fleet: dict[int, int]) -> float:
    first = POOLS[0][1]
    return backlog / sum(n * POOLS[i - 1][1] / first for i, n in fleet.items())


def test_the_policy_reads_the_documented_series(weighted):
    fetched = [q["MetricStat"] for q in weighted if "MetricStat" in q]
    backlog, *hosts = fetched
    assert backlog["Metric"]["MetricName"] == BACKLOG_PER_INSTANCE_METRIC
    assert [d["Name"] for d in backlog["Metric"]["Dimensions"]] == ["EndpointName"]
    assert {h["Metric"]["MetricName"] for h in hosts} == {HOST_COUNT_METRIC}
    assert {h["Metric"]["Namespace"] for h in hosts} == {HOST_NAMESPACE}
    assert [
        next(d["Value"] for d in h["Metric"]["Dimensions"] if d["Name"] == "InstanceType")
        for h in hosts
    ] == [t for t, _ in POOLS]
    assert {h["Stat"] for h in hosts} == {"SampleCount"}


@FILL_MODES
@pytest.mark.parametrize("samples", [1, 6], ids=["60s", "10s"])
@pytest.mark.parametrize(
    "fleet",
    [
        {1: 2, 2: 3},  # mixed: big and small
        {2: 4},  # first pool empty, only small instances
        {1: 1, 2: 1, 3: 2},  # all three
        {1: 3},  # one pool: AWS's metric as it is
    ],
    ids=["mixed", "first-empty", "three-pools", "one-pool"],
)
def test_the_expression_is_the_backlog_per_first_pool_instance(
    weighted, fill_without_data, samples, fleet
):
    value = evaluate_queries(
        weighted, observed(40.0, fleet, samples), fill_without_data=fill_without_data
    )
    assert value == pytest.approx(true_backlog(40.0, fleet))


def test_small_instances_count_for_less_than_aws_metric_says(weighted):
    # 2 x g6e.12xlarge and 4 x g6e.2xlarge hold 3 first-pool instances' worth, not 6.
    fleet = {1: 2, 2: 4}
    value = evaluate_queries(weighted, observed(60.0, fleet, 1))
    assert value == pytest.approx(20.0)
    assert observed(60.0, fleet, 1)["backlog"] == pytest.approx(10.0)  # AWS's: half the truth


@FILL_MODES
@pytest.mark.parametrize("missing", ["everything", "backlog"])
def test_missing_backlog_reads_missing_not_zero(weighted, fill_without_data, missing):
    values = observed(30.0, {1: 2, 2: 1}, 1)
    for key in values:
        if missing == "everything" or key.startswith(missing):
            values[key] = None
    value = evaluate_queries(weighted, values, fill_without_data=fill_without_data)
    assert value is None, "without data the policy must hold, not read 0 and scale in"


@FILL_MODES
def test_without_the_pool_counts_the_policy_tracks_aws_own_backlog(weighted, fill_without_data):
    """The per-type host series UNCONFIRMED[host-metric-instance-type]: were it not published,
    the policy keeps scaling on AWS's unweighted value instead of going blind."""
    values = observed(30.0, {1: 2, 2: 1}, 1)
    values.update({key: None for key in values if key.startswith("hosts")})
    value = evaluate_queries(weighted, values, fill_without_data=fill_without_data)
    assert value == pytest.approx(10.0)  # 30 queued over 3 instances, each counted as one


@FILL_MODES
def test_an_idle_fleet_reads_zero(weighted, fill_without_data):
    values = observed(0.0, {1: 1, 2: 2}, 1)
    assert evaluate_queries(weighted, values, fill_without_data=fill_without_data) == 0.0


def test_at_zero_instances_the_first_comes_from_the_backlog_alarm(weighted):
    values = observed(12.0, {}, 1)  # queued requests, no instance: no per-instance value
    assert evaluate_queries(weighted, values) is None
    _, policies, alarms = async_policies([InstancePool(t, max_concurrency=c) for t, c in POOLS])
    (step,) = [p for p in policies if p["PolicyType"] == "StepScaling"]
    adjustments = step["StepScalingPolicyConfiguration"]["StepAdjustments"]
    assert adjustments == [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}]
    (alarm,) = [a for a in alarms if a.get("MetricName") == "HasBacklogWithoutCapacity"]
    assert alarm["Dimensions"][0]["Name"] == "EndpointName"


def test_one_pool_keeps_aws_metric():
    config, _, _ = async_policies([InstancePool("ml.g6e.12xlarge")])
    spec = config["CustomizedMetricSpecification"]
    assert spec["MetricName"] == BACKLOG_PER_INSTANCE_METRIC
    assert "Metrics" not in spec


def test_several_pools_need_each_pool_capacity():
    with pytest.raises(ConfigurationError) as raised:
        async_policies(
            [InstancePool("ml.g6e.12xlarge", max_concurrency=16), InstancePool("ml.g6e.2xlarge")]
        )
    assert "pools[1].max_concurrency" in str(raised.value)
    assert "pools[0]" not in str(raised.value)

"""Weighted target tracking: the synthesized expression equals the fleet's true utilization."""

from __future__ import annotations

import math

import botocore.session
import pytest

from cdk_llm_serving import ConfigurationError, InstancePool
from cdk_llm_serving.core.fleet_utilization import MAX_ALARM_METRICS
from tests.support.builders import new_stack, pool_endpoint, template_of
from tests.support.metric_math import evaluate, evaluate_queries
from tests.support.template_helpers import only_resource, resources_of_type

POOLS = [("ml.p5.48xlarge", 20.0), ("ml.p4d.24xlarge", 12.0), ("ml.g6e.12xlarge", 8.0)]


@pytest.fixture(scope="module")
def scaled_template() -> dict:
    stack = new_stack("Scaled")
    endpoint = pool_endpoint(
        stack, pools=[InstancePool(t, max_concurrency=cap) for t, cap in POOLS]
    )
    endpoint.auto_scale(min_capacity=1, max_capacity=8)
    return template_of(stack)


def policy_of(template: dict) -> dict:
    (policy,) = [
        p
        for p in resources_of_type(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
        if p["Properties"]["PolicyType"] == "TargetTrackingScaling"
    ]
    return policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]


#: Samples each instance reports per period (1 at a 60 s period and interval; 6 at 10 s).
SAMPLES_PER_INSTANCE = (1, 6)


def observed_metrics(
    fleet: dict[int, tuple[int, float]], samples_per_instance: int = 1
) -> dict[str, float | None]:
    """One period of CloudWatch data: pool index -> (instances, concurrency per instance).

    Every instance reports its concurrency (0 when idle) ``samples_per_instance`` times; a
    pool without instances has no datapoints at all.
    """
    values: dict[str, float | None] = {}
    for index in range(1, len(POOLS) + 1):
        instances, concurrency = fleet.get(index, (0, 0.0))
        samples = instances * samples_per_instance
        values[f"samples{index}"] = float(samples) if instances else None
        values[f"load{index}"] = samples * concurrency if instances else None
    return values


def true_utilization(fleet: dict[int, tuple[int, float]]) -> float:
    load = sum(n * c for n, c in fleet.values())
    capacity = sum(n * POOLS[i - 1][1] for i, (n, _) in fleet.items())
    return load / capacity if capacity else 0.0


MIXES = {
    "primary only": {1: (3, 14.0)},
    "every type": {1: (2, 15.0), 2: (1, 9.0), 3: (4, 6.0)},
    "fallback only": {3: (5, 7.5)},
    "two fallbacks, no primary": {2: (2, 11.0), 3: (1, 2.0)},
    "one of each at full load": {1: (1, 20.0), 2: (1, 12.0), 3: (1, 8.0)},
    "zero traffic": {1: (2, 0.0)},
    "overloaded primary": {1: (1, 35.0), 3: (6, 4.0)},
    # Idle pools: instances that served no request in the period still hold capacity.
    "idle fallback instances": {1: (2, 14.0), 3: (3, 0.0)},
    "idle primary, busy fallback": {1: (1, 0.0), 2: (2, 10.0)},
    "every pool idle but one instance": {1: (2, 0.0), 2: (1, 0.0), 3: (1, 8.0)},
}


@pytest.mark.parametrize("samples_per_instance", SAMPLES_PER_INSTANCE)
@pytest.mark.parametrize("mix", list(MIXES), ids=list(MIXES))
def test_expression_equals_true_utilization(scaled_template, mix, samples_per_instance):
    queries = policy_of(scaled_template)["CustomizedMetricSpecification"]["Metrics"]
    value = evaluate_queries(queries, observed_metrics(MIXES[mix], samples_per_instance))
    assert value is not None, "the expression went blind"
    assert value == pytest.approx(true_utilization(MIXES[mix]))


def test_the_published_unweighted_average_is_wrong_for_real_mixes():
    """AWS's example averages per-type utilization: (a/20 + b/8) / 2."""
    fleet = {1: (1, 10.0), 3: (5, 6.0)}
    naive = evaluate("(a / 20 + b / 8) / 2", {"a": 10.0, "b": 6.0})
    assert naive != pytest.approx(true_utilization(fleet))
    # While a pool is empty CloudWatch treats its missing values as 0 (using-metric-math.html,
    # arithmetic): the average halves the busy pool's utilization.
    assert evaluate("(a / 20 + b / 8) / 2", {"a": 10.0, "b": None}) == pytest.approx(0.25)


def test_policy_shape(scaled_template):
    config = policy_of(scaled_template)
    assert config["TargetValue"] == 0.7
    assert config["ScaleOutCooldown"] == 60 and config["ScaleInCooldown"] == 900
    metrics = config["CustomizedMetricSpecification"]["Metrics"]
    stats = [q for q in metrics if "MetricStat" in q]
    assert len(stats) == 2 * len(POOLS) <= MAX_ALARM_METRICS
    assert {(q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Stat"]) for q in stats} == {
        ("ConcurrentRequestsPerModel", "Sum"),
        ("ConcurrentRequestsPerModel", "SampleCount"),
    }
    for query in stats:
        dims = {d["Name"] for d in query["MetricStat"]["Metric"]["Dimensions"]}
        assert dims == {"EndpointName", "VariantName", "InstanceType"}
        assert query["MetricStat"]["Metric"]["Namespace"] == "AWS/SageMaker"
        assert query["ReturnData"] is False
    assert [q["Id"] for q in metrics if q.get("ReturnData")] == ["utilization"]
    assert all(len(q.get("Expression", "")) <= 2048 for q in metrics)


def test_scalable_target(scaled_template):
    _, target = only_resource(scaled_template, "AWS::ApplicationAutoScaling::ScalableTarget")
    props = target["Properties"]
    assert props["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert props["ServiceNamespace"] == "sagemaker"
    assert (props["MinCapacity"], props["MaxCapacity"]) == (1, 8)
    _, endpoint = only_resource(scaled_template, "AWS::SageMaker::Endpoint")
    assert (
        props["ResourceId"]
        == f"endpoint/{endpoint['Properties']['EndpointName']}/variant/AllTraffic"
    )
    endpoint_id, _ = only_resource(scaled_template, "AWS::SageMaker::Endpoint")
    assert endpoint_id in target["DependsOn"]


def test_capacities_derive_from_the_planner_when_the_model_declares_sizing():
    from cdk_llm_serving.planning.sizing import ModelSizing
    from tests.support.builders import serving_model

    stack = new_stack()
    model = serving_model(stack, sizing=ModelSizing("gpt-oss-20b", "bf16", max_context=32768))
    endpoint = pool_endpoint(
        stack,
        model=model,
        pools=[InstancePool("ml.g6e.12xlarge"), InstancePool("ml.g6.12xlarge", max_concurrency=6)],
    )
    plan = endpoint.pool_plans[0].plan
    assert endpoint.pool_capacities() == [
        float(min(plan.sequences_at_max_context, 256 * plan.data_parallel)),
        6.0,
    ]


def scale_problems(**kwargs) -> list[str]:
    stack = new_stack()
    endpoint = pool_endpoint(
        stack,
        pools=kwargs.pop(
            "pools",
            [
                InstancePool("ml.p5.48xlarge", max_concurrency=20),
                InstancePool("ml.g6e.12xlarge", max_concurrency=8),
            ],
        ),
    )
    with pytest.raises(ConfigurationError) as caught:
        endpoint.auto_scale(**{"max_capacity": 4, **kwargs})
    return [str(p) for p in caught.value.problems]


def test_invalid_ranges():
    assert scale_problems(min_capacity=5, max_capacity=2, target_utilization=1.5) == [
        "max_capacity = 2: must be at least 1 and at least min_capacity (5)",
        "target_utilization = 1.5: must be in (0, 1]",
    ]
    assert scale_problems(min_capacity=0) == [
        "min_capacity = 0: must be at least 1 for a real-time endpoint"
    ]
    assert scale_problems(target_utilization=0) == ["target_utilization = 0: must be in (0, 1]"]


def test_every_pool_needs_a_capacity():
    problems = scale_problems(
        pools=[InstancePool("ml.p5.48xlarge", max_concurrency=20), InstancePool("ml.g6e.12xlarge")]
    )
    assert problems == [
        "pools[1].max_concurrency = None: ml.g6e.12xlarge: auto scaling needs what one instance sustains; set max_concurrency or give the pool's model a sizing"
    ]


def test_capacity_must_be_positive_and_finite():
    with pytest.raises(ConfigurationError) as caught:
        pool_endpoint(
            pools=[
                InstancePool("ml.p5.48xlarge", max_concurrency=0),
                InstancePool("ml.g6e.12xlarge", max_concurrency=math.inf),
            ]
        )
    assert [p.property for p in caught.value.problems] == [
        "pools[0].max_concurrency",
        "pools[1].max_concurrency",
    ]


def test_five_pools_the_api_maximum_fit_one_alarm():
    types = (
        "ml.p5.48xlarge",
        "ml.p5en.48xlarge",
        "ml.p4d.24xlarge",
        "ml.g6e.12xlarge",
        "ml.g6.12xlarge",
    )
    stack = new_stack("FivePools")
    endpoint = pool_endpoint(stack, pools=[InstancePool(t, max_concurrency=4) for t in types])
    endpoint.auto_scale(max_capacity=10)
    metrics = policy_of(template_of(stack))["CustomizedMetricSpecification"]["Metrics"]
    assert len([q for q in metrics if "MetricStat" in q]) == MAX_ALARM_METRICS
    # PutMetricAlarm (which target tracking creates): "up to 20 MetricDataQuery structures ...
    # as many as 10 ... MetricStat" (botocore cloudwatch MetricDataQuery documentation), and
    # each expression within Application Auto Scaling's own length limit.
    assert len(metrics) <= 20
    longest = (
        botocore.session.get_session()
        .get_service_model("application-autoscaling")
        .shape_for("TargetTrackingMetricDataQuery")
        .members["Expression"]
        .metadata["max"]
    )
    assert all(len(q.get("Expression", "")) <= longest for q in metrics)
    # Two idle pools among five: every instance counts.
    observed = {f"samples{i}": float(n) for i, n in enumerate((1, 0, 2, 1, 0), start=1) if n}
    observed |= {f"load{i}": load for i, load in ((1, 4.0), (3, 0.0), (4, 0.0))}
    observed |= {f"{k}{i}": None for k in ("samples", "load") for i in (2, 5)}
    assert evaluate_queries(metrics, observed) == pytest.approx(4 / 16)


def test_auto_scale_twice_is_an_error():
    endpoint = pool_endpoint(pools=[InstancePool("ml.p5.48xlarge", max_concurrency=20)])
    endpoint.auto_scale(max_capacity=2)
    with pytest.raises(ConfigurationError, match="called twice"):
        endpoint.auto_scale(max_capacity=3)


def test_async_endpoint_scales_on_backlog_and_from_zero():
    from aws_cdk import aws_s3 as s3

    from cdk_llm_serving import AsyncInference

    stack = new_stack()
    endpoint = pool_endpoint(
        stack,
        pools=[InstancePool("ml.p5.48xlarge")],
        async_inference=AsyncInference(output_bucket=s3.Bucket(stack, "Out")),
    )
    endpoint.auto_scale(min_capacity=0, max_capacity=4)
    template = template_of(stack)
    policies = [
        p["Properties"]
        for p in resources_of_type(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    ]
    tracking = next(p for p in policies if p["PolicyType"] == "TargetTrackingScaling")
    assert (
        tracking["TargetTrackingScalingPolicyConfiguration"]["CustomizedMetricSpecification"][
            "MetricName"
        ]
        == "ApproximateBacklogSizePerInstance"
    )
    assert any(p["PolicyType"] == "StepScaling" for p in policies)
    alarms = [
        a["Properties"] for a in resources_of_type(template, "AWS::CloudWatch::Alarm").values()
    ]
    assert any(a.get("MetricName") == "HasBacklogWithoutCapacity" for a in alarms)

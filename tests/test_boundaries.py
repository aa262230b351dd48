"""Boundaries the behaviour tests did not reach, each pinned where a wrong comparison
(``<`` for ``<=``, a sum for a maximum, the largest group for the slowest) would show."""

from __future__ import annotations

import pytest

from cdk_llm_serving import ConfigurationError, InferenceComponentEndpoint, InstancePool
from cdk_llm_serving.core.fleet_utilization import (
    PoolCapacity,
    fleet_utilization_queries,
    weighted_backlog_queries,
)
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
from cdk_llm_serving.hyperpod.node_readiness import group_budget, wait_budget
from cdk_llm_serving.planning import PlanningError, plan
from cdk_llm_serving.planning.objective import Objective
from tests.support.builders import new_stack, pool_endpoint
from tests.support.hyperpod import deepseek_service, small_cluster

MOE = ("reference-2.4t-a95b", "nvfp4", "ml.p6-b200.48xlarge")


def test_a_plan_needing_exactly_the_node_limit_is_accepted():
    """The reference MoE needs 2 nodes: max_nodes=2 plans it, max_nodes=1 refuses it."""
    assert plan(*MOE, objective=Objective.MIN_GPUS, max_nodes=2).nodes == 2
    with pytest.raises(PlanningError, match="Would fit: 2 x ml.p6-b200.48xlarge"):
        plan(*MOE, objective=Objective.MIN_GPUS, max_nodes=1)


def test_data_parallel_over_the_nodes_of_one_replica():
    """2 nodes of 8 GPUs at tensor 8: data parallel 2, one engine per node, never fewer data
    parallel ranks than nodes (a rank cannot span nodes at tensor 8 on 8-GPU nodes)."""
    result = plan(*MOE, objective=Objective.MIN_GPUS)
    assert (result.nodes, result.tensor_parallel, result.data_parallel) == (2, 8, 2)
    assert result.data_parallel * result.tensor_parallel == result.nodes * 8


def _gpu(name: str, count: int, checks: tuple[str, ...]) -> HyperPodInstanceGroup:
    return HyperPodInstanceGroup.gpu(name, "ml.p5en.48xlarge", count, deep_health_checks=checks)


def test_the_node_wait_budget_is_the_slowest_group_not_the_largest():
    """Groups provision in parallel: the budget is the slowest group's (a small group with deep
    health checks), neither the sum nor the largest group's."""
    large = _gpu("large", 10, ())
    checked = _gpu("checked", 1, ("InstanceStress",))
    assert group_budget(large).to_minutes() == 30 + 10
    assert group_budget(checked).to_minutes() == 30 + 1 + 60
    assert wait_budget([large, checked]).to_minutes() == 91
    assert wait_budget([checked, large]).to_minutes() == 91  # order does not matter
    assert wait_budget([]).to_minutes() == 30


# -- SageMaker: managed instance counts, the scaling expression, its statistics ------------------


@pytest.mark.parametrize(
    ("counts", "accepted"),
    [((0, 0), False), ((0, 1), True), ((1, 1), True), ((2, 1), False), ((-1, 2), False)],
)
def test_managed_instance_count_needs_room_for_one_instance(counts, accepted):
    """(0, 0) would be a managed endpoint that can never host a copy; (0, 1) scales from zero."""
    stack = new_stack()
    build = lambda: InferenceComponentEndpoint(  # noqa: E731
        stack, "Endpoint", pools=[InstancePool("ml.g6e.12xlarge")], managed_instance_count=counts
    )
    if accepted:
        build()
        return
    with pytest.raises(ConfigurationError) as caught:
        build()
    assert [p.property for p in caught.value.problems] == ["managed_instance_count"]


@pytest.mark.parametrize("queries", [fleet_utilization_queries, weighted_backlog_queries])
def test_an_empty_fleet_is_refused_not_rendered_as_empty_sums(queries):
    """Before: ``IF(()>0,()/())`` for the real-time policy and an IndexError for the async one."""
    with pytest.raises(ConfigurationError, match="needs at least one pool"):
        queries("chat", "AllTraffic", [])
    with pytest.raises(ConfigurationError, match=r"pools\[1\].max_concurrency = 0"):
        queries("chat", "AllTraffic", [PoolCapacity("ml.g6e.2xlarge", 4), PoolCapacity("x", 0)])


def test_each_scaling_query_fetches_the_statistic_its_arithmetic_needs():
    """Load is summed over every instance's samples and divided by capacity counted in samples
    (SampleCount); the async backlog per instance is AWS's Average and each pool's instances the
    SampleCount of a host metric. A Sum of samples or an Average of load breaks the ratio."""
    pools = [PoolCapacity("ml.g6e.12xlarge", 16), PoolCapacity("ml.g6e.2xlarge", 4)]
    realtime = {
        q.id: (q.metric_name, q.statistic)
        for q in fleet_utilization_queries("chat", "AllTraffic", pools)
        if q.metric_name
    }
    assert realtime == {
        "load1": ("ConcurrentRequestsPerModel", "Sum"),
        "samples1": ("ConcurrentRequestsPerModel", "SampleCount"),
        "load2": ("ConcurrentRequestsPerModel", "Sum"),
        "samples2": ("ConcurrentRequestsPerModel", "SampleCount"),
    }
    backlog = {
        q.id: (q.namespace, q.metric_name, q.statistic)
        for q in weighted_backlog_queries("chat", "AllTraffic", pools)
        if q.metric_name
    }
    assert backlog == {
        "backlog": ("AWS/SageMaker", "ApproximateBacklogSizePerInstance", "Average"),
        "hosts1": ("/aws/sagemaker/Endpoints", "CPUUtilization", "SampleCount"),
        "hosts2": ("/aws/sagemaker/Endpoints", "CPUUtilization", "SampleCount"),
    }


# -- Construct arguments: a bool is no int -------------------------------------------------------


def test_a_bool_where_an_int_is_declared_is_refused():
    """``True`` is an ``int`` to Python (``isinstance(True, int)``): ``replicas=True`` would
    render ``replicas: 1``. Refused as the type mistake it is."""
    stack = new_stack()
    cluster, addons, store = small_cluster(stack)
    with pytest.raises(ConfigurationError) as caught:
        deepseek_service(stack, cluster, addons, store, replicas=True)
    assert [p.property for p in caught.value.problems] == ["replicas"]
    with pytest.raises(ConfigurationError) as caught:
        pool_endpoint(initial_instance_count=True)
    assert [p.property for p in caught.value.problems] == ["initial_instance_count"]

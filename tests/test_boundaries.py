"""Issue 31: boundaries the behaviour tests did not reach, each pinned where a wrong comparison
(``<`` for ``<=``, a sum for a maximum, the largest group for the slowest) would show."""

from __future__ import annotations

import pytest

from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
from cdk_llm_serving.hyperpod.node_readiness import group_budget, wait_budget
from cdk_llm_serving.planning import PlanningError, plan
from cdk_llm_serving.planning.objective import Objective

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

"""Reference-app context keys that reach a construct prop (beyond the variants' snapshots)."""

from __future__ import annotations

import pytest

from cdk_llm_serving.errors import ConfigurationError
from stacks import add_reference_stacks
from tests.support.app import new_app


def _node_wait_deadlines(template: dict) -> list[int]:
    return [
        int(resource["Properties"]["DeadlineSeconds"])
        for resource in template["Resources"].values()
        if resource["Type"] == "Custom::HyperPodNodesReady"
    ]


def test_nodes_ready_minutes_sets_the_node_wait_budget(reference_templates):
    app = new_app(**{"llm-serving:hyperpod:nodes-ready-minutes": "150"})
    add_reference_stacks(app)
    template = app.synth().get_stack_by_name("ReferenceMoeHyperPod").template
    default = _node_wait_deadlines(reference_templates["ReferenceMoeHyperPod"])
    chosen = _node_wait_deadlines(template)
    assert sum(chosen) != sum(default)
    # The stages split the budget (each custom resource answers within CloudFormation's hour).
    assert 150 * 60 - 60 * len(chosen) <= sum(chosen) <= 150 * 60


@pytest.mark.parametrize("value", ["0", "ninety", "-5", "1.5"])
def test_nodes_ready_minutes_must_be_whole_minutes(value):
    app = new_app(**{"llm-serving:hyperpod:nodes-ready-minutes": value})
    with pytest.raises(ConfigurationError, match="nodes-ready-minutes"):
        add_reference_stacks(app)

"""Placement: the inference operator's controller and the endpoint's workers land on the nodes.

The reference stack's opt-in variant (``llm-serving:hyperpod:inference-operator``), with every
chart rendered by the real ``helm`` and every workload placed on the HyperPod node model
(``tests/support/scheduling.py``); then the pods the operator creates, which no manifest of
ours holds: its controller (``HyperPodInferenceOperator.controller_pod_template``) and the
endpoint's worker pods at the autoscaling maximum (``worker_pod_template``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.app import SHARED
from tests.support.template_helpers import manifest_objects

scheduling = pytest.importorskip(
    "tests.support.scheduling", reason="the HyperPod node model (tests/support/scheduling.py)"
)
helm_support = pytest.importorskip("tests.support.helm", reason="helm from the kubectl layer")

CHARTS = SHARED / "charts"

pytestmark = pytest.mark.skipif(
    not CHARTS.is_dir(),
    reason=f"{CHARTS} (unpacked upstream Helm charts) sits beside the checkout only in CI and dev sessions",
)


@pytest.fixture(scope="module")
def placed(inference_operator_app, helm_binary) -> dict[str, Any]:
    stacks, assembly = inference_operator_app  # the variant, synthesized once per session
    template = assembly.get_stack_by_name("ReferenceMoeHyperPod").template
    charts = helm_support.render_template_charts(
        template, helm_binary, CHARTS, Path(assembly.directory)
    )
    objects = [obj for chart in charts.values() for obj in chart] + manifest_objects(template, "")
    cluster = scheduling.Cluster(scheduling.hyperpod_nodes(template))
    placement = cluster.place(scheduling.workloads(objects, helm_support.namespace_of))
    endpoint = stacks[1].single_node
    operator = scheduling.Pod(
        "operator", "operator-0", endpoint.operator.controller_pod_template()["spec"]
    )
    placement_of = {"operator": cluster.place_pod(operator, placement)}
    worker = endpoint.worker_pod_template()
    placement_of["workers"] = [
        cluster.place_pod(scheduling.Pod("worker", f"worker-{i}", worker["spec"]), placement)
        for i in range(endpoint.replicas_ceiling())
    ]
    return {"cluster": cluster, "placement": placement, "pods": placement_of, "worker": worker}


def test_everything_places(placed):
    assert placed["placement"].unplaced == {}


def test_operator_lands_on_a_system_node(placed):
    node = placed["cluster"].node(placed["pods"]["operator"])
    assert node.instance_type == "ml.m5.4xlarge"


def test_workers_land_one_per_node_on_the_listed_groups(placed):
    cluster, names = placed["cluster"], placed["pods"]["workers"]
    assert None not in names and len(set(names)) == len(names)
    assert {cluster.node(n).instance_type for n in names} == {"ml.p5en.48xlarge", "ml.p5.48xlarge"}


def test_a_worker_without_the_gpu_toleration_would_not_place(placed):
    """The check can fail: EKS's ExtendedResourceToleration is what lets the workers land."""
    spec = {**placed["worker"]["spec"], "tolerations": []}
    pod = scheduling.Pod("worker", "untolerated", spec)
    assert placed["cluster"].place_pod(pod, scheduling.Placement()) is None

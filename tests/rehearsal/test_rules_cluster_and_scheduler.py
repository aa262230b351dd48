"""Nodes from instance groups and the scheduler's filters, each rule both ways."""

from __future__ import annotations

import pytest

from rehearsal import cluster
from rehearsal.controllers import scheduler
from rehearsal.scheduling import HEALTH
from tests.rehearsal.builders import GPU_TAINT, node

GROUP = {
    "InstanceGroupName": "gpu",
    "InstanceType": "ml.p6-b200.48xlarge",
    "InstanceCount": 2,
    "KubernetesConfig": {
        "Labels": {"role": "gpu"},
        "Taints": [{"Key": "nvidia.com/gpu", "Value": "present", "Effect": "NoSchedule"}],
    },
    "OnStartDeepHealthChecks": ["InstanceStress"],
    "OverrideVpcConfig": {"Subnets": ["subnet-a"]},
}


def test_threads_per_core_one_halves_the_cpus_the_kubelet_offers():
    one = cluster.allocatable("ml.p6-b200.48xlarge", 1)["cpu"]
    two = cluster.allocatable("ml.p6-b200.48xlarge", 2)["cpu"]
    # amazon-eks-ami: 60 + 10 + 2 x 5 + 2.5 per further core, in millicores.
    assert one == pytest.approx(96 - (60 + 10 + 10 + 92 * 2.5) / 1000)
    assert two == pytest.approx(192 - (60 + 10 + 10 + 188 * 2.5) / 1000)


def test_nodes_carry_the_group_and_health_check_taints_until_the_checks_pass():
    groups = cluster.instance_groups(
        {"InstanceGroups": [{**GROUP, "ThreadsPerCore": 1}], "VpcConfig": {"Subnets": ["subnet-x"]}}
    )
    nodes, subnets = cluster.nodes(groups)
    assert [n.name for n in nodes] == ["gpu-0", "gpu-1"] and subnets == {
        "gpu-0": "subnet-a",
        "gpu-1": "subnet-a",
    }
    assert {t["key"] for t in nodes[0].taints} == {"nvidia.com/gpu", HEALTH}
    assert nodes[0].labels[HEALTH] == "Unschedulable" and nodes[0].capacity["cpu"] < 96
    cluster.health_checks_passed(nodes[0])
    assert {t["key"] for t in nodes[0].taints} == {"nvidia.com/gpu"} and nodes[0].labels[
        HEALTH
    ] == "Schedulable"


def test_a_group_without_deep_health_checks_joins_schedulable():
    groups = cluster.instance_groups({"InstanceGroups": [{**GROUP, "OnStartDeepHealthChecks": []}]})
    (first, _), _ = cluster.nodes(groups)
    assert HEALTH not in {t["key"] for t in first.taints}


def test_insufficient_cpu_is_named_with_the_figures():
    rule, message, closest = scheduler.explain(
        {"containers": [{"resources": {"requests": {"cpu": "172"}}}]}, [node("gpu-0", cpu=95.7)]
    )
    assert rule == "scheduler.insufficient-cpu" and "172" in message and "95.7" in message
    assert closest is not None and closest.name == "gpu-0"


def test_a_pod_that_fits_is_bound():
    spec = {"containers": [{"resources": {"requests": {"cpu": "90"}}}]}
    assert scheduler.fits(spec, node("gpu-0", cpu=95.7))


def test_an_untolerated_taint_is_named_and_a_toleration_admits():
    spec = {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}
    rule, message, _ = scheduler.explain(spec, [node("gpu-0", taints=[GPU_TAINT])])
    assert rule == "scheduler.untolerated-taint" and "nvidia.com/gpu" in message
    tolerating = {
        **spec,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    assert scheduler.fits(tolerating, node("gpu-0", taints=[GPU_TAINT]))


def test_a_node_selector_that_matches_no_node():
    rule, _, _ = scheduler.explain(
        {"nodeSelector": {"role": "gpu"}, "containers": []}, [node("system-0", role="system")]
    )
    assert rule == "scheduler.no-matching-node"
    assert scheduler.fits(
        {"nodeSelector": {"role": "gpu"}, "containers": []}, node("gpu-0", role="gpu")
    )

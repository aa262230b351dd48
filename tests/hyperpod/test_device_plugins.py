"""Device-plugin values, rendered by the real helm from the pinned published charts, land where
they should: on every GPU node (EFA only where EFA exists), through every taint the groups set."""

from __future__ import annotations

import pytest

from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.device_plugins import (
    efa_instance_types,
    efa_values,
    gpu_instance_types,
    nvidia_values,
)
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup, KubernetesTaint
from cdk_llm_serving.planning.catalog import default_catalog
from tests.support.app import SHARED
from tests.support.builders import new_stack, template_of
from tests.support.helm import helm_template, namespace_of
from tests.support.hyperpod import published_chart
from tests.support.scheduling import EFA, GPU, Cluster, hyperpod_nodes, workloads
from tests.support.template_helpers import resources_of_type

DEDICATED = KubernetesTaint("example.com/dedicated", "NoSchedule", "inference")
GROUPS = [
    HyperPodInstanceGroup.system(),
    HyperPodInstanceGroup.gpu("b200", "ml.p6-b200.48xlarge", 2),
    # a group with its own taint (replacing the default GPU taint) and no EFA devices
    HyperPodInstanceGroup.gpu("l40s", "ml.g6e.4xlarge", 1, taints=(DEDICATED,)),
]


def _template(groups) -> dict:
    """The ``InstanceGroups`` a HyperPodEksCluster renders for ``groups`` (labels, taints)."""
    rendered = []
    for group in groups:
        rendered.append(
            {
                "InstanceGroupName": group.name,
                "InstanceType": group.instance_type,
                "InstanceCount": group.count,
                "KubernetesConfig": {
                    "Labels": group.effective_labels,
                    "Taints": [
                        {"Key": t.key, "Value": t.value, "Effect": t.effect}
                        for t in group.effective_taints
                    ],
                },
            }
        )
    cluster = {"Type": "AWS::SageMaker::Cluster", "Properties": {"InstanceGroups": rendered}}
    return {"Resources": {"Cluster": cluster}}


def test_gpu_and_efa_types_come_from_the_groups_and_the_catalog():
    assert gpu_instance_types(GROUPS) == ["ml.g6e.4xlarge", "ml.p6-b200.48xlarge"]
    assert efa_instance_types(GROUPS, default_catalog()) == ["ml.p6-b200.48xlarge"]


def test_every_group_taint_is_tolerated_once():
    tolerations = nvidia_values(GROUPS)["tolerations"]
    keys = [t["key"] for t in tolerations]
    assert keys == [
        "CriticalAddonsOnly",
        "nvidia.com/gpu",
        "sagemaker.amazonaws.com/node-health-status",
        "example.com/dedicated",
    ]


@pytest.fixture(scope="module")
def helm(helm_binary):
    if not (SHARED / "charts").is_dir():
        pytest.skip(f"{SHARED / 'charts'} (unpacked upstream Helm charts) is absent")
    return helm_binary


@pytest.mark.parametrize("health_checking", [False, True])
def test_published_plugins_land_on_every_gpu_node_through_its_taints(
    helm, tmp_path, health_checking
):
    objects = []
    for name, values in (
        ("nvidia-device-plugin", nvidia_values(GROUPS)),
        ("aws-efa-k8s-device-plugin", efa_values(GROUPS, default_catalog())),
    ):
        chart = published_chart(SHARED, name)
        objects += helm_template(helm, chart, name, "kube-system", values)
    cluster = Cluster(hyperpod_nodes(_template(GROUPS), health_checking=health_checking))
    cluster.place(workloads(objects, namespace_of))
    capacity = {
        node.name: (node.capacity.get(GPU), node.capacity.get(EFA)) for node in cluster.nodes
    }
    assert capacity == {
        "system-0": (None, None),
        "system-1": (None, None),
        "b200-0": (8.0, 8.0),
        "b200-1": (8.0, 8.0),
        "l40s-0": (1.0, None),
    }


def test_without_efa_nodes_no_efa_plugin_and_no_empty_instance_list():
    """``In`` with no values is invalid in Kubernetes; a cluster without EFA needs no EFA plugin."""
    groups = [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu("l40s", "ml.g6e.4xlarge", 1),
    ]
    assert "supportedInstanceLabels" not in efa_values(groups, default_catalog())
    stack = new_stack("NoEfa")
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=groups
    )
    HyperPodServingAddons(stack, "Addons", cluster=cluster)
    releases = {
        resource["Properties"]["Release"]
        for resource in resources_of_type(
            template_of(stack), "Custom::AWSCDK-EKS-HelmChart"
        ).values()
    }
    assert "nvidia-device-plugin" in releases and "aws-efa-k8s-device-plugin" not in releases


def test_published_plugins_land_through_a_no_execute_group_taint(helm):
    """Boundary: a ``NoExecute`` taint evicts whatever does not tolerate it with that
    effect; a toleration written as ``NoSchedule`` would leave the node without devices."""
    evict = KubernetesTaint("example.com/evict", "NoExecute", "llm")
    groups = [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu("h100", "ml.p5.48xlarge", 1, taints=(evict,)),
    ]
    assert {"key": evict.key, "operator": "Exists", "effect": "NoExecute"} in nvidia_values(groups)[
        "tolerations"
    ]
    objects = []
    for name, values in (
        ("nvidia-device-plugin", nvidia_values(groups)),
        ("aws-efa-k8s-device-plugin", efa_values(groups, default_catalog())),
    ):
        objects += helm_template(helm, published_chart(SHARED, name), name, "kube-system", values)
    cluster = Cluster(hyperpod_nodes(_template(groups)))
    cluster.place(workloads(objects, namespace_of))
    (node,) = [n for n in cluster.nodes if n.name == "h100-0"]
    assert (node.capacity.get(GPU), node.capacity.get(EFA)) == (8.0, 32.0)

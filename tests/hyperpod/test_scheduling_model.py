"""The placement test's model refuses what Kubernetes refuses (so a passing placement means something)."""

from __future__ import annotations

import pytest

from tests.support.scheduling import (
    GPU,
    Cluster,
    Placement,
    Pod,
    Workload,
    hyperpod_nodes,
    quantity,
    tolerates,
)

TEMPLATE = {
    "Resources": {
        "Cluster": {
            "Type": "AWS::SageMaker::Cluster",
            "Properties": {
                "InstanceGroups": [
                    {
                        "InstanceGroupName": "gpu",
                        "InstanceType": "ml.p5en.48xlarge",
                        "InstanceCount": 1,
                        "KubernetesConfig": {
                            "Labels": {"cdk-llm-serving/role": "gpu"},
                            "Taints": [
                                {
                                    "Key": "nvidia.com/gpu",
                                    "Value": "present",
                                    "Effect": "NoSchedule",
                                }
                            ],
                        },
                    }
                ]
            },
        }
    }
}
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def _place(spec: dict) -> Placement:
    cluster = Cluster(hyperpod_nodes(TEMPLATE))
    pod = Pod(owner="Pod/default/p", name="p", spec=spec)
    return cluster.place([Workload("Pod", "default", "p", (pod,))])


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"containers": [{}]}, "untolerated taint nvidia.com/gpu=present:NoSchedule"),
        ({"tolerations": TOLERATE_GPU, "nodeSelector": {"x": "y"}}, "nodeSelector x=y"),
        (
            {
                "tolerations": TOLERATE_GPU,
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "node.kubernetes.io/instance-type",
                                            "operator": "In",
                                            "values": ["p5en.48xlarge"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
            },
            "required node affinity",
        ),
        (
            {
                "tolerations": TOLERATE_GPU,
                "containers": [{"resources": {"limits": {GPU: "8"}}}],
            },
            "insufficient nvidia.com/gpu",  # no device plugin landed: nothing allocatable
        ),
        (
            {
                "tolerations": TOLERATE_GPU,
                "containers": [{"resources": {"requests": {"cpu": "200"}}}],
            },
            "insufficient cpu",
        ),
    ],
)
def test_what_kubernetes_refuses_is_refused(spec, reason):
    placement = _place(spec)
    assert reason in placement.unplaced["p"]


def test_a_tolerating_pod_places_and_quantities_parse():
    assert _place({"tolerations": TOLERATE_GPU, "containers": [{}]}).placed == {
        "Pod/default/p": ["gpu-0"]
    }
    assert quantity("500m") == 0.5 and quantity("20Mi") == 20 * 2**20 and quantity("2") == 2
    taint = {"key": "a", "value": "b", "effect": "NoExecute"}
    assert tolerates([{"operator": "Exists"}], taint)
    assert not tolerates([{"key": "a", "operator": "Equal", "value": "c"}], taint)

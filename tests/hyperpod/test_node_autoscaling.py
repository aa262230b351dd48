"""GPU nodes follow replicas: HyperPod's managed Karpenter, drain-safe scale-in.

Checked against the real artifacts: cfn-lint's schema of ``AWS::SageMaker::Cluster``,
Karpenter's ``NodePool`` CRD (tests/data/crds, v1.0.0), Kubernetes' own Pod schema for the
preStop hook, and AWS's documented HyperpodNodeClass shape (tests/data/crds/README.md).
"""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
from aws_cdk import Duration, Stack

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod import HyperPodEksCluster, HyperPodInstanceGroup, NodeAutoScaling
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.multi_node_manifests import (
    NLB_DEREGISTRATION_DELAY_SECONDS,
    NLB_HEALTH_CHECK_INTERVAL_SECONDS,
)
from cdk_llm_serving.hyperpod.observability import VllmObservability
from cdk_llm_serving.hyperpod.replica_autoscaling import VllmReplicaAutoScaling
from tests.support import yaml_files
from tests.support.builders import new_stack
from tests.support.cfn_schemas import resource_schema
from tests.support.hyperpod import deepseek_service, model_store
from tests.support.kubernetes_schemas import concretize, undeclared_fields, validate_core
from tests.support.linting import lint_template
from tests.support.template_helpers import (
    actions_of,
    manifest_objects,
    only_resource,
    resources_of_type,
)

CRDS = Path(__file__).resolve().parents[1] / "data" / "crds"


def _groups(max_count: int | None = 4, count: int = 0) -> list[HyperPodInstanceGroup]:
    return [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu("gpu", "ml.p5en.48xlarge", count, max_count=max_count),
    ]


def _autoscaled(stack: Stack, max_count: int = 4) -> HyperPodEksCluster:
    return HyperPodEksCluster(
        stack,
        "HyperPod",
        instance_groups=_groups(max_count),
        kubernetes_version="1.35",
        node_auto_scaling=NodeAutoScaling(),
    )


@pytest.fixture(scope="module")
def scaled() -> tuple[Stack, VllmReplicaAutoScaling, dict]:
    stack = new_stack("NodeAutoScaling")
    cluster = _autoscaled(stack)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    service = deepseek_service(stack, cluster, addons, model_store(stack, cluster))
    observability = VllmObservability(stack, "Obs", service=service)
    scaling = VllmReplicaAutoScaling(
        stack, "Scale", service=service, observability=observability, max_replicas=4
    )
    from aws_cdk import App

    app = stack.node.root
    assert isinstance(app, App)
    return stack, scaling, app.synth().get_stack_by_name(stack.stack_name).template


def _nodepool_schema() -> dict:
    crd = yaml_files.load_file(CRDS / "karpenter.sh_nodepools.yaml")
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return dict(version["schema"]["openAPIV3Schema"])


def test_cluster_autoscaling_is_karpenter_with_its_role(scaled):
    _, _, template = scaled
    _, cluster = only_resource(template, "AWS::SageMaker::Cluster")
    props = cluster["Properties"]
    assert props["AutoScaling"] == {"Mode": "Enable", "AutoScalerType": "Karpenter"}
    # The schema cfn-lint ships: AutoScaling's fields and enums are CloudFormation's.
    schema = resource_schema("AWS::SageMaker::Cluster")
    jsonschema.validate(props["AutoScaling"], schema["definitions"]["ClusterAutoScalingConfig"])
    role_id = props["ClusterRole"]["Fn::GetAtt"][0]
    role = template["Resources"][role_id]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "hyperpod.sagemaker.amazonaws.com"}
    # Least privilege: one customer managed policy with the two node actions, on this
    # account's and Region's clusters.
    policies = [
        p
        for p in resources_of_type(template, "AWS::IAM::ManagedPolicy").values()
        if {"Ref": role_id} in p["Properties"].get("Roles", [])
    ]
    (policy,) = policies
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert sorted(actions_of(statement)) == [
        "sagemaker:BatchAddClusterNodes",
        "sagemaker:BatchDeleteClusterNodes",
    ]
    assert statement["Resource"] == {
        "Fn::Join": ["", ["arn:aws:sagemaker:us-east-1:", {"Ref": "AWS::AccountId"}, ":cluster/*"]]
    }


def test_autoscaled_template_passes_cfn_lint(scaled):
    matches = lint_template(scaled[2])
    assert not matches, "\n".join(map(str, matches))


def test_the_group_starts_empty_without_deep_health_checks(scaled):
    _, cluster = only_resource(scaled[2], "AWS::SageMaker::Cluster")
    (gpu,) = [g for g in cluster["Properties"]["InstanceGroups"] if g["InstanceGroupName"] == "gpu"]
    assert gpu["InstanceCount"] == 0
    assert "OnStartDeepHealthChecks" not in gpu  # HyperPod's Karpenter excludes them


def test_node_pool_is_valid_karpenter_v1_with_the_group_s_labels_taints_and_maximum(scaled):
    objects = manifest_objects(scaled[2], "KarpenterNodePools")
    (node_class,) = [o for o in objects if o["kind"] == "HyperpodNodeClass"]
    (pool,) = [o for o in objects if o["kind"] == "NodePool"]
    assert node_class["apiVersion"] == "karpenter.sagemaker.amazonaws.com/v1"
    assert node_class["spec"] == {"instanceGroups": ["gpu"]}
    schema = _nodepool_schema()
    jsonschema.validate(concretize(pool), schema)
    assert undeclared_fields(pool, schema) == []
    spec = pool["spec"]
    assert spec["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.sagemaker.amazonaws.com",
        "kind": "HyperpodNodeClass",
        "name": "gpu",
    }
    # The serving pods' node selector and toleration are what the pool's nodes carry.
    assert spec["template"]["metadata"]["labels"]["cdk-llm-serving/group"] == "gpu"
    assert spec["template"]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    assert spec["limits"] == {"nvidia.com/gpu": str(4 * 8)}  # max_count whole p5en nodes
    # Karpenter removes only empty nodes: it never evicts a serving pod to pack nodes.
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"


def test_serving_pods_match_the_node_pool(scaled):
    """What Karpenter simulates before it launches a node: every nodeSelector label is one
    the pool's nodes carry (labels or single-value requirements), and the pool's taints
    are tolerated."""
    _, scaling, template = scaled
    objects = manifest_objects(template, "KarpenterNodePools")
    (pool,) = [o for o in objects if o["kind"] == "NodePool"]
    node_labels = dict(pool["spec"]["template"]["metadata"]["labels"])
    for requirement in pool["spec"]["template"]["spec"]["requirements"]:
        if requirement["operator"] == "In" and len(requirement["values"]) == 1:
            node_labels[requirement["key"]] = requirement["values"][0]
    (lws,) = manifest_objects(template, "ServingLeaderWorkerSet")
    pod = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    for key, value in pod["nodeSelector"].items():
        assert node_labels.get(key) == value, key
    for term in pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]:
        for expression in term["matchExpressions"]:
            assert node_labels.get(expression["key"]) in expression["values"]
    tolerated = {t["key"] for t in pod["tolerations"]}
    assert {t["key"] for t in pool["spec"]["template"]["spec"]["taints"]} <= tolerated


def test_max_replicas_may_exceed_today_s_nodes_up_to_max_count(scaled):
    _, scaling, template = scaled
    assert scaling.max_replicas == 4  # the group has 0 nodes today, 4 at most
    stack = new_stack("NodeAutoscalingTooMany")
    cluster = _autoscaled(stack, max_count=2)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    service = deepseek_service(stack, cluster, addons, model_store(stack, cluster))
    observability = VllmObservability(stack, "Obs", service=service)
    with pytest.raises(ConfigurationError) as caught:
        VllmReplicaAutoScaling(
            stack, "Scale", service=service, observability=observability, max_replicas=3
        )
    assert "at its max_count" in str(caught.value)


def test_scale_in_drains_in_order(scaled):
    """Deletion -> target deregistered -> in-flight requests end -> SIGTERM -> SIGKILL."""
    _, scaling, template = scaled
    (lws,) = manifest_objects(template, "ServingLeaderWorkerSet")
    templates = lws["spec"]["leaderWorkerTemplate"]
    pods = [t["spec"] for t in (templates.get("leaderTemplate"), templates["workerTemplate"]) if t]
    longest = scaling.longest_request.to_seconds()
    for pod in pods:
        (container,) = pod["containers"]
        pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        grace = pod["terminationGracePeriodSeconds"]
        deregistered = NLB_DEREGISTRATION_DELAY_SECONDS + NLB_HEALTH_CHECK_INTERVAL_SECONDS
        # A request accepted just before deletion ends by `longest`; the NLB has drained the
        # target by `deregistered`; the container gets SIGTERM at `pre_stop`, SIGKILL at `grace`.
        assert longest <= NLB_DEREGISTRATION_DELAY_SECONDS < deregistered <= pre_stop < grace
        # Kubernetes' own Pod schema takes the native sleep action.
        validate_core({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod})


def test_without_autoscaling_nothing_moves():
    stack = new_stack("NoNodeAutoscaling")
    cluster = HyperPodEksCluster(
        stack, "HyperPod", instance_groups=_groups(None, count=2), kubernetes_version="1.35"
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    deepseek_service(stack, cluster, addons, model_store(stack, cluster))
    template = stack.node.root.synth().get_stack_by_name(stack.stack_name).template
    _, hyperpod = only_resource(template, "AWS::SageMaker::Cluster")
    assert "AutoScaling" not in hyperpod["Properties"]
    assert "ClusterRole" not in hyperpod["Properties"]
    assert manifest_objects(template, "KarpenterNodePools") == []
    (lws,) = manifest_objects(template, "ServingLeaderWorkerSet")
    (pod,) = [lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]]
    assert pod["terminationGracePeriodSeconds"] == 120
    assert "lifecycle" not in pod["containers"][0]


def test_every_autoscaling_mistake_at_once():
    stack = new_stack("NodeAutoscalingMistakes")
    with pytest.raises(ConfigurationError) as caught:
        HyperPodEksCluster(
            stack,
            "HyperPod",
            instance_groups=[
                HyperPodInstanceGroup.system(),
                HyperPodInstanceGroup.gpu(
                    "gpu",
                    "ml.p5en.48xlarge",
                    3,
                    max_count=2,
                    deep_health_checks=("InstanceStress",),
                    training_plan_arn="arn:aws:sagemaker:us-east-1:123456789012:training-plan/p",
                ),
            ],
            kubernetes_version="1.35",
        )
    properties = sorted(p.property for p in caught.value.problems)
    assert properties == [
        "instance_groups[1].deep_health_checks",
        "instance_groups[1].max_count",
        "instance_groups[1].training_plan_arn",
        "node_auto_scaling",
    ]


def test_cluster_autoscaling_needs_a_group_that_may_grow():
    stack = new_stack("NodeAutoscalingNoGroup")
    with pytest.raises(ConfigurationError) as caught:
        HyperPodEksCluster(
            stack,
            "HyperPod",
            instance_groups=_groups(None, count=2),
            kubernetes_version="1.35",
            node_auto_scaling=NodeAutoScaling(),
        )
    assert [p.property for p in caught.value.problems] == ["node_auto_scaling"]


def test_a_request_longer_than_the_deregistration_delay_is_refused():
    stack = new_stack("NodeAutoscalingLongRequest")
    cluster = _autoscaled(stack)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    service = deepseek_service(stack, cluster, addons, model_store(stack, cluster))
    observability = VllmObservability(stack, "Obs", service=service)
    with pytest.raises(ConfigurationError) as caught:
        VllmReplicaAutoScaling(
            stack,
            "Scale",
            service=service,
            observability=observability,
            longest_request=Duration.minutes(10),
        )
    assert [p.property for p in caught.value.problems] == ["longest_request"]

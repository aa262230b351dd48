"""One row per kind of input mistake, each stopping synth with one
``ConfigurationError`` naming the property. The rule for each kind lives where the value is
used; the detailed messages are pinned in the tests beside each rule (test_arn_rules,
test_endpoint_validation, test_user_mistakes, test_names, test_boundaries)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk import Duration
from constructs import Construct

from cdk_llm_serving import (
    BlueGreenDeployment,
    CapacitySize,
    ConfigurationError,
    InstancePool,
    RollingDeployment,
    TrafficShift,
)
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup, KubernetesTaint
from cdk_llm_serving.vllm import VllmConfig
from tests.support.builders import int4_copies_on_two_g6e, new_stack, pool_endpoint
from tests.support.hyperpod import deepseek_service, instance_groups, model_store, small_cluster

ACCOUNT = "123456789012"
SYSTEM = HyperPodInstanceGroup.system()
GPU = HyperPodInstanceGroup.gpu("gpu", "ml.p5en.48xlarge", 2)


def _cluster(**props: Any) -> None:
    props = {"instance_groups": [SYSTEM, GPU], "kubernetes_version": "1.33", **props}
    HyperPodEksCluster(new_stack(), "HyperPod", **props)


def _service(**props: Any) -> None:
    stack = new_stack()
    cluster, addons, store = small_cluster(stack)
    deepseek_service(stack, cluster, addons, store, **props)


def _config(**fields: Any) -> VllmConfig:
    return VllmConfig(model="x", max_model_len=32768, **fields)


def _small_store_service() -> None:
    stack = new_stack()
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=instance_groups(4)
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    store = model_store(stack, cluster, storage_capacity_gib=1200)
    deepseek_service(stack, cluster, addons, store, weight_format="bf16", nodes_per_replica=2)


def _copies(max_copies: int = 1, **spec: Any) -> None:
    int4_copies_on_two_g6e(**spec).auto_scale_copies(
        max_copies=max_copies, target_concurrent_requests_per_copy=4
    )


def _two_endpoints(first: str, second: str) -> None:
    stack = new_stack()
    pool_endpoint(stack, endpoint_name=first)
    pool_endpoint(Construct(stack, "Other"), endpoint_name=second)


#: (kind of mistake as the issue names it, what the user writes, the property refused)
KINDS: list[tuple[str, Callable[[], object], str]] = [
    (
        "another region: a capacity reservation",
        lambda: pool_endpoint(
            pools=[InstancePool("ml.p5.48xlarge")],
            capacity_reservation_arn=f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:training-plan/p",
        ),
        "capacity_reservation_arn",
    ),
    (
        "another partition: an admin role",
        lambda: _cluster(admin_role_arns=[f"arn:aws-cn:iam::{ACCOUNT}:role/Admin"]),
        "admin_role_arns[0]",
    ),
    (
        "another service's ARN: an SNS topic as a reservation",
        lambda: pool_endpoint(
            pools=[InstancePool("ml.p5.48xlarge")],
            capacity_reservation_arn=f"arn:aws:sns:us-east-1:{ACCOUNT}:topic",
        ),
        "capacity_reservation_arn",
    ),
    (
        "a canary step outside the service's range",
        lambda: pool_endpoint(
            deployment=BlueGreenDeployment(traffic=TrafficShift.canary(CapacitySize.percent(75)))
        ),
        "deployment.traffic.step",
    ),
    (
        "a rolling batch equal to the whole fleet",
        lambda: pool_endpoint(
            initial_instance_count=3,
            deployment=RollingDeployment(maximum_batch_size=CapacitySize.instances(3)),
        ),
        "deployment.maximum_batch_size",
    ),
    (
        "a bake time that with the termination wait exceeds the update's limit",
        lambda: pool_endpoint(
            deployment=BlueGreenDeployment(
                traffic=TrafficShift.all_at_once(bake=Duration.minutes(45)),
                termination_wait=Duration.minutes(30),
                maximum_execution_timeout=Duration.hours(1),
            )
        ),
        "deployment.maximum_execution_timeout",
    ),
    (
        "a setting the library would drop: a pipeline parallel size",
        lambda: _service(config=_config(pipeline_parallel_size=4)),
        "config.pipeline_parallel_size",
    ),
    (
        "group labels that replace the library's own",
        lambda: _cluster(
            instance_groups=[
                SYSTEM,
                HyperPodInstanceGroup.gpu(
                    "gpu", "ml.p5en.48xlarge", 2, labels={"cdk-llm-serving/group": "other"}
                ),
            ]
        ),
        "instance_groups[1].labels['cdk-llm-serving/group']",
    ),
    (
        "a system group taint the controllers do not tolerate",
        lambda: _cluster(
            instance_groups=[
                HyperPodInstanceGroup.system(taints=(KubernetesTaint("ops", "NoExecute", "x"),)),
                GPU,
            ]
        ),
        "instance_groups[0].taints",
    ),
    ("a file system smaller than the weights", _small_store_service, "weights"),
    ("copy counts above what a pool can place", lambda: _copies(max_copies=9), "max_copies"),
    (
        "memory above what a host can place",
        lambda: _copies(min_memory_mb=600 * 1024),
        "specifications[0].min_memory_mb",
    ),
    (
        "a parallel layout needing more GPUs than the replica has",
        lambda: _service(config=_config(tensor_parallel_size=16), nodes_per_replica=1),
        "config.tensor_parallel_size",
    ),
    (
        "endpoint names that differ only in case",
        lambda: _two_endpoints("Chat", "chat"),
        "endpoint_name",
    ),
    (
        "a metric name in the wrong case",
        lambda: pool_endpoint().metric("modellatency"),
        "metric_name",
    ),
    (
        "a Kubernetes version HyperPod does not offer",
        lambda: _cluster(kubernetes_version="1.29"),
        "kubernetes_version",
    ),
    (
        "an add-on version without its build suffix",
        lambda: _cluster(addon_versions={"vpc-cni": "v1.19.2"}),
        "addon_versions",
    ),
]


@pytest.mark.parametrize(("kind", "mistake", "prop"), KINDS, ids=[k[0] for k in KINDS])
def test_each_kind_of_mistake_is_refused_naming_the_property(kind, mistake, prop):
    with pytest.raises(ConfigurationError) as caught:
        mistake()
    properties = [p.property for p in caught.value.problems]
    assert any(p.startswith(prop) for p in properties), properties

"""The inference operator's model in the rehearsal: the pods it creates for the
InferenceEndpointConfig the library renders, the tiered-storage L2 check, the tier's memory."""

from __future__ import annotations

from pathlib import Path

from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.inference_features import (
    InferenceKvCache,
    InferencePrefillDecode,
    InferenceRouting,
)
from cdk_llm_serving.planning.catalog import default_catalog
from rehearsal.controllers import inference_operator
from rehearsal.scheduling import INSTANCE_TYPE, Node
from rehearsal.world import World
from tests.rehearsal.builders import GPU_TAINT, node, world
from tests.support.builders import new_stack
from tests.support.hyperpod import gpt_oss_120b_endpoint, single_node_groups


def _gpu_node(name: str, instance_type: str) -> Node:
    return Node(
        name=name,
        group=name.rpartition("-")[0],
        instance_type=instance_type,
        labels={"kubernetes.io/hostname": name, INSTANCE_TYPE: instance_type},
        taints=[dict(GPU_TAINT)],
        capacity={
            "cpu": 190.0,
            "memory": 2048 * 2**30,
            "pods": 110.0,
            "nvidia.com/gpu": 8.0,
            "vpc.amazonaws.com/efa": float(default_catalog().get(instance_type).efa_devices or 0),
        },
    )


def _config(**props) -> dict:
    """The endpoint's config; without the KV cache and routing unless given (each test here
    plays one feature, and the world has no cluster tier)."""
    props = {"kv_cache": False, "routing": False, **props}
    stack = new_stack()
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=single_node_groups()
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    return stack.resolve(gpt_oss_120b_endpoint(stack, addons, **props).manifest)


def _world(tmp_path: Path, config: dict) -> World:
    w = world(tmp_path)
    w.crd_kinds.add(inference_operator.KIND)
    w.nodes += [
        _gpu_node("h200-0", "ml.p5en.48xlarge"),
        _gpu_node("h200-1", "ml.p5en.48xlarge"),
        _gpu_node("h100-0", "ml.p5.48xlarge"),
        node("system-0"),
    ]
    w.put(config, "GptOss", "inference")
    return w


def test_prefill_and_decode_pods_land_on_their_roles_types(tmp_path):
    config = _config(
        prefill_decode=InferencePrefillDecode(
            prefill_instance_type="ml.p5.48xlarge", decode_instance_type="ml.p5en.48xlarge"
        ),
        routing=InferenceRouting(),
    )
    w = _world(tmp_path, config)
    w.reconcile()
    placed = {key[2]: pod.node for key, pod in w.pods.items()}
    name = config["metadata"]["name"]
    assert placed[f"{name}-prefill-0"] == "h100-0"
    assert placed[f"{name}-decode-0"].startswith("h200-")
    assert placed[f"{name}-router"] == "system-0"  # tolerates no GPU taint
    assert all(pod.problem is None for pod in w.pods.values())


def test_colocated_workers_follow_the_listed_types(tmp_path):
    w = _world(tmp_path, _config(replicas=3))
    w.reconcile()
    nodes = sorted(str(pod.node) for pod in w.pods.values())
    assert nodes == ["h100-0", "h200-0", "h200-1"]  # one 8-GPU pod per node


def test_a_tiered_storage_l2_without_the_cluster_tier_is_blocking(tmp_path):
    w = _world(tmp_path, _config(kv_cache=InferenceKvCache()))
    w.reconcile()
    assert [f.rule for f in w.findings] == ["operator.tiered-storage-off"]
    fixed = _world(tmp_path / "fixed", _config(kv_cache=InferenceKvCache()))
    inference_operator.reserve_tiered_storage(
        fixed,
        "Cluster",
        {"TieredStorageConfig": {"Mode": "Enable", "InstanceMemoryAllocationPercentage": 5}},
    )
    fixed.reconcile()
    assert fixed.findings == []


def test_the_tier_takes_its_share_of_every_nodes_memory(tmp_path):
    w = _world(tmp_path, _config())
    inference_operator.reserve_tiered_storage(
        w,
        "Cluster",
        {"TieredStorageConfig": {"Mode": "Enable", "InstanceMemoryAllocationPercentage": 20}},
    )
    assert w.facts[inference_operator.TIER_GIB]["h200-0"] == 2048 * 0.2
    assert w.node("h200-0").capacity["memory"] == 2048 * 0.8 * 2**30
    # A pod sized to 90 % of the node (the multi-node service's rule) no longer fits.
    from rehearsal.controllers.scheduler import fits

    pod = {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "vllm", "resources": {"requests": {"memory": "1843Gi"}}}],
    }
    assert not fits(pod, w.node("h200-0"))
    assert fits(pod, w.node("h100-0")) is False  # every node: the tier is cluster-wide


DPD_IMAGE = "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1"


def _pd_config(**props) -> dict:
    return _config(
        prefill_decode=InferencePrefillDecode(
            prefill_instance_type="ml.p5.48xlarge", decode_instance_type="ml.p5en.48xlarge"
        ),
        **props,
    )


def test_the_kv_transfer_uses_each_roles_efa_devices(tmp_path):
    w = _world(tmp_path, _pd_config(image=DPD_IMAGE))
    w.reconcile()
    assert w.findings == []
    name = _pd_config(image=DPD_IMAGE)["metadata"]["name"]
    # p5: 32 EFA devices, p5en: 16 (the catalog), each role's pod takes its node's.
    assert w.facts[inference_operator.KV_TRANSFER] == {
        f"inference/{name}": {"prefill": 32, "decode": 16}
    }


def test_a_worker_image_without_lmcache_and_nixl_degrades_the_kv_transfer(tmp_path):
    # gpt_oss_120b_endpoint's image: AWS's SageMaker vLLM container, not a DPD image.
    w = _world(tmp_path, _pd_config())
    w.reconcile()
    assert [(f.rule, f.severity) for f in w.findings] == [
        ("operator.pd-image-without-nixl", "degrades")
    ]


def test_a_role_without_efa_degrades_the_kv_transfer(tmp_path):
    config = _pd_config(image=DPD_IMAGE)
    for amounts in config["spec"]["pdSpec"]["decodingSpec"]["resources"].values():
        del amounts[inference_operator.EFA]
    w = _world(tmp_path, config)
    w.reconcile()
    assert [f.rule for f in w.findings] == ["operator.pd-transfer-without-efa"]
    assert "decodingSpec" in w.findings[0].message

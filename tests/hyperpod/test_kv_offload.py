"""``VllmMultiNodeService``'s KV-cache offload to host memory: on by default when a node has
the memory to spare, sized from the pod's memory, refused when it does not fit, off on request."""

from __future__ import annotations

import re

import pytest

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.pod_spec import (
    MIN_KV_OFFLOAD_GIB,
    PROCESS_BASE_GIB,
    PROCESS_GIB_PER_GPU,
    kv_offload_budget_gib,
)
from cdk_llm_serving.vllm import VllmConfig
from tests.support.builders import new_stack
from tests.support.hyperpod import deepseek_service, small_cluster
from tests.support.template_helpers import manifest_objects


def _vllm_args(lws: dict) -> dict[str, str]:
    templates = lws["spec"]["leaderWorkerTemplate"]
    found = {}
    for role in ("leaderTemplate", "workerTemplate"):
        if role not in templates:
            continue  # one node per replica: the worker template only
        (container,) = [c for c in templates[role]["spec"]["containers"] if c["name"] == "vllm"]
        found[role] = " ".join(container.get("command", []) + container.get("args", []))
    return found


@pytest.fixture(scope="module")
def services():
    """The default, and off."""
    stack = new_stack("KvOffload")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    default = deepseek_service(stack, cluster, addons, store)
    off = deepseek_service(stack, cluster, addons, store, id="Off", name="off", kv_offload=False)
    return default, off


def test_asking_for_it_gives_the_default_size():
    stack = new_stack("KvOffloadAsked")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    asked = deepseek_service(stack, cluster, addons, store, kv_offload=True)
    assert asked.config.kv_offloading_size == asked.kv_offload_budget_gib


def test_the_budget_is_the_pods_memory_less_the_processes_and_the_weights():
    assert kv_offload_budget_gib(1843, 8, 650.2) == 1843 - PROCESS_BASE_GIB - 8 * 16 - 651
    assert PROCESS_GIB_PER_GPU == 16
    assert kv_offload_budget_gib(100, 8, 90) == 0


def test_on_by_default_sized_from_the_node(services):
    default, _ = services
    memory = int(default.resources["memory"].removesuffix("Gi"))
    weights_gib = default.plan.weight_bytes / default.nodes / 2**30
    budget = kv_offload_budget_gib(memory, default.instance.gpus, weights_gib)
    assert budget == default.kv_offload_budget_gib >= MIN_KV_OFFLOAD_GIB
    # One engine per node (tensor parallel over the node's 8 GPUs): it gets the whole budget,
    # inside the Guaranteed memory request (the /dev/shm buffer counts against it).
    assert default.engines_per_node == 1
    assert default.config.kv_offloading_size == budget < memory
    for text in _vllm_args(default.lws).values():
        assert re.findall(r"--kv-offloading-size[ =](\S+)", text) == [str(budget)]


def test_off_leaves_the_command_line_as_before(services):
    _, off = services
    assert off.config.kv_offloading_size is None
    assert all("offloading" not in text for text in _vllm_args(off.lws).values())


def test_a_size_that_does_not_fit_and_lmcache_are_refused_together():
    stack = new_stack("TooBig")
    cluster, addons, store = small_cluster(stack)
    config = VllmConfig(
        model="x", max_model_len=32768, kv_offloading_size=1900, kv_offloading_backend="lmcache"
    )
    with pytest.raises(ConfigurationError) as caught:
        deepseek_service(stack, cluster, addons, store, config=config)
    by_prop = {p.property: p for p in caught.value.problems}
    assert "at most" in by_prop["config.kv_offloading_size"].allowed
    assert "1843Gi" in by_prop["config.kv_offloading_size"].allowed
    assert "LMCache server" in by_prop["config.kv_offloading_backend"].allowed


def test_a_size_with_offload_off_is_a_contradiction():
    stack = new_stack("Contradiction")
    cluster, addons, store = small_cluster(stack)
    config = VllmConfig(model="x", max_model_len=32768, kv_offloading_size=100)
    with pytest.raises(ConfigurationError, match="kv_offload = False"):
        deepseek_service(stack, cluster, addons, store, config=config, kv_offload=False)


def test_a_size_that_fits_is_used_as_given():
    stack = new_stack("Given")
    cluster, addons, store = small_cluster(stack)
    config = VllmConfig(model="x", max_model_len=32768, kv_offloading_size=256)
    service = deepseek_service(stack, cluster, addons, store, config=config)
    assert service.config.kv_offloading_size == 256


def test_the_reference_moe_offloads_to_host_memory(reference_templates):
    (lws,) = manifest_objects(reference_templates["ReferenceMoeHyperPod"], "ServingLeaderWorkerSet")
    sizes = {
        size
        for text in _vllm_args(lws).values()
        for size in re.findall(r"--kv-offloading-size[ =](\S+)", text)
    }
    (size,) = sizes
    assert MIN_KV_OFFLOAD_GIB <= float(size) < 2048


def _tiered_cluster(stack, percentage: int):
    from cdk_llm_serving.hyperpod import HyperPodEksCluster, HyperPodServingAddons, TieredStorage
    from tests.support.hyperpod import instance_groups, model_store

    cluster = HyperPodEksCluster(
        stack,
        "HyperPod",
        kubernetes_version="1.33",
        instance_groups=instance_groups(2),
        tiered_storage=TieredStorage(memory_percentage=percentage),
    )
    return (
        cluster,
        HyperPodServingAddons(stack, "Addons", cluster=cluster),
        model_store(stack, cluster),
    )


def test_the_clusters_tiered_storage_is_left_out_of_the_offload_budget(services):
    """M5: the tier's daemon takes ``memory_percentage`` of every node's memory beside the pod;
    the offload buffer gives that share up (``pod_spec.kv_offload_budget_gib(tier_gib=)``)."""
    default, _ = services
    stack = new_stack("KvOffloadTier")
    cluster, addons, store = _tiered_cluster(stack, 5)
    tiered = deepseek_service(stack, cluster, addons, store)
    tier_gib = default.instance.host_memory_gib * 5 / 100  # 102.4 GiB of a p5en's 2,048
    assert tiered.tiered_storage_gib == pytest.approx(tier_gib)
    assert tiered.kv_offload_budget_gib == default.kv_offload_budget_gib - 103
    assert tiered.config.kv_offloading_size == float(default.kv_offload_budget_gib - 103)
    for text in _vllm_args(tiered.lws).values():
        assert re.findall(r"--kv-offloading-size[ =](\S+)", text) == [
            str(default.kv_offload_budget_gib - 103)
        ]


def test_a_hand_set_size_that_only_fits_without_the_tier_is_refused(services):
    default, _ = services
    stack = new_stack("KvOffloadTierHand")
    cluster, addons, store = _tiered_cluster(stack, 5)
    size = float(default.kv_offload_budget_gib)  # fits a node without the tier
    with pytest.raises(ConfigurationError, match=r"config\.kv_offloading_size"):
        deepseek_service(
            stack,
            cluster,
            addons,
            store,
            config=VllmConfig(model="x", max_model_len=32768, kv_offloading_size=size),
        )


def test_a_tier_turned_on_after_the_service_fails_the_synth():
    """An endpoint with the tiered L2 turns the cluster's tier on (``enable_tiered_storage``)
    after the service sized its buffer: the synth says so instead of deploying a buffer that
    takes the tier's share."""
    stack = new_stack("KvOffloadTierLate")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    deepseek_service(stack, cluster, addons, store)
    cluster.enable_tiered_storage()
    with pytest.raises(Exception, match="tiered storage .* was turned on after this service"):
        stack.node.root.synth()

"""Constructs take the planner's layout by default; an explicit tensor-parallel size
wins, with ``cdk-llm-serving:tensorParallelCostsThroughput`` when it costs more than 2x in
tokens per dollar."""

from __future__ import annotations

from aws_cdk.assertions import Annotations, Match

from cdk_llm_serving import ContainerImage, ModelData, VllmPoolEndpoint
from cdk_llm_serving.planning import plan
from cdk_llm_serving.vllm import VllmConfig
from cdk_llm_serving.vllm.pool_strategy import TENSOR_PARALLEL_WARNING_ID, derive_pool_config
from tests.support.builders import IMAGE, new_stack

LLAMA_70B = VllmConfig(model="m", max_model_len=8192)


def test_cost_and_throughput_goals_take_the_planners_layout():
    """gpt-oss-120b on p5en: the latency goal keeps tensor 8; cost takes the planner's choice."""
    latency = derive_pool_config(
        VllmConfig(model="m"), "gpt-oss-120b", "ml.p5en.48xlarge", ["mxfp4"]
    )
    cost = derive_pool_config(
        VllmConfig(model="m"), "gpt-oss-120b", "ml.p5en.48xlarge", ["mxfp4"], goal="cost"
    )
    chosen = plan("gpt-oss-120b", "mxfp4", "ml.p5en.48xlarge", max_nodes=1, kv_cache_dtype="auto")
    assert latency.config.tensor_parallel_size == 8
    assert cost.config.tensor_parallel_size == chosen.tensor_parallel < 8
    assert cost.config.data_parallel_size == chosen.data_parallel
    assert cost.tensor_parallel_warning is None and latency.tensor_parallel_warning is None


def test_an_explicit_tensor_parallel_size_wins_and_warns_when_it_costs_over_2x():
    pinned = derive_pool_config(
        LLAMA_70B.with_changes(tensor_parallel_size=2), "llama-3.3-70b", "ml.p5.48xlarge", ["bf16"]
    )
    assert pinned.config.tensor_parallel_size == 2 and pinned.config.data_parallel_size == 4
    assert pinned.tensor_parallel_warning is not None
    assert "fewer tokens per dollar" in pinned.tensor_parallel_warning
    near = derive_pool_config(
        LLAMA_70B.with_changes(tensor_parallel_size=8), "llama-3.3-70b", "ml.p5.48xlarge", ["bf16"]
    )
    assert near.config.tensor_parallel_size == 8 and near.tensor_parallel_warning is None


def test_the_pool_endpoint_adds_the_warning():
    stack = new_stack()
    VllmPoolEndpoint(
        stack,
        "Serving",
        image=ContainerImage.from_ecr_uri(IMAGE),
        model="llama-3.3-70b",
        config=LLAMA_70B.with_changes(tensor_parallel_size=2),
        weights={"bf16": ModelData.from_s3_uri("s3://weights-bucket/bf16/")},
        pools=["ml.p5.48xlarge"],
    )
    found = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp(f".*tensor_parallel_size=2.*{TENSOR_PARALLEL_WARNING_ID}.*")
    )
    assert found, "no tensorParallelCostsThroughput warning"


def test_the_multi_node_service_keeps_an_explicit_tensor_parallel_size():
    """It was replaced by the node-wide size; now the user's wins (no warning within 2x)."""
    from tests.support.hyperpod import deepseek_service, small_cluster

    stack = new_stack("SvcPinned")
    service = deepseek_service(
        stack,
        *small_cluster(stack),
        model="llama-3.3-70b",
        weight_format="bf16",
        config=VllmConfig(model="x", max_model_len=8192, tensor_parallel_size=4),
    )
    assert service.config.tensor_parallel_size == 4 and service.layout.tensor_parallel == 4
    assert service.placement.tensor_parallel_warning is None
    other = new_stack("SvcDefault")
    default = deepseek_service(
        other,
        *small_cluster(other),
        model="llama-3.3-70b",
        weight_format="bf16",
        config=VllmConfig(model="x", max_model_len=8192),
    )
    assert default.config.tensor_parallel_size == 8

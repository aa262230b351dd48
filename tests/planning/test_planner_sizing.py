"""plan(): published deployments reproduced, and every way a plan can be refused."""

from __future__ import annotations

import pytest

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.planning.catalog import GIB, default_catalog
from cdk_llm_serving.planning.models import ModelSpec, preset
from cdk_llm_serving.planning.sizing import PlanningError, plan

# Each row: a deployment its publisher documents, and the layout the planner must find.
PUBLISHED = [
    pytest.param(
        "gpt-oss-120b",
        "mxfp4",
        "ml.p5.4xlarge",
        32768,
        1,
        1,
        id="gpt-oss-120b on one 80 GB H100 (OpenAI model card)",
    ),
    pytest.param(
        "gpt-oss-20b",
        "mxfp4",
        "ml.g6.xlarge",
        32768,
        1,
        1,
        id="gpt-oss-20b within 16 GB: one 24 GB L4 (OpenAI model card)",
    ),
    pytest.param(
        "llama-3.1-405b",
        "fp8",
        "ml.p5.48xlarge",
        131072,
        1,
        8,
        id="Llama 3.1 405B FP8 on one 8xH100 node (Meta)",
    ),
    pytest.param(
        "llama-3.1-405b",
        "bf16",
        "ml.p5.48xlarge",
        131072,
        2,
        8,
        id="Llama 3.1 405B BF16 needs two 8xH100 nodes (Meta)",
    ),
    pytest.param(
        "deepseek-v3",
        "fp8",
        "ml.p5en.48xlarge",
        131072,
        1,
        8,
        id="DeepSeek-V3 FP8 on one 8xH200 node (DeepSeek, SGLang)",
    ),
    pytest.param(
        "deepseek-v3",
        "fp8",
        "ml.p5.48xlarge",
        131072,
        2,
        8,
        id="DeepSeek-V3 FP8 on two 8xH100 nodes (SGLang)",
    ),
    pytest.param(
        "kimi-k2",
        "fp8",
        "ml.p5en.48xlarge",
        131072,
        2,
        8,
        id="Kimi-K2 FP8 at 128k needs 16 H200 (Moonshot deploy guidance)",
    ),
]


@pytest.mark.parametrize(
    ("model", "fmt", "instance_type", "context", "nodes", "tensor_parallel"), PUBLISHED
)
def test_published_deployments(model, fmt, instance_type, context, nodes, tensor_parallel):
    result = plan(model, fmt, instance_type, max_context=context)
    # Across nodes a MoE model is data-parallel (one rank per node), a dense one pipelined.
    moe = preset(model).is_moe
    pipeline, data = (1, nodes) if moe else (nodes, 1)
    assert (result.nodes, result.tensor_parallel, result.pipeline_parallel) == (
        nodes,
        tensor_parallel,
        pipeline,
    )
    assert result.data_parallel == data
    assert result.sequences_at_max_context >= 1


@pytest.mark.parametrize(
    ("instance_type", "native"),
    [("ml.p6-b200.48xlarge", True), ("ml.p5en.48xlarge", False)],
)
def test_reference_2_4t_nvfp4_needs_two_nodes_and_warns_off_blackwell(instance_type, native):
    result = plan("reference-2.4t-a95b", "nvfp4", instance_type, max_context=131072)
    assert result.nodes == 2 and result.tensor_parallel == 8 and result.pipeline_parallel == 1
    assert result.data_parallel == 2 and result.expert_parallel
    assert bool(result.warnings) is not native
    with pytest.raises(PlanningError):
        plan("reference-2.4t-a95b", "nvfp4", instance_type, max_context=131072, max_nodes=1)


def test_weight_and_kv_arithmetic():
    result = plan("llama-3.1-405b", "fp8", "ml.p5.48xlarge", max_context=131072)
    expected_weights = (405.0 - 76.0) * 1e9 * 1.0 + 76.0 * 1e9 * 2.0
    assert result.weight_bytes == pytest.approx(expected_weights)
    assert result.weight_bytes_per_gpu == pytest.approx(expected_weights / 8)
    assert result.kv_bytes_per_token == 2 * 126 * 8 * 128 * 2
    usable = 79.6 * GIB * 0.9 - 2 * GIB
    assert result.kv_cache_bytes_per_gpu == pytest.approx(usable - expected_weights / 8)
    assert result.kv_tokens_per_replica == int(
        (usable - expected_weights / 8) * 8 // result.kv_bytes_per_token
    )


def test_fp8_kv_cache_doubles_the_tokens():
    auto = plan("qwen3-235b-a22b", "fp8", "ml.p5.48xlarge", max_context=32768)
    fp8 = plan("qwen3-235b-a22b", "fp8", "ml.p5.48xlarge", max_context=32768, kv_cache_dtype="fp8")
    assert fp8.kv_tokens_per_replica == pytest.approx(2 * auto.kv_tokens_per_replica, rel=1e-6)


def test_small_models_leave_gpus_for_data_parallel_replicas():
    result = plan("gpt-oss-20b", "int4", "ml.g6e.48xlarge", max_context=32768)
    assert (result.tensor_parallel, result.data_parallel, result.nodes) == (1, 8, 1)


def test_concurrency_can_demand_more_memory():
    smallest = {"objective": "min-gpus", "max_context": 131072}
    one = plan("gpt-oss-120b", "mxfp4", "ml.p5.48xlarge", **smallest)
    many = plan("gpt-oss-120b", "mxfp4", "ml.p5.48xlarge", concurrency=40, **smallest)
    assert many.tensor_parallel > one.tensor_parallel


def dense_gqa(
    name: str, params_b: float, *, layers: int, heads: int, kv_heads: int, max_context: int
) -> ModelSpec:
    """A dense GQA model with 128-dim heads, for shapes no preset has."""
    return ModelSpec(
        name=name,
        total_params_b=params_b,
        active_params_b=params_b,
        layers=layers,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=128,
        max_context=max_context,
    )


def test_tensor_parallel_divides_the_attention_heads():
    odd = dense_gqa("odd", 30, layers=40, heads=12, kv_heads=4, max_context=32768)
    result = plan(odd, "bf16", "ml.p4d.24xlarge", max_context=32768)
    assert 12 % result.tensor_parallel == 0


def test_no_fit_says_what_is_needed_what_is_there_and_what_would_fit():
    with pytest.raises(PlanningError) as caught:
        plan("llama-3.1-405b", "bf16", "ml.p5.48xlarge", max_context=131072, max_nodes=1)
    error = caught.value
    text = str(error)
    assert (
        "does not fit one node of ml.p5.48xlarge" in text
        and "needs 817 GiB" in text
        and "one node offers 557 GiB" in text
    )
    assert error.needed_bytes > error.available_bytes
    assert error.suggestions[0] == "2 x ml.p5.48xlarge (tensor 8 x pipeline 2)"
    assert any(s.startswith("1 x ml.p5en.48xlarge") for s in error.suggestions)
    assert "fp8 weights on 1 x ml.p5.48xlarge" in error.suggestions


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_context": 262144}, "outside 1..131072"),
        ({"concurrency": 0}, "concurrency=0"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization=1.5"),
        ({"kv_cache_dtype": "int8"}, "kv_cache_dtype='int8'"),
        ({"max_nodes": 0}, "max_nodes=0"),
    ],
)
def test_bad_inputs(kwargs, message):
    with pytest.raises(PlanningError, match=message.replace("(", r"\(").replace(".", r"\.")):
        plan("gpt-oss-120b", "mxfp4", "ml.p5.48xlarge", **kwargs)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (("nope", "bf16", "ml.p5.48xlarge"), ConfigurationError, "model = 'nope': not one of the"),
        (("gpt-oss-20b", "fp4", "ml.p5.48xlarge"), ConfigurationError, "weight_format = 'fp4'"),
        (
            ("gpt-oss-20b", "bf16", "ml.p9.48xlarge"),
            ConfigurationError,
            "instance_type = 'ml.p9.48xlarge': not one of the",
        ),
    ],
)
def test_unknown_names(args, error, message):
    with pytest.raises(error, match=message):
        plan(*args)


def test_nothing_fits_at_all():
    huge = dense_gqa("huge", 40000, layers=200, heads=128, kv_heads=8, max_context=8192)
    with pytest.raises(PlanningError, match="does not fit up to 16 nodes") as caught:
        plan(huge, "bf16", "ml.p5.48xlarge")
    assert caught.value.suggestions == ()


def test_single_instance_targets_get_no_multi_node_suggestions():
    """A SageMaker endpoint instance cannot run a multi-node layout: never suggest one."""
    with pytest.raises(PlanningError) as caught:
        plan(
            "llama-3.1-405b",
            "bf16",
            "ml.p5.48xlarge",
            max_context=131072,
            max_nodes=1,
            single_instance=True,
        )
    assert caught.value.alternatives and all(a.nodes == 1 for a in caught.value.alternatives)


def test_layouts_across_nodes_need_efa_unless_waived():
    """g6e.2xlarge has no EFA: no layout across single-GPU nodes unless asked."""
    with pytest.raises(
        PlanningError, match="does not fit one node .*need EFA, which ml.g6e.2xlarge lacks"
    ):
        plan("gpt-oss-120b", "bf16", "ml.g6e.2xlarge", max_context=8192)
    waived = plan("gpt-oss-120b", "bf16", "ml.g6e.2xlarge", max_context=8192, require_efa=False)
    assert waived.nodes > 1 and waived.data_parallel == waived.nodes  # MoE: data x expert
    with pytest.raises(PlanningError) as caught:
        plan(
            "gpt-oss-120b",
            "bf16",
            "ml.g6e.48xlarge",
            max_context=131072,
            concurrency=64,
            max_nodes=1,
        )
    across_nodes = [a for a in caught.value.alternatives if a.nodes > 1]
    assert across_nodes  # else the check below would pass on nothing
    for alternative in across_nodes:
        assert default_catalog().get(alternative.instance_type).efa_devices


def test_model_sizing_on_one_instance_is_single_instance():
    from cdk_llm_serving.planning.sizing import ModelSizing

    with pytest.raises(PlanningError) as caught:
        ModelSizing("llama-3.1-405b", "bf16", max_context=131072).plan_on(
            "ml.p5.48xlarge", max_nodes=1
        )
    assert "pipeline" not in str(caught.value)


def test_moe_across_nodes_is_data_and_expert_parallel_with_non_expert_weights_per_rank():
    """2.4T NVFP4 on 2 x 8 B200: the routed experts over 16 GPUs, the other weights over each
    node's 8 (a copy per data-parallel rank), a KV cache per rank. Figures by hand."""
    result = plan("reference-2.4t-a95b", "nvfp4", "ml.p6-b200.48xlarge", max_context=131072)
    assert (result.nodes, result.tensor_parallel, result.pipeline_parallel) == (2, 8, 1)
    assert result.data_parallel == 2 and result.expert_parallel
    total = (2400 - 40) * 1e9 * 0.5625 + 40 * 2e9  # NVFP4, 40B kept in BF16
    routed = (2400 - 95) / (1 - 8 / 384) * 1e9 * 0.5625  # total = rest + R, active = rest + R·k/E
    per_gpu = (total - routed) / 8 + routed / 16
    assert result.weight_bytes_per_gpu == pytest.approx(per_gpu)
    assert per_gpu > total / 16  # the pipelined layout's figure undercounted it
    kv_space = 179.0 * GIB * 0.9 - 2 * GIB - per_gpu
    assert result.kv_cache_bytes_per_gpu == pytest.approx(kv_space)
    kv_per_token = (512 + 64) * 96 * 2  # MLA latent + rope key, BF16, replicated on all 8 ranks
    assert result.kv_tokens_per_replica == int(kv_space * 8 // (kv_per_token * 8))
    assert result.sequences_at_max_context == (result.kv_tokens_per_replica // 131072) * 2


def test_dense_model_across_nodes_stays_tensor_by_pipeline():
    result = plan("llama-3.1-405b", "bf16", "ml.p5.48xlarge", max_context=131072)
    assert (result.nodes, result.tensor_parallel, result.pipeline_parallel) == (2, 8, 2)
    assert result.data_parallel == 1 and not result.expert_parallel
    assert result.weight_bytes_per_gpu == pytest.approx(result.weight_bytes / 16)


def test_concurrency_across_data_parallel_ranks_counts_every_rank():
    """Each rank holds its own requests: concurrency is met by the ranks together."""
    one = plan("reference-2.4t-a95b", "nvfp4", "ml.p6-b200.48xlarge", max_context=131072)
    per_rank = one.kv_tokens_per_replica // 131072
    both = plan(
        "reference-2.4t-a95b",
        "nvfp4",
        "ml.p6-b200.48xlarge",
        max_context=131072,
        concurrency=2 * per_rank,
    )
    assert both.nodes == 2 and both.sequences_at_max_context == 2 * per_rank
    more = plan(
        "reference-2.4t-a95b",
        "nvfp4",
        "ml.p6-b200.48xlarge",
        max_context=131072,
        concurrency=2 * per_rank + 1,
    )
    assert more.nodes > 2


def test_a_moe_alternative_across_nodes_names_its_data_parallel_layout():
    with pytest.raises(PlanningError) as caught:
        plan("kimi-k2", "fp8", "ml.p5en.48xlarge", max_context=131072, max_nodes=1)
    first = caught.value.alternatives[0]
    assert (first.nodes, first.tensor_parallel, first.pipeline_parallel) == (2, 8, 1)
    assert first.data_parallel == 2
    assert str(first) == "2 x ml.p5en.48xlarge (tensor 8 x data 2, experts over all GPUs)"

"""The decode model: expected distinct experts, one pipeline stage at a time, MLA KV, batch choice."""

from __future__ import annotations

import pytest

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.planning.cost import estimate_cost
from cdk_llm_serving.planning.decode import (
    BANDWIDTH_EFFICIENCY,
    COLLECTIVE_LATENCY_S,
    LINK_EFFICIENCY,
    Workload,
    decode_step,
)
from cdk_llm_serving.planning.models import preset
from cdk_llm_serving.planning.moe import expected_distinct_experts
from cdk_llm_serving.planning.objective import LatencyTargets
from cdk_llm_serving.planning.prefill import prefill_seconds
from cdk_llm_serving.planning.sizing import plan
from cdk_llm_serving.planning.speculative import (
    accepted_tokens_per_step,
    estimate_speculation,
    method,
)
from cdk_llm_serving.planning.throughput import estimate_throughput


def test_expected_distinct_experts_is_the_occupied_bins_expectation():
    assert expected_distinct_experts(256, 8, 1) == pytest.approx(8)
    assert expected_distinct_experts(384, 8, 32) == pytest.approx(384 * (1 - (1 - 8 / 384) ** 32))
    assert expected_distinct_experts(32, 4, 10_000) == pytest.approx(32)
    assert expected_distinct_experts(0, 8, 32) == 0


def test_batch_one_reads_exactly_the_active_parameters():
    result = plan("deepseek-v3", "fp8", "ml.p5en.48xlarge", max_context=8192)
    step = decode_step(result, 1, 1)
    spec = preset("deepseek-v3")
    active = (
        spec.active_params_b - spec.high_precision_params_b
    ) * 1e9 + spec.high_precision_params_b * 2e9
    assert step.dense_bytes + step.expert_bytes == pytest.approx(active)


def test_reference_model_decode_counts_touched_experts_and_one_stage():
    """At batch 32 one rank touches about half the routed experts; across 2 nodes the
    model runs 2 data-parallel ranks whose 64 tokens touch about 3/4 of them, sharded over both
    nodes, so each rank's GPUs read half of that."""
    result = plan("reference-2.4t-a95b", "nvfp4", "ml.p6-b200.48xlarge", max_context=131072)
    assert result.data_parallel == 2 and result.pipeline_parallel == 1
    step = decode_step(result, 32, 4096)
    spec = preset("reference-2.4t-a95b")
    assert 0.45 < 1 - (1 - 8 / 384) ** 32 < 0.55
    share = 1 - (1 - 8 / 384) ** 64  # both ranks' tokens
    assert 0.7 < share < 0.8
    assert step.expert_bytes == pytest.approx(spec.routed_experts_b * 1e9 * share * 0.5625 / 2)
    routed_b = (2400 - 95) / (1 - 8 / 384)  # total = dense + routed, active = dense + routed·k/E
    dense_b = 95 - routed_b * 8 / 384
    assert step.dense_bytes == pytest.approx((dense_b - 40) * 1e9 * 0.5625 + 40 * 2e9)
    assert step.kv_bytes == pytest.approx(
        32 * 4096 * result.kv_bytes_per_token * 8
    )  # MLA: every TP rank reads it
    stage = 8 * 8.0e12 * BANDWIDTH_EFFICIENCY  # one rank: 8 B200, not 16 GPUs
    assert step.stage_bandwidth == pytest.approx(stage)
    assert step.memory_s == pytest.approx(
        (step.dense_bytes + step.expert_bytes + step.kv_bytes) / stage
    )
    assert 650e9 < step.bytes_read < 720e9
    # Memory-bound at batch 32: the step is every byte read plus the collectives, which add
    # (one all-reduce per MoE layer over TP8, the all-to-all over EFA).
    per_layer = COLLECTIVE_LATENCY_S + 2 * 7 / 8 * 32 * 7168 * 2 / (900e9 * LINK_EFFICIENCY)
    assert step.all_reduce_s == pytest.approx(96 * per_layer)
    assert step.step_s == pytest.approx(step.memory_s + step.all_reduce_s + step.all_to_all_s)
    assert step.tokens_per_second == pytest.approx(1301, rel=0.01)  # per data-parallel rank
    fixed = estimate_cost(result, batch=32, context_tokens=4096)
    assert fixed.output_tokens_per_second == pytest.approx(2 * 1301, rel=0.01)  # x 2 ranks
    assert fixed.price_per_million_output_tokens == pytest.approx(
        284.0 / (2 * 1301 * 3600) * 1e6, rel=0.01
    )


def test_batch_is_chosen_by_itl_target_and_kv_capacity():
    result = plan("llama-3.1-405b", "nvfp4", "ml.p6-b200.48xlarge", max_context=2048)
    estimate = estimate_throughput(result, Workload(1024, 1024), itl_target_ms=10_000)
    assert estimate.max_batch == result.kv_tokens_per_replica // 2048
    assert estimate.chosen.batch == estimate.max_batch  # loose target: the KV cache is the limit
    impossible = estimate_throughput(result, Workload(1024, 1024), itl_target_ms=0.1)
    assert not impossible.meets_target and impossible.chosen.batch == 1


def test_smallest_layout_leaves_little_batch_so_the_objective_searches_wider():
    """405B NVFP4 on p6-b200 at 2k context: the smallest fit (TP2) holds 4 sequences per replica
    and misses a 20 ms ITL; the objective's search over every layout finds TP8, which meets it."""
    smallest = plan(
        "llama-3.1-405b", "nvfp4", "ml.p6-b200.48xlarge", max_context=2048, objective="min-gpus"
    )
    assert smallest.tensor_parallel == 2 and smallest.kv_tokens_per_replica // 2048 == 4
    workload = Workload(1024, 1024)
    assert not estimate_throughput(smallest, workload, itl_target_ms=20).meets_target
    best = plan(
        "llama-3.1-405b",
        "nvfp4",
        "ml.p6-b200.48xlarge",
        workload=workload,
        targets=LatencyTargets(itl_ms=20),
        max_context=2048,
    )
    assert best.tensor_parallel == 8 and best.performance.meets_targets
    assert best.performance.itl_ms <= 20


def test_speculation_tokens_per_step_and_the_gpt_oss_eagle3_claim():
    """The seed's "2x tokens/s with EAGLE-3 on gpt-oss-20b": the plan gives about 2x only once a
    batch already touches every expert; at batch 1 the 4 verified tokens touch ~3x the experts."""
    assert accepted_tokens_per_step(0.85, 1) == pytest.approx(1.85)
    assert accepted_tokens_per_step(0.0, 3) == 1
    result = plan("gpt-oss-20b", "mxfp4", "ml.p5.4xlarge", max_context=8192)
    eagle = method("eagle3")
    low = estimate_speculation(result, eagle, batch=1, context=2048)
    high = estimate_speculation(result, eagle, batch=64, context=2048)
    assert 1.0 < low.speedup < 1.5
    assert 1.8 < high.speedup <= accepted_tokens_per_step(eagle.acceptance_rate, eagle.draft_tokens)
    with pytest.raises(
        ConfigurationError, match="name = 'medusa': speculation methods must be one of mtp"
    ):
        method("medusa")


def test_all_to_all_across_nodes_spans_every_rank_over_efa():
    """Expert parallel over 2 x 8 B200: ep = 16 > 8 GPUs, so EFA (3200 Gbps per node, shared by
    8 GPUs) carries both ranks' tokens."""
    result = plan("reference-2.4t-a95b", "nvfp4", "ml.p6-b200.48xlarge", max_context=131072)
    step = decode_step(result, 32, 4096)
    per_token = 2 * 8 * 7168 * 2 * 96  # dispatch + combine, k=8, hidden 7168, BF16, 96 layers
    off_gpu = 32 * 2 * per_token * 15 / 16
    latency = 2 * 96 * COLLECTIVE_LATENCY_S  # one dispatch and one combine per MoE layer
    assert step.all_to_all_s == pytest.approx(off_gpu / (16 * 3200e9 / 8 / 8) + latency)


def test_routed_experts_turn_compute_bound_at_the_measured_grouped_gemm_share():
    """Qwen3-235B-A22B FP8 on 4 x H200 at batch 1024 touches every expert; its
    routed experts' FLOPs then run at the measured grouped-GEMM share of FP8 peak (0.22 on
    H200, data/gpus.json), not the dense GEMMs' 40 %, and bound the expert part of the step."""
    result = plan("qwen3-235b-a22b", "fp8", "ml.p5en.48xlarge", tensor_parallel=4, max_context=2048)
    assert result.instance_spec.gpu.grouped_gemm_share("fp8") == 0.22
    spec = preset("qwen3-235b-a22b")
    routed_active = spec.routed_experts_b * 1e9 * 8 / 128
    small, large = decode_step(result, 8, 1536), decode_step(result, 1024, 1536)
    assert small.experts_s == pytest.approx(small.expert_bytes / small.stage_bandwidth)
    expected = 2 * routed_active * 1024 / (4 * 1979e12 * 0.22)
    assert (
        large.experts_s == pytest.approx(expected)
        and expected > large.expert_bytes / large.stage_bandwidth
    )
    # the parts add: a layer's attention, GEMMs and collectives run one after another
    parts = large.attention_s + large.dense_s + large.experts_s + large.all_reduce_s
    assert (
        large.step_s == pytest.approx(parts + large.all_to_all_s) and large.step_s > large.memory_s
    )


def test_tensor_parallel_all_reduce_grows_with_the_tensor_parallel_size():
    """Two all-reduces per layer of batch x hidden x 2 bytes; none at TP1, and the ring
    moves 2 (tp-1)/tp of the message, so splitting 70B eight ways is no longer free."""
    steps = {
        tp: decode_step(
            plan("llama-3.3-70b", "fp8", "ml.p5en.48xlarge", tensor_parallel=tp, max_context=2048),
            256,
            1536,
        )
        for tp in (1, 2, 4, 8)
    }
    assert steps[1].all_reduce_s == 0
    assert steps[2].all_reduce_s < steps[4].all_reduce_s < steps[8].all_reduce_s
    message = 256 * 8192 * 2
    per_call = COLLECTIVE_LATENCY_S + 2 * 7 / 8 * message / (450e9 * LINK_EFFICIENCY)
    assert steps[8].all_reduce_s == pytest.approx(2 * 80 * per_call)
    # TP8 reads an eighth of the weights per GPU, but its step is a quarter above an eighth of TP1's
    assert steps[8].step_s > steps[1].step_s / 8 * 1.25


def test_prefill_pays_its_all_reduces():
    tp8 = plan("llama-3.3-70b", "fp8", "ml.p5en.48xlarge", tensor_parallel=8, max_context=2048)
    compute_only = 2 * preset("llama-3.3-70b").active_params_b * 1e9 * 1024 / (8 * 1979e12 * 0.4)
    message = 1024 * 8192 * 2
    per_call = COLLECTIVE_LATENCY_S + 2 * 7 / 8 * message / (450e9 * LINK_EFFICIENCY)
    assert prefill_seconds(tp8, 1024) == pytest.approx(compute_only + 2 * 80 * per_call)

"""The planner chooses the layout with the most output tokens per dollar that meets
the latency targets, shows the next best and why each loses, models prefill for TTFT, and says
whether prefill/decode disaggregation would pay."""

from __future__ import annotations

import pytest

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.planning import LatencyTargets, Objective, Workload, plan
from cdk_llm_serving.planning.objective import evaluate
from cdk_llm_serving.planning.prefill import DISAGGREGATION_SOURCE

WORKLOAD_1K = Workload(input_tokens=1024, output_tokens=1024)
TARGETS_10S_100MS = LatencyTargets(ttft_s=10.0, tpot_ms=100.0)
#: NVIDIA AIConfigurator 0.12, vLLM backend, 8 x H200 (FACTS.md "A peer planner"): TP8 batch 224.
AICONFIGURATOR_TOKENS_PER_S = 2373
#: TensorRT-LLM's performance overview, Llama 3.1 405B FP8 on 8 x H200 at 1024/1024.
TRTLLM_TOKENS_PER_S = 3330


@pytest.mark.parametrize(
    ("instance_type", "layout", "rival"),
    [
        # TP8 on H200: TP4 x DP2 leaves 12 GiB of KV cache per GPU, a batch of 100 at most.
        ("ml.p5en.48xlarge", (8, 1, 1), (4, 2)),
        # TP4 x DP2 on B200, as AIConfigurator 0.12 picks (bench/aiconfigurator_cases.json,
        # llama-3.1-405b-fp8-b200: TP4 x2 at batch 224): B200's 179 GiB leave TP4 a batch of
        # about 350, and TP8's all-reduces cost more than its larger batch brings.
        ("ml.p6-b200.48xlarge", (4, 1, 2), (8, 1)),
    ],
)
def test_the_405b_case_chooses_a_large_batch(instance_type, layout, rival):
    """Before: plan() gave TP4 x DP2 (p5en) / TP2 x DP4 (p6-b200) with room for a batch of 1."""
    chosen = plan(
        "llama-3.1-405b", "fp8", instance_type, workload=WORKLOAD_1K, targets=TARGETS_10S_100MS
    )
    assert (chosen.tensor_parallel, chosen.pipeline_parallel, chosen.data_parallel) == layout
    assert chosen.nodes == 1 and not chosen.expert_parallel
    perf = chosen.performance
    assert perf is not None and perf.meets_targets
    assert perf.max_num_seqs >= 128
    assert perf.ttft_s <= 10 and perf.tpot_ms <= 100 and perf.itl_ms <= perf.tpot_ms
    assert perf.output_tokens_per_second_per_gpu == pytest.approx(perf.output_tokens_per_second / 8)
    assert perf.usd_per_million_output_tokens is not None
    if instance_type == "ml.p5en.48xlarge":  # the measured GPU: within 2x of both figures
        for measured in (AICONFIGURATOR_TOKENS_PER_S, TRTLLM_TOKENS_PER_S):
            assert 0.5 <= perf.output_tokens_per_second / measured <= 2.0
    layouts = {
        (c.plan.tensor_parallel, c.plan.data_parallel, c.plan.kv_cache_dtype): c
        for c in chosen.candidates
    }
    other = layouts.get((*rival, chosen.kv_cache_dtype)) or layouts[(*rival, "fp8")]
    assert "fewer tokens per dollar" in other.loses_because
    assert other.performance.output_tokens_per_second < perf.output_tokens_per_second


def test_min_gpus_keeps_the_smallest_layout_and_no_performance_without_a_workload():
    smallest = plan(
        "llama-3.1-405b", "fp8", "ml.p5en.48xlarge", max_context=2048, objective=Objective.MIN_GPUS
    )
    assert (smallest.tensor_parallel, smallest.data_parallel) == (4, 2)
    assert smallest.performance is None and smallest.candidates == ()
    with_workload = plan(
        "llama-3.1-405b",
        "fp8",
        "ml.p5en.48xlarge",
        objective="min-gpus",
        workload=WORKLOAD_1K,
        targets=TARGETS_10S_100MS,
    )
    assert (with_workload.tensor_parallel, with_workload.data_parallel) == (4, 2)
    assert with_workload.performance is not None and with_workload.kv_cache_dtype == "auto"
    assert all(
        "min-gpus" in c.loses_because or "misses" in c.loses_because
        for c in with_workload.candidates
    )


def test_candidates_are_ranked_by_tokens_per_dollar():
    chosen = plan("llama-3.3-70b", "fp8", "ml.p5.48xlarge", workload=WORKLOAD_1K)
    assert chosen.performance is not None
    values = [chosen.performance.output_tokens_per_second / chosen.performance.usd_per_hour]
    values += [
        c.performance.output_tokens_per_second / c.performance.usd_per_hour
        for c in chosen.candidates
    ]
    assert values[0] >= max(values[1:]) * 0.97
    assert all(c.loses_because for c in chosen.candidates)


def test_nothing_meets_the_targets_says_so_and_what_would():
    chosen = plan(
        "llama-3.1-405b",
        "fp8",
        "ml.p5en.48xlarge",
        kv_cache_dtype="auto",
        workload=WORKLOAD_1K,
        targets=LatencyTargets(ttft_s=0.01, tpot_ms=5.0),
    )
    assert chosen.performance is not None and not chosen.performance.meets_targets
    assert chosen.performance.misses
    assert chosen.unmet is not None and "would meet them" in chosen.unmet
    assert "relaxed targets" in chosen.unmet
    assert chosen.unmet in chosen.warnings


def test_ttft_grows_with_the_input_and_the_batch():
    base = plan("llama-3.3-70b", "fp8", "ml.p5en.48xlarge", workload=WORKLOAD_1K)
    none = LatencyTargets()
    short = evaluate(base, WORKLOAD_1K, none)
    long = evaluate(base, Workload(input_tokens=8000, output_tokens=1024), none)
    assert long.ttft_s > short.ttft_s
    engines = base.data_parallel  # 70B FP8 on 8 x H200: TP1 x DP8, as AIConfigurator picks
    capped = evaluate(base, Workload(1024, 1024, concurrency=8 * engines), none)
    assert capped.max_num_seqs == 8 and capped.ttft_s < short.ttft_s
    assert capped.batch_limited_by == "concurrency"


def test_a_tight_ttft_target_lowers_the_batch():
    loose = plan("llama-3.3-70b", "fp8", "ml.p5en.48xlarge", workload=Workload(8000, 512))
    tight = plan(
        "llama-3.3-70b",
        "fp8",
        "ml.p5en.48xlarge",
        workload=Workload(8000, 512),
        targets=LatencyTargets(tpot_ms=40.0),
    )
    assert loose.performance is not None and tight.performance is not None
    assert tight.performance.tpot_ms <= 40.0
    assert tight.performance.max_num_seqs < loose.performance.max_num_seqs


def test_disaggregation_follows_aws_guidance():
    long_and_steady = plan(
        "llama-3.3-70b",
        "fp8",
        "ml.p5en.48xlarge",
        workload=Workload(input_tokens=8000, output_tokens=512, request_rate=4.0),
    )
    assert long_and_steady.disaggregation is not None
    assert long_and_steady.disaggregation.pays
    assert long_and_steady.disaggregation.source == DISAGGREGATION_SOURCE
    assert long_and_steady.performance is not None
    assert long_and_steady.performance.replicas_for_request_rate is not None
    short = plan("llama-3.3-70b", "fp8", "ml.p5en.48xlarge", workload=WORKLOAD_1K)
    assert short.disaggregation is not None and not short.disaggregation.pays
    assert "4,000" in short.disaggregation.reason
    moe = plan(
        "gpt-oss-120b", "mxfp4", "ml.p5en.48xlarge", workload=Workload(8000, 512, request_rate=4.0)
    )
    assert moe.disaggregation is not None and not moe.disaggregation.pays
    assert "MoE" in moe.disaggregation.reason


def test_without_a_workload_no_nodes_are_added_and_the_kv_dtype_stays():
    """The reference MoE keeps its plan: 2 x p6-b200, TP8 x DP2, BF16 KV at 128k context."""
    reference = plan("reference-2.4t-a95b", "nvfp4", "ml.p6-b200.48xlarge", max_context=131072)
    assert (reference.nodes, reference.tensor_parallel, reference.data_parallel) == (2, 8, 2)
    assert reference.kv_cache_dtype == "auto"


def test_bad_workload_targets_and_objective_are_configuration_errors():
    with pytest.raises(ConfigurationError) as both:
        Workload(0, 1024, concurrency=4, request_rate=2.0)
    text = str(both.value)
    assert "input_tokens" in text and "not both" in text
    with pytest.raises(ConfigurationError, match="tpot_ms"):
        LatencyTargets(tpot_ms=-1)
    with pytest.raises(ConfigurationError, match="tokens-per-dollar"):
        plan("llama-3.3-70b", "fp8", "ml.p5en.48xlarge", objective="fastest")


def test_a_model_sizing_still_promises_the_fewest_gpus():
    """Inference components compare ``gpus_per_replica`` with their accelerators: the sizing
    keeps the smallest layout (objective min-gpus), not the tokens-per-dollar one."""
    from cdk_llm_serving.planning import ModelSizing

    sized = ModelSizing("llama-3.3-70b", "fp8", max_context=8192).plan_on(
        "ml.p5en.48xlarge", max_nodes=1
    )
    assert sized.tensor_parallel == 1 and sized.performance is None


def test_dense_70b_no_longer_leans_to_tensor_8_for_free():
    """With the all-reduce paid per layer, Llama-3.3-70B FP8 on 8 x H200 at 1k/1k runs
    eight TP1 engines, as AIConfigurator 0.12 picks (bench/aiconfigurator_cases.json,
    llama-3.3-70b-fp8-h200: TP1 x8); TP8 was chosen when its collectives were free."""
    chosen = plan(
        "llama-3.3-70b", "fp8", "ml.p5en.48xlarge", workload=WORKLOAD_1K, targets=TARGETS_10S_100MS
    )
    assert (chosen.tensor_parallel, chosen.data_parallel) == (1, 8)
    assert chosen.performance is not None and chosen.performance.meets_targets
    tp8 = plan(
        "llama-3.3-70b",
        "fp8",
        "ml.p5en.48xlarge",
        tensor_parallel=8,
        kv_cache_dtype=chosen.kv_cache_dtype,
        max_context=2048,
    )
    rival = evaluate(tp8, WORKLOAD_1K, TARGETS_10S_100MS)
    assert rival.output_tokens_per_second < 0.8 * chosen.performance.output_tokens_per_second

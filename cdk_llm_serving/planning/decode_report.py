"""The decode arithmetic of a plan as text and JSON: what a step reads, the curve, speculation."""

from __future__ import annotations

from typing import Any

from .decode import BANDWIDTH_EFFICIENCY, DecodeStep, expert_ranks
from .moe import expected_distinct_experts
from .sizing import Plan
from .speculative import DEFAULTS, SpeculationEstimate, estimate_speculation
from .throughput import ThroughputEstimate


def step_arithmetic(plan: Plan, step: DecodeStep) -> str:
    """One line: bytes read per step, over which bandwidth, and the resulting step time."""
    spec = plan.model_spec
    experts = ""
    if spec.routed_experts_b > 0:
        ranks = expert_ranks(plan)
        tokens = step.batch * ranks
        touched = expected_distinct_experts(spec.experts, spec.experts_per_token, tokens)
        share = f", hit by {ranks} data-parallel ranks, 1/{ranks} read here" if ranks > 1 else ""
        experts = (
            f" + experts {step.expert_bytes / 1e9:,.0f} GB ({touched:,.1f} of {spec.experts} per layer{share}: "
            f"E(1-(1-k/E)^B), k={spec.experts_per_token}, B={tokens})"
        )
    kv_note = ", all TP ranks (MLA latent cache replicated)" if spec.attention == "mla" else ""
    return (
        f"batch {step.batch} x {step.context:,} tokens: dense {step.dense_bytes / 1e9:,.0f} GB{experts} "
        f"+ KV {step.kv_bytes / 1e9:,.1f} GB{kv_note} = {step.bytes_read / 1e9:,.0f} GB "
        f"/ {step.stage_bandwidth / 1e12:,.1f} TB/s (one pipeline stage: {plan.tensor_parallel} GPUs at "
        f"{BANDWIDTH_EFFICIENCY:.0%} of peak) = {step.memory_s * 1e3:,.1f} ms; compute {step.compute_s * 1e3:,.1f} ms; "
        f"all-to-all {step.all_to_all_s * 1e3:,.1f} ms -> {step.tokens_per_second:,.0f} tokens/s per replica"
    )


def curve_text(estimate: ThroughputEstimate) -> str:
    points = ", ".join(
        f"{p.batch}: {p.itl_ms:,.1f} ms / {p.tokens_per_second:,.0f} tok/s" for p in estimate.curve
    )
    return f"batch: ITL / replica tokens/s (prefill included) -> {points}"


def speculation_estimates(plan: Plan, estimate: ThroughputEstimate) -> list[SpeculationEstimate]:
    """Each speculation method the model can use, at the chosen batch (MTP only with MTP layers)."""
    spec = plan.model_spec
    names = [name for name in DEFAULTS if name != "mtp" or spec.mtp_layers > 0]
    batch, context = estimate.chosen.batch, estimate.workload.mean_context
    return [estimate_speculation(plan, DEFAULTS[n], batch=batch, context=context) for n in names]


def speculation_text(estimates: list[SpeculationEstimate]) -> str:
    return "; ".join(
        f"{e.method.name} (k={e.method.draft_tokens}, acceptance {e.method.acceptance_rate:.0%}): "
        f"x{e.speedup:.2f} tokens/s, ITL {e.itl_ms:,.1f} ms"
        for e in estimates
    )


def decode_as_dict(plan: Plan, estimate: ThroughputEstimate) -> dict[str, Any]:
    step = estimate.chosen.step
    return {
        "workload": {"input_tokens": estimate.workload.input_tokens, "output_tokens": estimate.workload.output_tokens},
        "itl_target_ms": estimate.itl_target_ms,
        "meets_target": estimate.meets_target,
        "max_batch_by_kv_cache": estimate.max_batch,
        "batch": step.batch,
        "step": {
            "dense_gb": round(step.dense_bytes / 1e9, 2),
            "expert_gb": round(step.expert_bytes / 1e9, 2),
            "kv_gb": round(step.kv_bytes / 1e9, 2),
            "stage_bandwidth_tbps": round(step.stage_bandwidth / 1e12, 2),
            "memory_ms": round(step.memory_s * 1e3, 2),
            "compute_ms": round(step.compute_s * 1e3, 2),
            "all_to_all_ms": round(step.all_to_all_s * 1e3, 2),
            "bound": step.bound,
        },
        "curve": [
            {"batch": p.batch, "itl_ms": round(p.itl_ms, 2), "replica_tokens_per_second": round(p.tokens_per_second)}
            for p in estimate.curve
        ],
        "speculative": [
            {"method": e.method.name, "draft_tokens": e.method.draft_tokens, "acceptance_rate": e.method.acceptance_rate,
             "speedup": round(e.speedup, 2), "itl_ms": round(e.itl_ms, 2), "source": e.method.source}
            for e in speculation_estimates(plan, estimate)
        ],
    }  # fmt: skip

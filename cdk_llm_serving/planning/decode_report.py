"""The decode arithmetic of a plan as text and JSON: what a step reads, the curve, speculation
(``decode_points``: the objective's model, or the ITL-target curve of a plan without a choice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .decode import BANDWIDTH_EFFICIENCY, DecodeStep, Workload, expert_ranks
from .moe import expected_distinct_experts
from .objective import OperatingPoint, batch_limit, operating_point
from .sizing import Plan
from .speculative import DEFAULTS, SpeculationEstimate, estimate_speculation
from .throughput import ThroughputEstimate, batch_sizes

if TYPE_CHECKING:
    from .catalog import Catalog


def objective_curve(plan: Plan, catalog: Catalog | None = None) -> tuple[OperatingPoint, ...]:
    """``operating_point`` at batches 1, 2, 4, ... up to the plan's batch limit, and at the
    objective's chosen batch (``plan.performance.max_num_seqs``); empty without a choice."""
    perf, workload = plan.performance, plan.workload
    if perf is None:
        return ()
    workload = workload or Workload()
    instance = catalog.get(plan.instance_type) if catalog else plan.instance_spec
    limit, _ = batch_limit(plan, workload, instance)
    batches = sorted({*batch_sizes(limit), perf.max_num_seqs})
    return tuple(operating_point(plan, b, workload, catalog) for b in batches)


def chosen_point(plan: Plan, catalog: Catalog | None = None) -> OperatingPoint | None:
    """The objective's operating point: what ``plan.performance`` reports."""
    if plan.performance is None:
        return None
    workload = plan.workload or Workload()
    return operating_point(plan, plan.performance.max_num_seqs, workload, catalog)


def decode_points(
    plan: Plan, estimate: ThroughputEstimate, catalog: Catalog | None = None
) -> tuple[DecodeStep, tuple[OperatingPoint, ...]]:
    """The step and curve a report shows: the objective's (``chosen_point``, ``objective_curve``:
    the numbers of ``plan.performance``), or without a choice ``estimate``'s ITL-target curve."""
    chosen = chosen_point(plan, catalog)
    if chosen is None:
        return estimate.chosen.step, estimate.curve
    return chosen.step, objective_curve(plan, catalog)


def objective_curve_text(plan: Plan, points: tuple[OperatingPoint, ...]) -> str:
    chosen = plan.performance.max_num_seqs if plan.performance else None
    shown = ", ".join(
        f"{p.batch}{'*' if p.batch == chosen else ''}: {p.ttft_s:,.2f} s / {p.itl_ms:,.1f} ms / "
        f"{p.tpot_ms:,.1f} ms / {p.tokens_per_second:,.0f} tok/s"
        for p in points
    )
    return f"batch per engine: TTFT / ITL / TPOT / tokens/s of all engines (* = chosen) -> {shown}"


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
        f"over {step.stage_bandwidth / 1e12:,.1f} TB/s (one pipeline stage: {plan.tensor_parallel} GPUs at "
        f"{BANDWIDTH_EFFICIENCY:.0%} of peak); step = attention {step.attention_s * 1e3:,.1f} ms "
        f"+ dense GEMMs {step.dense_s * 1e3:,.1f} ms + experts {step.experts_s * 1e3:,.1f} ms "
        f"+ all-reduce {step.all_reduce_s * 1e3:,.1f} ms + all-to-all {step.all_to_all_s * 1e3:,.1f} ms "
        f"= {step.step_s * 1e3:,.1f} ms ({step.bound}-bound) -> {step.tokens_per_second:,.0f} tokens/s per replica"
    )


def curve_text(estimate: ThroughputEstimate) -> str:
    points = ", ".join(
        f"{p.batch}: {p.itl_ms:,.1f} ms / {p.replica_tokens_per_second:,.0f} tok/s"
        for p in estimate.curve
    )
    return f"batch: ITL / replica tokens/s (prefill included) -> {points}"


def speculation_estimates(plan: Plan, batch: int, context: int) -> list[SpeculationEstimate]:
    """Each speculation method the model can use, at ``batch`` (MTP only with MTP layers)."""
    spec = plan.model_spec
    names = [name for name in DEFAULTS if name != "mtp" or spec.mtp_layers > 0]
    return [estimate_speculation(plan, DEFAULTS[n], batch=batch, context=context) for n in names]


def speculation_text(estimates: list[SpeculationEstimate]) -> str:
    return "; ".join(
        f"{e.method.name} (k={e.method.draft_tokens}, acceptance {e.method.acceptance_rate:.0%}): "
        f"x{e.speedup:.2f} tokens/s, ITL {e.itl_ms:,.1f} ms"
        for e in estimates
    )


def _step_dict(step: DecodeStep) -> dict[str, Any]:
    return {
        "dense_gb": round(step.dense_bytes / 1e9, 2),
        "expert_gb": round(step.expert_bytes / 1e9, 2),
        "kv_gb": round(step.kv_bytes / 1e9, 2),
        "stage_bandwidth_tbps": round(step.stage_bandwidth / 1e12, 2),
        "memory_ms": round(step.memory_s * 1e3, 2),
        "compute_ms": round(step.compute_s * 1e3, 2),
        "attention_ms": round(step.attention_s * 1e3, 2),
        "dense_gemm_ms": round(step.dense_s * 1e3, 2),
        "expert_gemm_ms": round(step.experts_s * 1e3, 2),
        "all_reduce_ms": round(step.all_reduce_s * 1e3, 2),
        "all_to_all_ms": round(step.all_to_all_s * 1e3, 2),
        "step_ms": round(step.step_s * 1e3, 2),
        "bound": step.bound,
    }


def _point_dict(point: OperatingPoint) -> dict[str, Any]:
    return {
        "batch": point.batch,
        "ttft_s": round(point.ttft_s, 3),
        "itl_ms": round(point.itl_ms, 2),
        "tpot_ms": round(point.tpot_ms, 2),
        "tokens_per_second": round(point.tokens_per_second, 1),
        "replica_tokens_per_second": round(point.replica_tokens_per_second),
    }


def decode_as_dict(
    plan: Plan, estimate: ThroughputEstimate, catalog: Catalog | None = None
) -> dict[str, Any]:
    """``decode_points`` as JSON; the ``itl_target_ms`` check is ``estimate``'s."""
    step, points = decode_points(plan, estimate, catalog)
    return {
        "workload": {"input_tokens": estimate.workload.input_tokens, "output_tokens": estimate.workload.output_tokens},
        "itl_target_ms": estimate.itl_target_ms,
        "meets_target": estimate.meets_target,
        "max_batch_by_kv_cache": estimate.max_batch,
        "batch": step.batch,
        "step": _step_dict(step),
        "curve": [_point_dict(p) for p in points],
        "speculative": [
            {"method": e.method.name, "draft_tokens": e.method.draft_tokens, "acceptance_rate": e.method.acceptance_rate,
             "speedup": round(e.speedup, 2), "itl_ms": round(e.itl_ms, 2), "source": e.method.source}
            for e in speculation_estimates(plan, step.batch, step.context)
        ],
    }  # fmt: skip

"""A plan as a readable table or as JSON (what ``python -m cdk_llm_serving plan`` prints)."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from .catalog import GIB, Catalog
from .cold_start import ColdStart
from .cost import CostEstimate
from .decode_report import (
    curve_text,
    decode_as_dict,
    decode_points,
    objective_curve_text,
    speculation_estimates,
    speculation_text,
    step_arithmetic,
)
from .objective import Performance, layout_text
from .published import published_effects
from .sizing import Plan


def objective_cost(plan: Plan, cost: CostEstimate) -> CostEstimate:
    """The cost at the objective's batch (``plan.performance``) instead of the ITL curve's."""
    perf = plan.performance
    if perf is None or perf.usd_per_million_output_tokens is None:
        return cost
    return replace(
        cost,
        output_tokens_per_second=perf.output_tokens_per_second,
        price_per_million_output_tokens=perf.usd_per_million_output_tokens,
        throughput_source=(
            f"objective {plan.objective}: batch {perf.max_num_seqs} per engine x {perf.engines} "
            f"engine(s), {perf.bound}-bound, TTFT {perf.ttft_s:.2f} s, ITL {perf.itl_ms:.1f} ms, "
            f"TPOT {perf.tpot_ms:.1f} ms (batch limited by {perf.batch_limited_by}), prefill included"
        ),
    )


def objective_as_dict(plan: Plan) -> dict[str, Any] | None:
    """The objective's choice, its rivals and the disaggregation advice, for ``--json``."""
    if plan.performance is None:
        return None
    return {
        "objective": str(plan.objective),
        "workload": None if plan.workload is None else asdict(plan.workload),
        "targets": plan.targets.as_dict() if plan.targets else None,
        "performance": plan.performance.as_dict(),
        "candidates": [candidate.as_dict() for candidate in plan.candidates],
        "unmet": plan.unmet,
        "disaggregation": plan.disaggregation.as_dict() if plan.disaggregation else None,
    }


LAYOUT_HEADER = (
    "layout",
    "batch",
    "tokens/s",
    "per GPU",
    "TTFT s",
    "ITL ms",
    "TPOT ms",
    "$/M tok",
    "why it loses",
)


def _layout_row(text: str, perf: Performance, why: str) -> tuple[str, ...]:
    usd = perf.usd_per_million_output_tokens
    return (
        text,
        str(perf.max_num_seqs),
        f"{perf.output_tokens_per_second:,.0f}",
        f"{perf.output_tokens_per_second_per_gpu:,.0f}",
        f"{perf.ttft_s:.2f}",
        f"{perf.itl_ms:.1f}",
        f"{perf.tpot_ms:.1f}",
        "-" if usd is None else f"{usd:,.3f}",
        why,
    )


def layouts_table(plan: Plan) -> str:
    """The chosen layout and the next best side by side (``plan`` prints it under the plan)."""
    perf = plan.performance
    if perf is None:
        return ""
    rows = [LAYOUT_HEADER, _layout_row(layout_text(plan) + " *", perf, "chosen")]
    rows += [_layout_row(c.layout_text, c.performance, c.loses_because) for c in plan.candidates]
    widths = [max(len(row[i]) for row in rows) for i in range(len(LAYOUT_HEADER) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True))
        + "  "
        + row[-1]
        for row in rows
    )


def plan_as_dict(plan: Plan, cold_start: ColdStart, cost: CostEstimate) -> dict[str, Any]:
    return {
        "model": plan.model,
        "weight_format": plan.weight_format,
        "instance_type": plan.instance_type,
        "max_context": plan.max_context,
        "concurrency": plan.concurrency,
        "gpu_memory_utilization": plan.gpu_memory_utilization,
        "kv_cache_dtype": plan.kv_cache_dtype,
        "weight_gib": round(plan.weight_bytes / GIB, 2),
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "nodes": plan.nodes,
        "gpus_per_replica": plan.gpus_per_replica,
        "tensor_parallel_size": plan.tensor_parallel,
        "pipeline_parallel_size": plan.pipeline_parallel,
        "data_parallel_size": plan.data_parallel,
        "enable_expert_parallel": plan.expert_parallel,
        "weight_gib_per_gpu": round(plan.weight_bytes_per_gpu / GIB, 2),
        "kv_cache_gib_per_gpu": round(plan.kv_cache_bytes_per_gpu / GIB, 2),
        "kv_tokens_per_replica": plan.kv_tokens_per_replica,
        "sequences_at_max_context": plan.sequences_at_max_context,
        "cold_start": {
            "path": cold_start.path,
            "download_seconds": round(cold_start.download_seconds),
            "load_seconds": round(cold_start.load_seconds),
            "engine_start_seconds": round(cold_start.engine_start_seconds),
            "total_seconds": round(cold_start.total_seconds),
            "download_timeout_seconds": cold_start.download_timeout_seconds,
            "startup_timeout_seconds": cold_start.startup_timeout_seconds,
        },
        "cost": {
            "fleet_price_per_hour": round(cost.fleet_price_per_hour, 2),
            "output_tokens_per_second": round(cost.output_tokens_per_second),
            "price_per_million_output_tokens": round(cost.price_per_million_output_tokens, 3),
            "throughput_source": cost.throughput_source,
            "price_source": cost.price_source,
        },
        "decode": decode_as_dict(plan, cost.estimate) if cost.estimate is not None else None,
        "layout_choice": objective_as_dict(plan),
        # The inference operator's features: AWS's published figures, not this model's.
        "published_effects": [effect.as_dict() for effect in published_effects(plan)],
        "warnings": list(plan.warnings),
    }


def plan_as_table(
    plan: Plan, cold_start: ColdStart, cost: CostEstimate, catalog: Catalog | None = None
) -> str:
    rows = [
        *_layout_rows(plan, catalog),
        *_cost_rows(plan, cold_start, cost, catalog),
        *_choice_rows(plan),
        *[("warning", warning) for warning in plan.warnings],
    ]
    width = max(len(label) for label, _ in rows)
    text = "\n".join(f"{label:<{width}}  {value}" for label, value in rows)
    layouts = layouts_table(plan)
    if layouts:
        text += f"\n\nlayouts ({plan.objective}; * = chosen)\n{layouts}"
    return text


def _layout_rows(plan: Plan, catalog: Catalog | None) -> list[tuple[str, str]]:
    """What is laid out where: model, instance, weights, KV cache, nodes, parallelism."""
    instance = catalog.get(plan.instance_type) if catalog else plan.instance_spec
    return [
        ("model", f"{plan.model} in {plan.weight_format}"),
        (
            "instance",
            f"{plan.instance_type}: {instance.gpus} x {instance.gpu.name} {instance.gpu.memory_gib:g} GiB, {instance.architecture}",
        ),
        (
            "weights",
            f"{plan.weight_bytes / GIB:,.1f} GiB total, {plan.weight_bytes_per_gpu / GIB:,.1f} GiB per GPU",
        ),
        (
            "KV cache",
            f"{plan.kv_bytes_per_token / 1024:,.1f} KiB per token ({plan.kv_cache_dtype}), {plan.kv_cache_bytes_per_gpu / GIB:,.1f} GiB per GPU",
        ),
        ("nodes", f"{plan.nodes} ({_replicas_text(plan)})"),
        (
            "parallelism",
            f"tensor {plan.tensor_parallel}, pipeline {plan.pipeline_parallel}, data {plan.data_parallel}, expert {'on' if plan.expert_parallel else 'off'}",
        ),
        ("memory budget", f"gpu_memory_utilization {plan.gpu_memory_utilization}"),
        (
            "capacity",
            f"{plan.kv_tokens_per_replica:,} KV tokens per replica; {plan.sequences_at_max_context} sequences of {plan.max_context:,} tokens at once",
        ),
    ]


def _cost_rows(
    plan: Plan, cold_start: ColdStart, cost: CostEstimate, catalog: Catalog | None
) -> list[tuple[str, str]]:
    """Cold start, timeouts, cost, throughput and the decode arithmetic behind it."""
    return [
        (
            "cold start",
            f"~{cold_start.total_seconds / 60:.1f} min via {cold_start.path} (download {cold_start.download_seconds:.0f} s, load {cold_start.load_seconds:.0f} s, engine {cold_start.engine_start_seconds:.0f} s)",
        ),
        (
            "timeouts",
            f"download {cold_start.download_timeout_seconds} s, startup {cold_start.startup_timeout_seconds} s (x{cold_start.safety_factor:g})",
        ),
        (
            "cost",
            f"${cost.fleet_price_per_hour:,.2f}/h; ~{cost.output_tokens_per_second:,.0f} output tokens/s; ${cost.price_per_million_output_tokens:,.3f} per million output tokens",
        ),
        ("throughput", cost.throughput_source),
        *_decode_rows(plan, cost, catalog),
        ("prices", cost.price_source),
    ]


#: Labels of the published effects, no wider than the table's others.
_EFFECT_LABELS = {
    "tiered_kv_cache_and_intelligent_routing": "cache+routing",
    "prefill_decode_disaggregation": "P/D effect",
}


def _choice_rows(plan: Plan) -> list[tuple[str, str]]:
    """The targets, the disaggregation advice and what AWS publishes about the features."""
    rows = []
    if plan.targets is not None and plan.targets.any:
        shown = [f"{k} {v:g}" for k, v in plan.targets.as_dict().items() if v is not None]
        rows.append(("targets", ", ".join(shown)))
    if plan.disaggregation is not None:
        verdict = "pays" if plan.disaggregation.pays else "does not pay"
        reason = f"{plan.disaggregation.reason} ({plan.disaggregation.source})"
        rows.append(("disaggregate", f"{verdict}: {reason}"))
    return rows + [(_EFFECT_LABELS[e.feature], e.text()) for e in published_effects(plan)]


def _replicas_text(plan: Plan) -> str:
    """GPUs per replica (one engine), and how many data-parallel replicas the plan runs."""
    text = f"{plan.gpus_per_replica} GPUs per replica"
    if plan.data_parallel > 1:
        text += f" x {plan.data_parallel} data-parallel replicas"
    return text


def _decode_rows(
    plan: Plan, cost: CostEstimate, catalog: Catalog | None = None
) -> list[tuple[str, str]]:
    """The decode step and curve (``decode_report.decode_points``) and speculation's effect."""
    if cost.estimate is None:
        return []
    step, points = decode_points(plan, cost.estimate, catalog)
    if plan.performance is None:
        curve = curve_text(cost.estimate)
    else:
        curve = objective_curve_text(plan, points)
    speculation = speculation_text(speculation_estimates(plan, step.batch, step.context))
    return [
        ("decode step", step_arithmetic(plan, step)),
        ("curve", curve),
        ("speculative", speculation + " (not in the cost above)"),
    ]

"""What a deployment costs per hour and per million output tokens::

    $ per M tokens = fleet $ per hour / (tokens_per_s x 3600) x 1e6

Throughput comes from a measurement (``output_tokens_per_second``), a fixed decode batch
(``batch``, no prefill) or the inter-token-latency curve (``throughput.estimate_throughput``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import Catalog, default_catalog
from .decode import DEFAULT_ITL_TARGET_MS, Workload, decode_step
from .models import ModelSpec, WeightFormat
from .sizing import Plan
from .throughput import ThroughputEstimate, estimate_throughput


@dataclass(frozen=True)
class CostEstimate:
    fleet_price_per_hour: float
    output_tokens_per_second: float
    price_per_million_output_tokens: float
    throughput_source: str
    price_source: str
    estimate: ThroughputEstimate | None = None


def active_weight_bytes(model: ModelSpec, fmt: WeightFormat) -> float:
    """Bytes read per decode step: the active parameters, high-precision ones at BF16."""
    return fmt.stored_bytes(model.active_params_b, model.high_precision_params_b)


def roofline_tokens_per_second(
    plan: Plan, *, batch: int, context_tokens: int, catalog: Catalog | None = None
) -> float:
    """Decode-only tokens/s of all data-parallel replicas at a fixed batch and context."""
    step = decode_step(plan, batch, context_tokens, catalog=catalog)
    return step.tokens_per_second * plan.data_parallel


def estimate_cost(
    plan: Plan,
    *,
    replicas: int = 1,
    output_tokens_per_second: float | None = None,
    batch: int | None = None,
    context_tokens: int | None = None,
    workload: Workload | None = None,
    itl_target_ms: float = DEFAULT_ITL_TARGET_MS,
    catalog: Catalog | None = None,
) -> CostEstimate:
    """Fleet price and $/M output tokens; give a measured throughput to skip the model."""
    catalog = catalog or default_catalog()
    instance = catalog.get(plan.instance_type)
    price = instance.price_per_hour * plan.nodes * replicas
    estimate = None
    if output_tokens_per_second is not None:
        throughput, source = output_tokens_per_second, "given"
    elif batch is not None:
        context = min(context_tokens or 4096, plan.max_context)
        throughput = roofline_tokens_per_second(
            plan, batch=batch, context_tokens=context, catalog=catalog
        )
        throughput *= replicas
        source = f"decode model at a fixed batch {batch}, {context} tokens of context (no prefill)"
    else:
        estimate = estimate_throughput(plan, workload, itl_target_ms=itl_target_ms, catalog=catalog)
        throughput = estimate.tokens_per_second * replicas
        source = _estimate_source(estimate)
    per_million = price / (throughput * 3600) * 1e6
    estimated = " (estimated price)" if instance.price_estimated else ""
    return CostEstimate(
        price, throughput, per_million, source, f"{catalog.price_source}{estimated}", estimate
    )


def _estimate_source(estimate: ThroughputEstimate) -> str:
    w, chosen = estimate.workload, estimate.chosen
    target = "meets" if estimate.meets_target else "misses even at batch 1"
    return (
        f"decode model: batch {chosen.batch} per replica ({target} the {estimate.itl_target_ms:g} ms "
        f"inter-token target, {chosen.itl_ms:.1f} ms, {chosen.step.bound}-bound), {w.input_tokens} in / "
        f"{w.output_tokens} out tokens per request, prefill included"
    )

"""What a deployment costs per hour and per million output tokens.

Decode throughput, when not measured, comes from a memory-bandwidth roofline: each
decode step of a replica reads the active parameters once (shared by the whole
batch) plus every sequence's KV cache, so

    step_seconds   = (active_weight_bytes + batch x context x kv_bytes_per_token)
                     / (GPUs per replica x GPU bandwidth x efficiency)
    tokens_per_s   = batch / step_seconds x data_parallel replicas
    $ per M tokens = fleet $ per hour / (tokens_per_s x 3600) x 1e6

``efficiency`` (default 0.5) is the share of peak bandwidth real kernels reach. The
roofline ignores compute limits, MoE expert imbalance and speculative decoding:
treat it as an upper bound on throughput, a lower bound on cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import Catalog, default_catalog
from .models import ModelSpec, WeightFormat, preset, weight_format
from .sizing import Plan

DEFAULT_BANDWIDTH_EFFICIENCY = 0.5


@dataclass(frozen=True)
class CostEstimate:
    fleet_price_per_hour: float
    output_tokens_per_second: float
    price_per_million_output_tokens: float
    throughput_source: str
    price_source: str


def active_weight_bytes(model: ModelSpec, fmt: WeightFormat) -> float:
    """Bytes read per decode step: the active parameters, high-precision ones at BF16."""
    high = min(model.high_precision_params_b, model.active_params_b)
    return (model.active_params_b - high) * 1e9 * fmt.bytes_per_param + high * 1e9 * max(
        2.0, fmt.bytes_per_param
    )


def roofline_tokens_per_second(
    plan: Plan,
    *,
    batch: int,
    context_tokens: int,
    efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY,
    catalog: Catalog | None = None,
) -> float:
    instance = (catalog or default_catalog()).get(plan.instance_type)
    spec = plan.spec or preset(plan.model)
    fmt = plan.fmt or weight_format(plan.weight_format)
    bandwidth = plan.gpus_per_replica * instance.gpu.bandwidth_tbps * 1e12 * efficiency
    step_bytes = active_weight_bytes(spec, fmt) + batch * context_tokens * plan.kv_bytes_per_token
    return batch / (step_bytes / bandwidth) * plan.data_parallel


def estimate_cost(
    plan: Plan,
    *,
    replicas: int = 1,
    output_tokens_per_second: float | None = None,
    batch: int = 32,
    context_tokens: int = 4096,
    catalog: Catalog | None = None,
) -> CostEstimate:
    """Fleet price and $/M output tokens; give a measured throughput to skip the roofline."""
    catalog = catalog or default_catalog()
    instance = catalog.get(plan.instance_type)
    price = instance.price_per_hour * plan.nodes * replicas
    if output_tokens_per_second is None:
        throughput = (
            roofline_tokens_per_second(
                plan,
                batch=batch,
                context_tokens=min(context_tokens, plan.max_context),
                catalog=catalog,
            )
            * replicas
        )
        source = f"roofline estimate (batch {batch}, {min(context_tokens, plan.max_context)} tokens of context, {DEFAULT_BANDWIDTH_EFFICIENCY:.0%} of peak bandwidth)"
    else:
        throughput = output_tokens_per_second
        source = "given"
    per_million = price / (throughput * 3600) * 1e6
    estimated = " (estimated price)" if instance.price_estimated else ""
    return CostEstimate(
        price, throughput, per_million, source, f"{catalog.price_source}{estimated}"
    )

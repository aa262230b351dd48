"""The throughput/latency curve of a plan over batch sizes, and the batch that meets an ITL target.

Each point is one replica holding ``batch`` requests of a ``Workload`` (see ``decode.py``):
``itl_ms`` is the decode step, ``tokens_per_second`` the replica's output tokens per second
with prefill time included (``B·O / (O·step + B·prefill)``). Batches run from 1 up to what the
plan's KV cache holds at the workload's peak context (``kv_tokens_per_replica //
(input + output)``), capped at ``decode.MAX_BATCH``. The chosen batch is the largest whose
ITL meets the target; when even batch 1 misses it, batch 1 is chosen and ``meets_target``
is false.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from ..errors import DEPRECATED_REMOVED_IN, renamed_arguments
from .catalog import Catalog, default_catalog
from .decode import (
    DEFAULT_ITL_TARGET_MS,
    MAX_BATCH,
    DecodeStep,
    Workload,
)
from .instance_types import InstanceType
from .models import ModelSpec, WeightFormat
from .objective import OperatingPoint, operating_point
from .sizing import Plan, PlanningError, plan, tensor_parallel_options


@dataclass(frozen=True)
class CurvePoint:
    """One point of the curve: ``objective.operating_point`` (the model behind
    ``Plan.performance``) at a batch, read per replica."""

    point: OperatingPoint

    @property
    def step(self) -> DecodeStep:
        return self.point.step

    @property
    def prefill_s(self) -> float:
        return self.point.prefill_s

    @property
    def batch(self) -> int:
        return self.point.batch

    @property
    def itl_ms(self) -> float:
        return self.point.itl_ms

    @property
    def tpot_ms(self) -> float:
        return self.point.tpot_ms

    @property
    def ttft_s(self) -> float:
        return self.point.ttft_s

    @property
    def tokens_per_second(self) -> float:
        """Replica output tokens/s, prefill included."""
        return self.point.replica_tokens_per_second


@dataclass(frozen=True)
class ThroughputEstimate:
    workload: Workload
    itl_target_ms: float
    max_batch: int
    curve: tuple[CurvePoint, ...]
    chosen: CurvePoint
    meets_target: bool
    data_parallel: int

    @property
    def tokens_per_second(self) -> float:
        """Output tokens/s of all the plan's data-parallel replicas at the chosen batch."""
        return self.chosen.tokens_per_second * self.data_parallel


def max_batch(plan: Plan, workload: Workload) -> int:
    """Most sequences of the workload's peak context one replica's KV cache holds."""
    return max(1, min(MAX_BATCH, plan.kv_tokens_per_replica // workload.peak_context))


def batch_sizes(limit: int) -> list[int]:
    """Powers of two up to ``limit``, and ``limit`` itself."""
    sizes, size = [], 1
    while size < limit:
        sizes.append(size)
        size *= 2
    return [*sizes, limit]


def curve_point(plan: Plan, batch: int, workload: Workload, catalog: Catalog | None) -> CurvePoint:
    return CurvePoint(operating_point(plan, batch, workload, catalog))


def estimate_throughput(
    plan: Plan,
    workload: Workload | None = None,
    *,
    itl_target_ms: float = DEFAULT_ITL_TARGET_MS,
    catalog: Catalog | None = None,
) -> ThroughputEstimate:
    """The curve over batch sizes and the batch that meets ``itl_target_ms``."""
    workload = workload or Workload()
    limit = max_batch(plan, workload)
    curve = tuple(curve_point(plan, b, workload, catalog) for b in batch_sizes(limit))
    meeting = [point for point in curve if point.itl_ms <= itl_target_ms]
    chosen = meeting[-1] if meeting else curve[0]
    return ThroughputEstimate(
        workload=workload,
        itl_target_ms=itl_target_ms,
        max_batch=limit,
        curve=curve,
        chosen=chosen,
        meets_target=bool(meeting),
        data_parallel=plan.data_parallel,
    )


def saturated_tokens_per_second(
    plan: Plan, workload: Workload, catalog: Catalog | None = None, *, batch: int | None = None
) -> float:
    """Replica tokens/s at ``batch`` (default: the most the KV cache holds): a max-load figure."""
    size = batch if batch is not None else max_batch(plan, workload)
    return curve_point(plan, size, workload, catalog).tokens_per_second


@renamed_arguments("plan_for_throughput", quantization="weight_format")
def plan_for_throughput(
    model: ModelSpec | str,
    weight_format: WeightFormat | str,
    instance_type: InstanceType | str,
    *,
    workload: Workload | None = None,
    itl_target_ms: float = DEFAULT_ITL_TARGET_MS,
    catalog: Catalog | None = None,
    **plan_options: Any,
) -> tuple[Plan, ThroughputEstimate]:
    """The tensor-parallel size whose layout serves the most tokens/s per node at the ITL target.

    ``plan()`` picks the smallest tensor-parallel size that fits the weights, which can leave a
    replica room for only a few sequences; this tries every size and keeps the best (layouts
    meeting the target first, then tokens/s per node). Raises ``plan()``'s ``PlanningError``
    when no size fits.

    :param weight_format: a ``WeightFormat`` or its name, as for ``plan()``.
    :param instance_type: an ``InstanceType`` or its name, as for ``plan()``.
    ``quantization=`` is the deprecated name of ``weight_format`` (until 0.3.0; warns).

    Deprecated (removed in 0.3.0): ``plan(..., workload=, targets=LatencyTargets(itl_ms=))``
    searches every layout, batch and KV dtype for the most tokens per dollar.
    """
    warnings.warn(
        "plan_for_throughput is deprecated; use plan(..., workload=, targets=LatencyTargets(itl_ms=...)) "
        f"(removed in {DEPRECATED_REMOVED_IN})",
        DeprecationWarning,
        stacklevel=2,
    )
    fmt = weight_format
    objective = plan_options.pop("objective", "min-gpus")
    spec = ModelSpec.of(model)
    gpus = (catalog or default_catalog()).get(str(instance_type)).gpus
    best: tuple[tuple[bool, float], Plan, ThroughputEstimate] | None = None
    for tp in tensor_parallel_options(spec, gpus):
        try:
            laid_out = plan(
                spec,
                fmt,
                instance_type,
                catalog=catalog,
                tensor_parallel=tp,
                objective=objective,
                **plan_options,
            )
        except PlanningError:
            continue
        estimate = estimate_throughput(
            laid_out, workload, itl_target_ms=itl_target_ms, catalog=catalog
        )
        score = (estimate.meets_target, estimate.tokens_per_second / laid_out.nodes)
        if best is None or score > best[0]:
            best = (score, laid_out, estimate)
    if best is None:
        laid_out = plan(
            spec, fmt, instance_type, catalog=catalog, objective=objective, **plan_options
        )  # raises
        return laid_out, estimate_throughput(
            laid_out, workload, itl_target_ms=itl_target_ms, catalog=catalog
        )
    return best[1], best[2]

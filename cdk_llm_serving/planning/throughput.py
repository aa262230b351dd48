"""The inter-token-latency curve of a plan over batch sizes, and the batch that meets a target.

Points are ``objective.operating_point`` at powers of two up to what the KV cache holds (at
most ``decode.MAX_BATCH``); the chosen batch is the largest meeting the target, else batch 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import Catalog
from .decode import DEFAULT_ITL_TARGET_MS, MAX_BATCH, Workload
from .objective import OperatingPoint, operating_point
from .sizing import Plan


@dataclass(frozen=True)
class ThroughputEstimate:
    workload: Workload
    itl_target_ms: float
    max_batch: int
    curve: tuple[OperatingPoint, ...]
    chosen: OperatingPoint
    meets_target: bool

    @property
    def tokens_per_second(self) -> float:
        """Output tokens/s of all the plan's data-parallel replicas at the chosen batch."""
        return self.chosen.replica_tokens_per_second * self.chosen.engines


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
    curve = tuple(operating_point(plan, b, workload, catalog) for b in batch_sizes(limit))
    meeting = [point for point in curve if point.itl_ms <= itl_target_ms]
    chosen = meeting[-1] if meeting else curve[0]
    return ThroughputEstimate(workload, itl_target_ms, limit, curve, chosen, bool(meeting))


def saturated_tokens_per_second(
    plan: Plan, workload: Workload, catalog: Catalog | None = None, *, batch: int | None = None
) -> float:
    """Replica tokens/s at ``batch`` (default: the most the KV cache holds): a max-load figure."""
    size = batch if batch is not None else max_batch(plan, workload)
    return operating_point(plan, size, workload, catalog).replica_tokens_per_second

"""The planner's objective: among every layout that fits, the one with the most output tokens
per dollar that meets the latency targets (``plan(..., workload=, targets=, objective=)``).

What is searched (layouts, KV-cache dtype, batch per engine), the latency model (ITL, TPOT,
TTFT at a batch) and how layouts are ranked: docs/design/planner.md, "Objective".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from ..errors import Problems
from . import sizing
from .catalog import GIB, Catalog, InstanceSpec
from .decode import MAX_BATCH, DecodeStep, Workload, decode_step, positive_number
from .prefill import (
    disaggregation_for,
    max_num_batched_tokens,
    prefill_seconds,
    time_to_first_token,
)
from .sizing import Objective as Objective  # re-exported: the objective is chosen here
from .sizing import Plan, _candidate_layouts, _fit_layout

if TYPE_CHECKING:
    from .models import ModelSpec, WeightFormat
    from .sizing import _Request

#: Candidates kept besides the chosen layout.
CANDIDATES_SHOWN = 4
#: A layout of fewer nodes within this share of the best tokens per dollar is chosen instead.
#: ASSUMED margin, about the decode model's resolution between neighbouring layouts.
NODE_TOLERANCE = 0.03
#: GPU compute capability from which an FP8 KV cache is offered: FP8 tensor cores (Ada 8.9,
#: Hopper 9.0, Blackwell 10.x). ASSUMED: not on Ampere, where attention dequantizes it
#: (vLLM docs/features/quantization/quantized_kvcache.md).
FP8_KV_MIN_CAPABILITY = (8, 9)
#: The latency targets: field, label, unit, and the decimals a missed value is shown with.
TARGETS = (("ttft_s", "TTFT", "s", 2), ("itl_ms", "ITL", "ms", 1), ("tpot_ms", "TPOT", "ms", 1))


@dataclass(frozen=True)
class LatencyTargets:
    """Latency a layout must meet; ``None`` = no target.

    :param ttft_s: time to first token, seconds.
    :param itl_ms: inter-token latency (the decode step), milliseconds.
    :param tpot_ms: time per output token, ``(e2e - TTFT) / (output - 1)``, milliseconds.
    """

    ttft_s: float | None = None
    itl_ms: float | None = None
    tpot_ms: float | None = None

    def __post_init__(self) -> None:
        problems = Problems("LatencyTargets")
        for name, *_ in TARGETS:
            value = getattr(self, name)
            if value is not None and not positive_number(value):
                problems.add(name, value, "a positive number, or None for no target")
        problems.raise_if_any()

    @property
    def any(self) -> bool:
        return any(getattr(self, name) is not None for name, *_ in TARGETS)

    def missed(self, latency: OperatingPoint | Performance) -> list[tuple[str, str, str, int]]:
        """The ``TARGETS`` that ``latency`` (a point or a performance) misses."""
        return [
            entry
            for entry in TARGETS
            if (target := getattr(self, entry[0])) is not None
            and getattr(latency, entry[0]) > target
        ]

    def misses(self, latency: OperatingPoint | Performance) -> tuple[str, ...]:
        """The targets missed, as text (``TPOT 140.0 ms > 100 ms``)."""
        return tuple(
            f"{label} {getattr(latency, name):.{digits}f} {unit} > {getattr(self, name):g} {unit}"
            for name, label, unit, digits in self.missed(latency)
        )

    def as_dict(self) -> dict[str, float | None]:
        return asdict(self)


@dataclass(frozen=True)
class Performance:
    """What a layout serves at its chosen batch (``max_num_seqs``) for a workload."""

    #: Sequences per engine (vLLM ``--max-num-seqs``).
    max_num_seqs: int
    #: Engines (data-parallel ranks) of the plan.
    engines: int
    gpus: int
    nodes: int
    #: Output tokens/s of all the plan's GPUs together.
    output_tokens_per_second: float
    ttft_s: float
    itl_ms: float
    tpot_ms: float
    #: What bounds the decode step: ``memory``, ``compute``, ``all-reduce`` or ``all-to-all``.
    bound: str
    #: What stopped the batch growing: ``KV cache``, ``max_num_seqs``, ``concurrency`` or a target.
    batch_limited_by: str
    meets_targets: bool
    misses: tuple[str, ...]
    usd_per_hour: float | None
    #: Copies of the plan a ``request_rate`` workload needs; ``None`` without a rate.
    replicas_for_request_rate: int | None = None

    @property
    def output_tokens_per_second_per_gpu(self) -> float:
        return self.output_tokens_per_second / self.gpus

    @property
    def output_tokens_per_second_per_node(self) -> float:
        return self.output_tokens_per_second / self.nodes

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        if self.usd_per_hour is None:
            return None
        return self.usd_per_hour / (self.output_tokens_per_second * 3600) * 1e6

    def as_dict(self) -> dict[str, object]:
        usd = self.usd_per_million_output_tokens
        return {
            "max_num_seqs": self.max_num_seqs,
            "engines": self.engines,
            "gpus": self.gpus,
            "output_tokens_per_second": round(self.output_tokens_per_second, 1),
            "output_tokens_per_second_per_gpu": round(self.output_tokens_per_second_per_gpu, 1),
            "ttft_s": round(self.ttft_s, 3),
            "itl_ms": round(self.itl_ms, 2),
            "tpot_ms": round(self.tpot_ms, 2),
            "bound": self.bound,
            "batch_limited_by": self.batch_limited_by,
            "meets_targets": self.meets_targets,
            "misses": list(self.misses),
            "usd_per_hour": None if self.usd_per_hour is None else round(self.usd_per_hour, 2),
            "usd_per_million_output_tokens": None if usd is None else round(usd, 4),
            "replicas_for_request_rate": self.replicas_for_request_rate,
        }


@dataclass(frozen=True)
class Candidate:
    """A layout that fits but is not chosen (``plan``), its performance and why it loses."""

    plan: Plan
    performance: Performance
    loses_because: str

    @property
    def layout_text(self) -> str:
        return layout_text(self.plan)

    def as_dict(self) -> dict[str, object]:
        plan = self.plan
        return {
            "nodes": plan.nodes,
            "tensor_parallel_size": plan.tensor_parallel,
            "pipeline_parallel_size": plan.pipeline_parallel,
            "data_parallel_size": plan.data_parallel,
            "enable_expert_parallel": plan.expert_parallel,
            "kv_cache_dtype": plan.kv_cache_dtype,
            "performance": self.performance.as_dict(),
            "loses_because": self.loses_because,
        }


def layout_text(plan: Plan) -> str:
    """``TP4xDP2 EP on 2 nodes fp8-KV``: the plan's parallelism, short."""
    parts = [f"TP{plan.tensor_parallel}"]
    if plan.pipeline_parallel > 1:
        parts.append(f"PP{plan.pipeline_parallel}")
    if plan.data_parallel > 1:
        parts.append(f"DP{plan.data_parallel}")
    text = "x".join(parts) + (" EP" if plan.expert_parallel else "")
    if plan.nodes > 1:
        text += f" on {plan.nodes} nodes"
    return text + (" fp8-KV" if plan.kv_cache_dtype == "fp8" else "")


def default_max_num_seqs(instance: InstanceSpec) -> int:
    """vLLM's default ``--max-num-seqs`` for the OpenAI server (``Gpu.large_batch_defaults``)."""
    return MAX_BATCH if instance.gpu.large_batch_defaults else 256


def kv_dtypes_for(instance: InstanceSpec) -> tuple[str, ...]:
    """KV-cache dtypes the search tries when the caller left it open."""
    major, _, minor = instance.gpu.compute_capability.partition(".")
    capability = (int(major), int(minor or 0))
    return ("auto", "fp8") if capability >= FP8_KV_MIN_CAPABILITY else ("auto",)


@dataclass(frozen=True)
class OperatingPoint:
    """One engine of a plan holding ``batch`` requests of a workload: the one model behind
    ``Plan.performance``, the plan table's decode rows and ``estimate_throughput``'s curve."""

    batch: int
    #: Output tokens/s of all the plan's engines at this batch.
    tokens_per_second: float
    ttft_s: float
    itl_ms: float
    tpot_ms: float
    bound: str
    #: The decode step at this batch (``decode.decode_step``).
    step: DecodeStep
    #: Prefill of one request (``prefill.prefill_seconds``).
    prefill_s: float
    engines: int = 1

    @property
    def replica_tokens_per_second(self) -> float:
        """Output tokens/s of one engine (replica)."""
        return self.tokens_per_second / self.engines


def operating_point(
    plan: Plan, batch: int, workload: Workload, catalog: Catalog | None = None
) -> OperatingPoint:
    """TTFT, ITL, TPOT and tokens/s of ``plan`` at ``batch`` per engine:
    ITL = step, TPOT = (cycle - TTFT) / (O - 1), cycle = O·step + B·prefill."""
    step = decode_step(plan, batch, workload.mean_context, catalog=catalog)
    prefill = prefill_seconds(plan, workload.input_tokens, catalog)
    cycle = workload.output_tokens * step.step_s + batch * prefill
    budget = max_num_batched_tokens(
        plan.instance_spec if catalog is None else catalog.get(plan.instance_type)
    )
    ttft = time_to_first_token(prefill, step.step_s, batch, cycle, workload.input_tokens, budget)
    tpot = (cycle - ttft) / max(1, workload.output_tokens - 1)
    return OperatingPoint(
        batch=batch,
        tokens_per_second=batch * workload.output_tokens / cycle * plan.data_parallel,
        ttft_s=ttft,
        itl_ms=step.step_s * 1e3,
        tpot_ms=max(tpot, step.step_s) * 1e3,
        bound=step.bound,
        step=step,
        prefill_s=prefill,
        engines=plan.data_parallel,
    )


def batch_limit(plan: Plan, workload: Workload, instance: InstanceSpec) -> tuple[int, str]:
    """Most sequences one engine may run, and what sets that limit."""
    limits = [
        (max(1, plan.kv_tokens_per_replica // workload.peak_context), "KV cache"),
        (default_max_num_seqs(instance), "max_num_seqs"),
    ]
    if workload.concurrency is not None:
        limits.append((max(1, math.ceil(workload.concurrency / plan.data_parallel)), "concurrency"))
    return min(limits, key=lambda item: item[0])


def evaluate(
    plan: Plan,
    workload: Workload,
    targets: LatencyTargets,
    catalog: Catalog | None = None,
) -> Performance:
    """The largest batch meeting ``targets`` (bisection) and what the plan serves at it."""
    instance = catalog.get(plan.instance_type) if catalog else plan.instance_spec
    limit, limited_by = batch_limit(plan, workload, instance)
    best = operating_point(plan, limit, workload, catalog)
    if targets.misses(best):
        low = operating_point(plan, 1, workload, catalog)
        if targets.misses(low):
            best, limited_by = low, "targets (missed even at batch 1)"
        else:
            lo, hi = 1, limit  # lo meets, hi misses
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if targets.misses(operating_point(plan, mid, workload, catalog)):
                    hi = mid
                else:
                    lo = mid
            best = operating_point(plan, lo, workload, catalog)
            limited_by = (
                "targets ("
                + "; ".join(targets.misses(operating_point(plan, hi, workload, catalog)))
                + f" at batch {hi})"
            )
    missed = targets.misses(best)
    price = instance.price_per_hour * plan.nodes if instance.price_per_hour > 0 else None
    replicas = None
    if workload.request_rate is not None:
        needed = workload.request_rate * workload.output_tokens
        replicas = max(1, math.ceil(needed / best.tokens_per_second))
    return Performance(
        max_num_seqs=best.batch,
        engines=plan.data_parallel,
        gpus=plan.gpus_per_replica * plan.data_parallel,
        nodes=plan.nodes,
        output_tokens_per_second=best.tokens_per_second,
        ttft_s=best.ttft_s,
        itl_ms=best.itl_ms,
        tpot_ms=best.tpot_ms,
        bound=best.bound,
        batch_limited_by=limited_by,
        meets_targets=not missed,
        misses=missed,
        usd_per_hour=price,
        replicas_for_request_rate=replicas,
    )


def _value(perf: Performance) -> float:
    """Tokens per dollar-hour, or tokens/s per node when no price is known."""
    if perf.usd_per_hour is not None:
        return perf.output_tokens_per_second / perf.usd_per_hour
    return perf.output_tokens_per_second_per_node


def _score(plan: Plan, perf: Performance) -> tuple[bool, float, int, bool, float]:
    """Higher is better: meets the targets, tokens per dollar (to 3 significant digits: a
    compute-bound decode gives several layouts the same figure), fewer nodes, the BF16 KV
    cache, then the lower TPOT."""
    value = float(f"{_value(perf):.3g}")
    return (perf.meets_targets, value, -plan.nodes, plan.kv_cache_dtype != "fp8", -perf.tpot_ms)


def _closeness(targets: LatencyTargets, perf: Performance) -> float:
    """How far a missing layout is from its targets (worst ratio; lower is closer)."""
    given = [(name, getattr(targets, name)) for name, *_ in TARGETS]
    ratios: list[float] = [getattr(perf, name) / t for name, t in given if t is not None]
    return max([1.0, *ratios])


def fitted_layouts(
    spec: ModelSpec,
    fmt: WeightFormat,
    instance: InstanceSpec,
    request: _Request,
    kv_dtypes: tuple[str, ...],
) -> list[Plan]:
    """Every layout (and KV dtype) of ``sizing._candidate_layouts`` that fits the request."""
    fitted = []
    for kv in kv_dtypes:
        kv_request = replace(request, kv_dtype=kv)
        for layout in _candidate_layouts(spec, instance, kv_request):
            found = _fit_layout(spec, fmt, instance, kv_request, layout)
            if found is not None:
                fitted.append(found)
    return fitted


@dataclass(frozen=True)
class _Search:
    """One ``plan()`` search: what must fit, for which workload and targets."""

    request: _Request
    workload: Workload
    targets: LatencyTargets
    #: Whether the KV-cache dtype is searched (``kv_dtypes_for``) or the request's.
    kv_open: bool
    catalog: Catalog

    def evaluate(self, plan: Plan) -> Performance:
        return evaluate(plan, self.workload, self.targets, self.catalog)


def choose(
    smallest: Plan,
    request: _Request,
    workload: Workload | None,
    targets: LatencyTargets | None,
    objective: Objective,
    kv_unset: bool,
    catalog: Catalog,
) -> Plan:
    """``plan()``'s answer from its smallest fit: itself for ``MIN_GPUS`` without a workload or
    targets, else the layout the objective picks, with performance, candidates, disaggregation."""
    if objective is Objective.MIN_GPUS and workload is None and targets is None:
        return smallest
    search = _Search(
        request,
        workload or Workload(),
        targets or LatencyTargets(),
        kv_open=kv_unset and workload is not None and objective is Objective.TOKENS_PER_DOLLAR,
        catalog=catalog,
    )
    ranked = _ranked(smallest, search, fewest_nodes=workload is None)
    if objective is Objective.MIN_GPUS:
        plan, perf = _smallest_as_ranked(smallest, ranked, search)
    else:
        plan, perf = ranked[0]
    others = [item for item in ranked if item[0] is not plan][:CANDIDATES_SHOWN]
    candidates = tuple(
        Candidate(other, other_perf, _loses_because(other, other_perf, (plan, perf), objective))
        for other, other_perf in others
    )
    unmet = None
    if search.targets.any and not perf.meets_targets:
        unmet = _what_would_meet(plan, perf, search)
    return replace(
        plan,
        performance=perf,
        candidates=candidates,
        disaggregation=disaggregation_for(smallest.model_spec, search.workload, perf),
        workload=search.workload,
        targets=search.targets,
        objective=objective,
        unmet=unmet,
        warnings=plan.warnings + ((unmet,) if unmet else ()),
    )


def _ranked(smallest: Plan, search: _Search, fewest_nodes: bool) -> list[tuple[Plan, Performance]]:
    """Every layout that fits with its performance, best first: by ``_score``; when none meets
    the targets, the closest first; fewer nodes within ``NODE_TOLERANCE`` of the best win."""
    spec, fmt, instance = smallest.model_spec, smallest.format_spec, smallest.instance_spec
    kv_dtypes = kv_dtypes_for(instance) if search.kv_open else (search.request.kv_dtype,)
    fitted = fitted_layouts(spec, fmt, instance, search.request, kv_dtypes) or [smallest]
    if fewest_nodes:  # no workload to justify more nodes: the fewest that fit
        fitted = [plan for plan in fitted if plan.nodes == smallest.nodes] or [smallest]
    scored = [(plan, search.evaluate(plan)) for plan in fitted]
    ranked = sorted(scored, key=lambda item: _score(*item), reverse=True)
    if not ranked[0][1].meets_targets:
        ranked.sort(key=lambda item: (_closeness(search.targets, item[1]), -_value(item[1])))
    else:
        top = _value(ranked[0][1]) * (1 - NODE_TOLERANCE)
        near = [item for item in ranked if item[1].meets_targets and _value(item[1]) >= top]
        fewest = min(item[0].nodes for item in near)
        first = next(item for item in near if item[0].nodes == fewest)
        ranked.remove(first)
        ranked.insert(0, first)
    return ranked


def _smallest_as_ranked(
    smallest: Plan, ranked: list[tuple[Plan, Performance]], search: _Search
) -> tuple[Plan, Performance]:
    """``MIN_GPUS``: the smallest layout as the search evaluated it."""
    same = (
        item
        for item in ranked
        if item[0].layout == smallest.layout and item[0].kv_cache_dtype == smallest.kv_cache_dtype
    )
    return next(same, (smallest, search.evaluate(smallest)))


def _loses_because(
    plan: Plan,
    perf: Performance,
    chosen: tuple[Plan, Performance],
    objective: Objective,
) -> str:
    best_plan, best = chosen
    if not perf.meets_targets and best.meets_targets:
        return "misses " + "; ".join(perf.misses) + f" even at batch {perf.max_num_seqs}"
    if objective is Objective.MIN_GPUS:
        return f"objective min-gpus keeps the smallest layout that fits ({layout_text(best_plan)})"
    mine, theirs = _value(perf), _value(best)
    unit = "tokens per dollar" if best.usd_per_hour is not None else "tokens/s per node"
    if theirs <= 0 or mine >= theirs * 0.995:
        if plan.nodes > best_plan.nodes:
            return f"ties on {unit}; more nodes"
        if plan.kv_cache_dtype == "fp8":
            return f"ties on {unit}; FP8 KV cache (lower precision)"
        return f"ties on {unit}; ranked after"
    share = (1 - mine / theirs) * 100
    return (
        f"{share:.0f} % fewer {unit}: batch {perf.max_num_seqs} per engine (limited by "
        f"{perf.batch_limited_by}; KV cache {plan.kv_cache_bytes_per_gpu / GIB:,.1f} GiB per GPU), "
        f"{perf.bound}-bound step {perf.itl_ms:.1f} ms"
    )


def _what_would_meet(plan: Plan, perf: Performance, search: _Search) -> str:
    """Nothing meets the targets: what would (FP8 KV, another type, the relaxed targets)."""
    spec, fmt, instance = plan.model_spec, plan.format_spec, plan.instance_spec
    targets = search.targets
    would: list[str] = []
    fp8_untried = not search.kv_open and search.request.kv_dtype != "fp8"
    if fp8_untried and "fp8" in kv_dtypes_for(instance):
        fp8 = fitted_layouts(spec, fmt, instance, search.request, ("fp8",))
        if any(search.evaluate(fitted).meets_targets for fitted in fp8):
            would.append("an FP8 KV cache (kv_cache_dtype='fp8')")
    other = _cheapest_other_type(plan, search)
    if other is not None:
        would.append(other)
    step = {"s": 10, "ms": 1}  # relaxed to the next tenth of a second, or millisecond
    relaxed = [
        f"{label} {math.ceil(getattr(perf, name) * step[unit]) / step[unit]:g} {unit}"
        for name, label, unit, _ in targets.missed(perf)
    ]
    if relaxed:
        would.append("relaxed targets of " + ", ".join(relaxed) + " (this layout at batch 1)")
    return (
        f"no layout of {plan.model} in {plan.weight_format} on {plan.instance_type} meets the "
        f"targets ({'; '.join(perf.misses)} at best); would meet them: " + "; ".join(would)
    )


def _cheapest_other_type(plan: Plan, search: _Search) -> str | None:
    """The catalog's other instance type whose best layout meets the targets most cheaply."""
    spec, fmt, others = plan.model_spec, plan.format_spec, []
    for other in search.catalog:
        if other.instance_type == plan.instance_type:
            continue
        for fitted in fitted_layouts(spec, fmt, other, search.request, kv_dtypes_for(other)):
            perf = search.evaluate(fitted)
            if perf.meets_targets and perf.usd_per_million_output_tokens is not None:
                others.append((perf.usd_per_million_output_tokens, other.instance_type, fitted))
    if not others:
        return None
    usd, name, fitted = min(others, key=lambda item: item[0])
    return f"{name} ({layout_text(fitted)}, ${usd:,.2f} per million output tokens)"


sizing._CHOOSE = choose  # plan() searches through this (sizing cannot import this module)

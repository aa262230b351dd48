"""Derive one vLLM configuration per instance pool from a single declaration: the weight
format, the layout, speculative decoding by ``Goal`` (``planning.goals``), and a served name
that says which copy it is (docs/design/vllm-config.md, "One configuration per pool").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import Problems, check_choice, check_literal
from ..planning.catalog import Catalog, default_catalog
from ..planning.goals import Goal as Goal  # re-exported: the library's one goal type
from ..planning.instance_types import InstanceType
from ..planning.models import ModelSpec, WeightFormat
from ..planning.sizing import Plan, PlanningError, tensor_parallel_options
from ..planning.sizing import plan as plan_layout
from .config import MtpSpeculation, NgramSpeculation, Speculation, VllmConfig


@dataclass(frozen=True)
class PoolVllmPlan:
    """What one pool runs: instance type, weight format, vLLM configuration, planned layout."""

    instance_type: str
    weight_format: str
    config: VllmConfig
    plan: Plan
    #: Set when the base configuration's tensor-parallel size serves fewer than
    #: ``1 / TENSOR_PARALLEL_COST_FACTOR`` of the tokens per dollar of the planner's choice.
    tensor_parallel_warning: str | None = None


#: A user's tensor-parallel size costing more than this factor in tokens per dollar warns.
TENSOR_PARALLEL_COST_FACTOR = 2.0
TENSOR_PARALLEL_WARNING_ID = "cdk-llm-serving:tensorParallelCostsThroughput"


def warn_tensor_parallel_cost(scope: Any, planned: PoolVllmPlan) -> None:
    """Add ``planned``'s tensor-parallel warning to ``scope`` (a construct), if it has one."""
    if planned.tensor_parallel_warning is None:
        return
    from aws_cdk import Annotations

    Annotations.of(scope).add_warning_v2(
        TENSOR_PARALLEL_WARNING_ID, planned.tensor_parallel_warning
    )


def tensor_parallel_cost_warning(pinned: Plan, best: Plan) -> str | None:
    """The warning text when ``pinned`` (the user's size) serves fewer than half the tokens
    per dollar of ``best`` (the planner's choice) at the planner's default workload."""
    if pinned.performance is None or best.performance is None:
        return None
    mine = pinned.performance.output_tokens_per_second_per_node
    theirs = best.performance.output_tokens_per_second_per_node
    if mine * TENSOR_PARALLEL_COST_FACTOR >= theirs:
        return None
    return (
        f"tensor_parallel_size={pinned.tensor_parallel} on {pinned.instance_type} serves "
        f"~{mine:,.0f} output tokens/s per instance, {theirs / mine:.1f}x fewer tokens per dollar "
        f"than the planner's tensor {best.tensor_parallel} x data {best.data_parallel} "
        f"(~{theirs:,.0f}/s at batch {best.performance.max_num_seqs} per engine, "
        f"{best.workload.input_tokens if best.workload else '?'} in / "
        f"{best.workload.output_tokens if best.workload else '?'} out); kept because it was set"
    )


def speculation_for(model: ModelSpec, base: VllmConfig) -> Speculation:
    if model.mtp_layers > 0:
        return MtpSpeculation(num_speculative_tokens=1)
    return base.speculative or NgramSpeculation()


def derive_pool_config(
    config: VllmConfig,
    model: ModelSpec | str,
    instance_type: InstanceType | str,
    formats: Sequence[WeightFormat | str],
    *,
    goal: Goal = "latency",
    catalog: Catalog | None = None,
) -> PoolVllmPlan:
    """The configuration one pool runs; ``PlanningError`` (a ``ConfigurationError``) when no
    allowed format fits or the catalog has no figures for ``instance_type``.

    :param config: the settings every pool shares; the derived ones replace its parallelism,
        quantization, speculation and served name.
    :param model: a ``ModelSpec`` or the name of a preset.
    :param instance_type: the pool's ``InstanceType`` or its name.
    :param formats: the weight formats the user supplied copies of, most preferred first.
    :param goal: ``latency`` (default), ``throughput`` or ``cost`` (``planning.goals``).
    :param catalog: the instance facts to plan with. Default: the planner's default catalog.
    """
    problems = Problems("derive_pool_config")
    check_literal(problems, "goal", goal, Goal, "goals")
    parsed = [WeightFormat.parse(problems, f"formats[{i}]", v) for i, v in enumerate(formats)]
    problems.raise_if_any()
    spec = ModelSpec.of(model)
    catalog = catalog or default_catalog()
    _check_in_catalog(instance_type, catalog)
    errors: list[str] = []
    allowed = [fmt for fmt in parsed if fmt is not None]
    for fmt in _in_goal_order(allowed, goal, catalog, str(instance_type)):
        try:
            fitted, best = _layouts(config, spec, fmt, instance_type, goal, catalog)
        except PlanningError as error:
            errors.append(str(error).split("\n")[0])
            continue
        pinned = config.tensor_parallel_size is not None
        warning = tensor_parallel_cost_warning(fitted, best) if pinned else None
        derived = _derived_config(config, spec, fmt, fitted, goal)
        return PoolVllmPlan(instance_type, fmt.name, derived, fitted, warning)
    raise PlanningError(
        f"no allowed weight format of {spec.name} fits one {instance_type}: " + "; ".join(errors),
    )


def _check_in_catalog(instance_type: InstanceType | str, catalog: Catalog) -> None:
    """A ``PlanningError`` naming the closest types when the catalog lacks ``instance_type``."""
    if instance_type in catalog:
        return
    known = Problems("catalog")
    types = sorted(instance.instance_type for instance in catalog)
    check_choice(known, "instance_type", str(instance_type), types, "catalog types")
    raise PlanningError(
        f"{instance_type}: {known.problems()[0].allowed} (the planner needs the type's "
        "figures: add them with Catalog.with_instances)",
        prop="instance_type",
        value=str(instance_type),
    )


def _layouts(
    config: VllmConfig,
    spec: ModelSpec,
    fmt: WeightFormat,
    instance_type: InstanceType | str,
    goal: Goal,
    catalog: Catalog,
) -> tuple[Plan, Plan]:
    """(the layout the pool runs, the planner's choice) on one instance: the configuration's
    tensor-parallel size, else all the GPUs for ``latency``, else the planner's choice."""

    def fit(tensor_parallel: int | None) -> Plan:
        return plan_layout(
            spec,
            fmt,
            instance_type,
            max_context=config.max_model_len,
            gpu_memory_utilization=config.gpu_memory_utilization or 0.9,
            kv_cache_dtype="fp8" if (config.kv_cache_dtype or "auto").startswith("fp8") else "auto",
            max_nodes=1,
            catalog=catalog,
            tensor_parallel=tensor_parallel,
        )

    best = fit(None)
    chosen = config.tensor_parallel_size
    if chosen is None and goal == "latency":
        chosen = tensor_parallel_options(spec, catalog.get(str(instance_type)).gpus)[-1]
    return (best if chosen is None else fit(chosen)), best


def _derived_config(
    config: VllmConfig, spec: ModelSpec, fmt: WeightFormat, fitted: Plan, goal: Goal
) -> VllmConfig:
    """``config`` with the layout, quantization, speculation and served name of ``fitted``."""
    tp, dp = fitted.tensor_parallel, fitted.data_parallel
    speculative = speculation_for(spec, config) if goal == "throughput" else None
    name = config.served_model_name or spec.name
    served = f"{name}-{fmt.name}-tp{tp}" + (f"-{speculative.method}" if speculative else "")
    return config.with_changes(
        served_model_name=served,
        tensor_parallel_size=tp,
        data_parallel_size=dp if dp > 1 else None,
        pipeline_parallel_size=None,
        enable_expert_parallel=spec.is_moe and tp * dp > 1,
        quantization=fmt.vllm_quantization,
        speculative=speculative,
    ).validate()


def _in_goal_order(
    formats: list[WeightFormat], goal: Goal, catalog: Catalog, instance_type: str
) -> list[WeightFormat]:
    """The formats as given; for ``cost``, the most compact first, those the instance's GPUs
    run natively before those they emulate (the order of equal ones kept)."""
    if goal != "cost":
        return list(formats)
    gpu = catalog.get(instance_type).gpu

    def compactness(fmt: WeightFormat) -> tuple[bool, float]:
        return (not fmt.runs_natively_on(gpu), fmt.bytes_per_param)

    return sorted(formats, key=compactness)

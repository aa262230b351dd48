"""Checks of a ``VllmConfig`` against the hardware and model it will run on."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Problem, Problems
from ..planning.catalog import Catalog, InstanceSpec, default_catalog
from ..planning.instance_types import InstanceType
from ..planning.models import ModelSpec, WeightFormat, weight_formats
from .config import Eagle3Speculation, MtpSpeculation, VllmConfig

#: vLLM quantization methods and the weight format each stores.
QUANTIZATION_FORMATS: dict[str, str] = {
    "modelopt_fp4": "nvfp4",
    "fp8": "fp8",
    "mxfp4": "mxfp4",
    "awq": "int4",
    "awq_marlin": "int4",
    "gptq": "int4",
    "gptq_marlin": "int4",
}


@dataclass(frozen=True)
class HardwareCheck:
    """What ``check_on_hardware`` found: problems (the configuration cannot start there) and
    warnings (it starts, but not as well as it could). A construct adds the problems to its
    own with ``problems.extend(check.problems, "config")``."""

    problems: tuple[Problem, ...]
    warnings: tuple[str, ...]


def weight_format_of(config: VllmConfig, model: ModelSpec | None = None) -> WeightFormat | None:
    """The format the server loads: from ``quantization``, else the checkpoint's."""
    if config.quantization is not None:
        name = QUANTIZATION_FORMATS.get(config.quantization)
        return weight_formats().get(name) if name else None
    return weight_formats().get(model.checkpoint_format) if model is not None else None


def check_on_hardware(
    config: VllmConfig,
    instance_type: InstanceType | str,
    *,
    model: ModelSpec | str | None = None,
    nodes: int = 1,
    weight_format: WeightFormat | str | None = None,
    catalog: Catalog | None = None,
) -> HardwareCheck:
    """Parallel sizes that fit the GPUs, heads that split, MTP the model has, native formats.

    ``weight_format`` names the weights actually loaded when ``quantization`` does not say
    (e.g. BF16 weights of a model whose published checkpoint is MXFP4). An instance type the
    catalog has no figures for or an unknown preset: ``ConfigurationError``.
    """
    instance = (catalog or default_catalog()).get(str(instance_type))
    spec = ModelSpec.of(model) if model is not None else None
    problems = _layout_problems(config, instance, nodes) + _parallel_refusals(config)
    if spec is not None:
        problems += _model_problems(config, spec)
    speculative = config.speculative
    if isinstance(speculative, Eagle3Speculation) and speculative.draft_model == config.model:
        allowed = "the draft model must differ from the served model"
        problems.append(Problem("speculative.draft_model", speculative.draft_model, allowed))
    # A format the caller has not checked yet gets no note (its own check names it).
    fmt = (
        weight_formats().get(str(weight_format))
        if weight_format
        else weight_format_of(config, spec)
    )
    note = fmt.fallback_note(instance.gpu) if fmt is not None else None
    return HardwareCheck(tuple(problems), (note,) if note else ())


def _layout_problems(config: VllmConfig, instance: InstanceSpec, nodes: int) -> list[Problem]:
    """TP x PP x DP divides the GPUs of ``nodes`` instances; TP stays within one node."""
    tp = config.tensor_parallel_size or 1
    pp = config.pipeline_parallel_size or 1
    dp = config.data_parallel_size or 1
    gpus, used = instance.gpus * nodes, tp * pp * dp
    found = Problems("VllmConfig")
    if used > gpus or gpus % used:
        found.add(
            "tensor_parallel_size x pipeline_parallel_size x data_parallel_size",
            f"{tp} x {pp} x {dp} = {used}",
            f"must divide the {gpus} GPUs of {nodes} x {instance.instance_type}",
        )
    if tp > instance.gpus:
        allowed = f"tensor parallelism stays within a node: at most {instance.gpus} on {instance.instance_type}"
        found.add("tensor_parallel_size", tp, allowed)
    return list(found.problems())


def _model_problems(config: VllmConfig, spec: ModelSpec) -> list[Problem]:
    """Heads that split over TP, MTP layers for MTP, context within the model's, experts for EP."""
    tp, found = config.tensor_parallel_size or 1, Problems("VllmConfig")
    if spec.attention_heads % tp:
        allowed = f"must divide {spec.name}'s {spec.attention_heads} attention heads"
        found.add("tensor_parallel_size", tp, allowed)
    if isinstance(config.speculative, MtpSpeculation) and spec.mtp_layers < 1:
        allowed = f"{spec.name} has no MTP layers; use EAGLE-3 with a draft model or n-gram"
        found.add("speculative", "mtp", allowed)
    if config.max_model_len is not None and config.max_model_len > spec.max_context:
        allowed = f"{spec.name} supports at most {spec.max_context} tokens"
        found.add("max_model_len", config.max_model_len, allowed)
    if config.enable_expert_parallel and not spec.is_moe:
        found.add(
            "enable_expert_parallel", True, f"{spec.name} is dense: it has no experts to shard"
        )
    return list(found.problems())


def _flag_int(config: VllmConfig, name: str) -> int:
    value = config.extra_flags.get(name)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 1


def _parallel_refusals(config: VllmConfig) -> list[Problem]:
    """Combinations vLLM's ``ParallelConfig`` refuses at start, so the pods would crash-loop
    (``ParallelConfig._validate_parallel_config`` in vllm/config/parallel.py)."""
    dp = config.data_parallel_size or 1
    flags, found = config.extra_flags, Problems("VllmConfig")
    local = "data-parallel-size-local"
    if local in flags and _flag_int(config, local) > dp:
        allowed = f"vLLM refuses more local data-parallel ranks than data_parallel_size ({dp})"
        found.add(f"extra_flags[{local!r}]", flags[local], allowed)
    if flags.get("enable-eplb") and not config.enable_expert_parallel:
        allowed = "vLLM refuses expert load balancing without enable_expert_parallel"
        found.add("extra_flags['enable-eplb']", True, allowed)
    if _flag_int(config, "prefill-context-parallel-size") > 1 and dp > 1:
        allowed = "vLLM refuses prefill context parallelism with data parallelism"
        prop = "prefill-context-parallel-size"
        found.add(f"extra_flags[{prop!r}]", flags.get(prop), allowed)
    if flags.get("enable-elastic-ep") and (config.pipeline_parallel_size or 1) > 1:
        allowed = "vLLM refuses elastic expert parallelism with pipeline parallelism"
        found.add("extra_flags['enable-elastic-ep']", True, allowed)
    return list(found.problems())


def speculation_with_pipeline_note(config: VllmConfig) -> str | None:
    """Why speculative decoding with pipeline parallelism > 1 may not start, or ``None``: vLLM
    accepts it, but it is unverified at run time (docs/design/vllm-config.md)."""
    if config.speculative is None or (config.pipeline_parallel_size or 1) <= 1:
        return None
    return (
        f"{config.speculative.method} speculative decoding with pipeline_parallel_size="
        f"{config.pipeline_parallel_size} is not verified to start on vLLM's default runner; "
        "prefer data parallel + expert parallel (MoE) or drop speculative decoding"
    )

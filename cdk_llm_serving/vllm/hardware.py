"""Checks of a ``VllmConfig`` against the hardware and model it will run on."""

from __future__ import annotations

from dataclasses import dataclass

from ..planning.catalog import Catalog, default_catalog
from ..planning.models import ModelSpec, WeightFormat, preset, weight_formats
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
    problems: tuple[tuple[str, object, str], ...]
    warnings: tuple[str, ...]


def weight_format_of(config: VllmConfig, model: ModelSpec | None = None) -> WeightFormat | None:
    """The format the server loads: from ``quantization``, else the checkpoint's."""
    if config.quantization is not None:
        name = QUANTIZATION_FORMATS.get(config.quantization)
        return weight_formats().get(name) if name else None
    return weight_formats().get(model.checkpoint_format) if model is not None else None


def check_on_hardware(
    config: VllmConfig,
    instance_type: str,
    *,
    model: ModelSpec | str | None = None,
    nodes: int = 1,
    weight_format: str | None = None,
    catalog: Catalog | None = None,
) -> HardwareCheck:
    """Parallel sizes that fit the GPUs, heads that split, MTP the model has, native formats.

    ``weight_format`` names the weights actually loaded when ``quantization`` does not say
    (e.g. BF16 weights of a model whose published checkpoint is MXFP4).
    """
    catalog = catalog or default_catalog()
    spec = preset(model) if isinstance(model, str) else model
    instance = catalog.get(instance_type)
    problems: list[tuple[str, object, str]] = []
    warnings: list[str] = []
    tp = config.tensor_parallel_size or 1
    pp = config.pipeline_parallel_size or 1
    dp = config.data_parallel_size or 1
    gpus = instance.gpus * nodes
    used = tp * pp * dp
    if used > gpus or gpus % used:
        problems.append(
            (
                "tensor_parallel_size x pipeline_parallel_size x data_parallel_size",
                f"{tp} x {pp} x {dp} = {used}",
                f"must divide the {gpus} GPUs of {nodes} x {instance_type}",
            )
        )
    if tp > instance.gpus:
        problems.append(
            (
                "tensor_parallel_size",
                tp,
                f"tensor parallelism stays within a node: at most {instance.gpus} on {instance_type}",
            )
        )
    if spec is not None:
        if spec.attention_heads % tp:
            problems.append(
                (
                    "tensor_parallel_size",
                    tp,
                    f"must divide {spec.name}'s {spec.attention_heads} attention heads",
                )
            )
        if isinstance(config.speculative, MtpSpeculation) and spec.mtp_layers < 1:
            problems.append(
                (
                    "speculative",
                    "mtp",
                    f"{spec.name} has no MTP layers; use EAGLE-3 with a draft model or n-gram",
                )
            )
        if config.max_model_len is not None and config.max_model_len > spec.max_context:
            problems.append(
                (
                    "max_model_len",
                    config.max_model_len,
                    f"{spec.name} supports at most {spec.max_context} tokens",
                )
            )
        if config.enable_expert_parallel and not spec.is_moe:
            problems.append(
                (
                    "enable_expert_parallel",
                    True,
                    f"{spec.name} is dense: it has no experts to shard",
                )
            )
    if (
        isinstance(config.speculative, Eagle3Speculation)
        and config.speculative.draft_model == config.model
    ):
        problems.append(
            (
                "speculative.draft_model",
                config.speculative.draft_model,
                "the draft model must differ from the served model",
            )
        )
    fmt = weight_formats().get(weight_format) if weight_format else weight_format_of(config, spec)
    if fmt is not None:
        note = fmt.fallback_note(instance.gpu)
        if note:
            warnings.append(note)
    return HardwareCheck(tuple(problems), tuple(warnings))

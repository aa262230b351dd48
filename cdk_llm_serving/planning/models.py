"""Model architecture figures and weight formats: what sizing needs to know about a model."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from ..errors import Problems, check_choice
from .catalog import Gpu, load_data
from .hf_config import spec_fields


@dataclass(frozen=True)
class ModelSpec:
    """Published (or assumed) figures of one model. Parameter counts in billions.

    ``attention`` is ``gqa`` (grouped-query / multi-head: ``kv_heads`` x ``head_dim``
    per layer) or ``mla`` (multi-head latent: ``kv_lora_rank + qk_rope_head_dim`` per
    layer). ``high_precision_params_b`` stay in BF16 whatever the weight format.
    """

    name: str
    total_params_b: float
    active_params_b: float
    layers: int
    attention_heads: int
    max_context: int
    high_precision_params_b: float = 0.0
    attention: Literal["gqa", "mla"] = "gqa"
    kv_heads: int = 0
    head_dim: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    mtp_layers: int = 0
    checkpoint_format: str = "bf16"
    source: str = ""
    assumptions: str = ""
    experts: int = 0
    experts_per_token: int = 0
    moe_layers: int = 0
    hidden_size: int = 0
    routed_params_b: float = 0.0

    @property
    def is_moe(self) -> bool:
        return self.active_params_b < self.total_params_b

    @property
    def routed_experts_b(self) -> float:
        """Billions of parameters in routed experts (all of them, all MoE layers).

        Given, or derived from ``total = shared + R`` and ``active = shared + R·k/E``:
        ``R = (total - active) / (1 - k/E)``. Zero for a dense model.
        """
        if not self.is_moe or self.experts <= 0 or self.experts_per_token <= 0:
            return 0.0
        if self.routed_params_b:
            return self.routed_params_b
        return (self.total_params_b - self.active_params_b) / (
            1 - self.experts_per_token / self.experts
        )

    @classmethod
    def of(cls, value: ModelSpec | str, prop: str = "model") -> ModelSpec:
        """``value`` as a spec: a ``ModelSpec`` as given, or the preset of that name
        (``ConfigurationError`` naming ``prop`` and the closest presets when there is none)."""
        return value if isinstance(value, ModelSpec) else preset(value, prop)

    @classmethod
    def from_hf_config(
        cls,
        path: str | Path,
        index_path: str | Path | None = None,
        weight_format: WeightFormat | str | None = None,
    ) -> ModelSpec:
        """A spec from a local Hugging Face ``config.json`` (+ optional safetensors index);
        ``ModelConfigError`` names every problem, among them a ``weight_format`` other than a
        quantized checkpoint's own (``hf_config.spec_fields``). Reads local files only."""
        costs = {name: fmt.bytes_per_param for name, fmt in weight_formats().items()}
        fmt = None if weight_format is None else str(WeightFormat.of(weight_format))
        return cls(**spec_fields(path, index_path, costs, fmt))

    def kv_values_per_token(self) -> int:
        """Cached values per token over all layers (multiply by the KV dtype's bytes)."""
        if self.attention == "mla":
            return (self.kv_lora_rank + self.qk_rope_head_dim) * self.layers
        return 2 * self.layers * self.kv_heads * self.head_dim

    def kv_replication(self, tensor_parallel: int) -> int:
        """How many tensor-parallel ranks hold the same KV entries.

        GQA splits KV heads across ranks and copies them once ranks outnumber heads;
        MLA's latent cache is not split by tensor parallelism, so every rank holds it.
        """
        if self.attention == "mla":
            return tensor_parallel
        return max(1, tensor_parallel // max(1, self.kv_heads))


@dataclass(frozen=True)
class WeightFormat:
    """A format the weights are stored and served in (``data/formats.json``).

    ``WeightFormat.of("nvfp4")`` or a constant (``WeightFormat.NVFP4``); every construct and
    the planner also take the name and convert it. ``vllm_quantization`` is the vLLM
    ``--quantization`` method that serves it (``None``: unquantized).
    """

    BF16: ClassVar[WeightFormat]
    FP8: ClassVar[WeightFormat]
    NVFP4: ClassVar[WeightFormat]
    MXFP4: ClassVar[WeightFormat]
    INT4: ClassVar[WeightFormat]

    name: str
    bytes_per_param: float
    vllm_quantization: str | None
    description: str

    @classmethod
    def of(cls, value: WeightFormat | str, prop: str = "weight_format") -> WeightFormat:
        """``value`` as a format: as given, or the known format of that name
        (``ConfigurationError`` naming ``prop`` and the closest formats when there is none)."""
        return value if isinstance(value, WeightFormat) else weight_format(value, prop)

    @classmethod
    def parse(cls, problems: Problems, prop: str, value: object) -> WeightFormat | None:
        """``value`` as a format, or ``None`` with the problem (closest formats) added to
        ``problems`` under ``prop`` (for constructs that report every problem at once)."""
        if isinstance(value, WeightFormat):
            return value
        if isinstance(value, str) and value in weight_formats():
            return weight_formats()[value]
        check_choice(problems, prop, value, list(weight_formats()), "weight formats")
        return None

    def __str__(self) -> str:
        return self.name

    def runs_natively_on(self, gpu: Gpu) -> bool:
        return self.name in gpu.native_formats

    def stored_bytes(self, params_b: float, high_precision_params_b: float) -> float:
        """Bytes of ``params_b`` billion parameters in this format, of which
        ``high_precision_params_b`` (capped at ``params_b``) stay at BF16 or wider."""
        high = min(high_precision_params_b, params_b)
        return (params_b - high) * 1e9 * self.bytes_per_param + high * 1e9 * max(
            2.0, self.bytes_per_param
        )

    def fallback_note(self, gpu: Gpu) -> str | None:
        """Why this format is slow on ``gpu`` (None when it runs natively)."""
        if self.runs_natively_on(gpu):
            return None
        return (
            f"{self.name} has no native kernels on {gpu.name} (compute capability {gpu.compute_capability}): "
            "vLLM runs it as weight-only (Marlin), dequantizing to BF16 on the fly - it works and saves memory, "
            "but matrix multiplies run at BF16 speed"
        )


@functools.cache
def presets() -> dict[str, ModelSpec]:
    return {
        name: ModelSpec(name=name, **figures)
        for name, figures in load_data("models.json")["models"].items()
    }


@functools.cache
def weight_formats() -> dict[str, WeightFormat]:
    return {
        name: WeightFormat(name=name, **entry)
        for name, entry in load_data("formats.json")["formats"].items()
    }


def preset(name: str, prop: str = "model") -> ModelSpec:
    """The preset ``name``; ``ConfigurationError`` naming ``prop`` when there is none."""
    if name in presets():
        return presets()[name]
    problems = Problems("model preset")
    check_choice(problems, prop, name, sorted(presets()), "model presets")
    problems.raise_if_any()
    raise AssertionError("unreachable")


def weight_format(name: str, prop: str = "weight_format") -> WeightFormat:
    """The weight format ``name``; ``ConfigurationError`` naming ``prop`` when there is none."""
    problems = Problems("weight format")
    found = WeightFormat.parse(problems, prop, name)
    problems.raise_if_any()
    assert found is not None
    return found


for _name, _format in weight_formats().items():
    setattr(WeightFormat, _name.upper(), _format)

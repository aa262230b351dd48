"""A ``ModelSpec`` from a local Hugging Face ``config.json`` (and optional safetensors index).

Reads local files strictly: every field the sizing needs is present, or one
``ModelConfigError`` names every problem. A field may be left out only where the family's
transformers config class derives it (``FAMILIES``); why: docs/design/planner.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigurationError, Problem, Problems

_HF = "huggingface/transformers src/transformers/models"

MoeStyle = Literal["dense", "mixtral", "qwen_moe", "deepseek", "llama4"]


@dataclass(frozen=True)
class Family:
    """How one architecture family's ``config.json`` is read.

    ``defaults``: the fields its transformers config class fills in when absent, each as a
    value or a rule over other fields (``"heads"``: ``num_attention_heads``; ``"hidden/heads"``:
    ``hidden_size // num_attention_heads``). Every other field the sizing reads is required.
    ``source``: the config class that says so (under ``_HF`` unless it says otherwise).
    """

    name: str
    moe: MoeStyle
    source: str
    defaults: Mapping[str, Any] = field(default_factory=dict)


_UNTIED = {"tie_word_embeddings": False}
_HEAD_DIM = {"head_dim": "hidden/heads"}
_SPARSE = {"decoder_sparse_step": 1, "mlp_only_layers": [], **_UNTIED, **_HEAD_DIM}
_DEEPSEEK = {"moe_layer_freq": 1, **_UNTIED, "num_nextn_predict_layers": 0}
_QWEN_HEAD_DIM = "head_dim = hidden_size // num_attention_heads as the Qwen modeling files"

#: model_type -> family (why each default, and each required field: docs/design/planner.md).
FAMILIES: dict[str, Family] = {
    "llama": Family(
        "Llama",
        "dense",
        f"{_HF}/llama/configuration_llama.py (LlamaConfig.__post_init__)",
        {"num_key_value_heads": "heads", **_HEAD_DIM, **_UNTIED},
    ),
    "mistral": Family(
        "Mistral", "dense", f"{_HF}/mistral/configuration_mistral.py", {**_HEAD_DIM, **_UNTIED}
    ),
    "qwen2": Family(
        "Qwen2",
        "dense",
        f"{_HF}/qwen2/configuration_qwen2.py; ASSUMED: {_QWEN_HEAD_DIM}",
        {**_HEAD_DIM, **_UNTIED},
    ),
    "qwen3": Family("Qwen3", "dense", f"{_HF}/qwen3/configuration_qwen3.py", _UNTIED),
    "mixtral": Family(
        "Mixtral", "mixtral", f"{_HF}/mixtral/configuration_mixtral.py", {**_HEAD_DIM, **_UNTIED}
    ),
    "gpt_oss": Family("gpt-oss", "mixtral", f"{_HF}/gpt_oss/configuration_gpt_oss.py", _UNTIED),
    "qwen2_moe": Family(
        "Qwen2-MoE",
        "qwen_moe",
        f"{_HF}/qwen2_moe/configuration_qwen2_moe.py; ASSUMED: {_QWEN_HEAD_DIM}",
        _SPARSE,
    ),
    "qwen3_moe": Family(
        "Qwen3-MoE",
        "qwen_moe",
        f"{_HF}/qwen3_moe/configuration_qwen3_moe.py and modeling_qwen3_moe.py",
        _SPARSE,
    ),
    "deepseek_v2": Family(
        "DeepSeek-V2", "deepseek", f"{_HF}/deepseek_v2/configuration_deepseek_v2.py", _DEEPSEEK
    ),
    "deepseek_v3": Family(
        "DeepSeek-V3",
        "deepseek",
        f"{_HF}/deepseek_v3/configuration_deepseek_v3.py (moe_layer_freq: DeepseekV2Config's)",
        _DEEPSEEK,
    ),
    "llama4_text": Family(
        "Llama-4",
        "llama4",
        f"{_HF}/llama4/configuration_llama4.py (Llama4TextConfig)",
        {"interleave_moe_layer_step": 1, **_UNTIED},
    ),
}
FAMILIES["kimi_k2"] = FAMILIES["deepseek_v3"]  # Kimi-K2 ships DeepseekV3ForCausalLM
FAMILIES["llama4"] = FAMILIES["llama4_text"]

#: A model_type not in FAMILIES: MoE style from the fields present, every field required.
#: ASSUMED: head_dim = hidden_size // num_attention_heads when absent, the rule of every
#: decoder family above that derives it.
_GENERIC_DEFAULTS: Mapping[str, Any] = {"head_dim": "hidden/heads", "moe_layer_freq": 1}

#: quantization_config.quant_method -> weight format, in vLLM's names
#: (vllm/model_executor/layers/quantization/__init__.py). ``compressed-tensors`` and
#: ``modelopt`` name families of schemes: read further in ``_quantization``.
QUANT_METHODS = {
    "fp8": "fp8",
    "fbgemm_fp8": "fp8",
    "ptpc_fp8": "fp8",
    "mxfp4": "mxfp4",
    "modelopt_fp4": "nvfp4",
    "awq": "int4",
    "awq_marlin": "int4",
    "gptq": "int4",
    "gptq_marlin": "int4",
}
#: ModelOpt's quant_algo -> weight format (NVIDIA TensorRT Model Optimizer checkpoints:
#: hf_quant_config.json ``quantization.quant_algo``, or ``quant_algo`` in quantization_config).
MODELOPT_ALGOS = {"fp8": "fp8", "fp8_pb_wo": "fp8", "nvfp4": "nvfp4", "w4a16_awq": "int4"}


class ModelConfigError(ConfigurationError):
    """A ``config.json`` the planner cannot use: every problem with property, value, allowed."""


def _read_json(path: Path, subject: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise ModelConfigError(
            subject, [Problem("path", str(path), f"a readable local file ({error.strerror})")]
        ) from None
    except json.JSONDecodeError as error:
        raise ModelConfigError(subject, [Problem("json", str(error), "valid JSON")]) from None
    if not isinstance(data, dict):
        raise ModelConfigError(subject, [Problem("json", type(data).__name__, "a JSON object")])
    return data


def _is_count(value: Any, minimum: int = 1) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


class _Reader:
    """Reads one config's fields, applying only its family's defaults, collecting problems."""

    def __init__(
        self, cfg: dict[str, Any], family: Family, defaults: Mapping[str, Any], problems: Problems
    ) -> None:
        self.cfg, self.family, self.defaults, self.problems = cfg, family, defaults, problems

    def _missing(self, key: str) -> None:
        self.problems.add(
            key,
            None,
            f"required to size a {self.family.name} model: a positive integer in config.json "
            "(its config class has no default that fits every checkpoint)",
        )

    def _default(self, key: str) -> Any:
        rule = self.defaults[key]
        hidden: Any = self.cfg.get("hidden_size")
        heads: Any = self.cfg.get("num_attention_heads")
        heads = heads if _is_count(heads) else 1  # a missing one is reported on its own
        if rule == "heads":
            return heads
        if rule == "hidden/heads":
            return max(1, hidden // heads) if _is_count(hidden) else 1
        return rule

    def count(self, *keys: str, minimum: int = 1) -> int:
        """The first of ``keys`` present (aliases), else the family default, else a problem."""
        for key in keys:
            if key in self.cfg and self.cfg[key] is not None:
                value = self.cfg[key]
                if not _is_count(value, minimum):
                    kind = "a positive integer" if minimum else "a non-negative integer"
                    self.problems.add(key, value, kind)
                    return max(1, minimum)
                return int(value)
        if keys[0] in self.defaults:
            return int(self._default(keys[0]))
        self._missing(keys[0])
        return max(1, minimum)

    def optional_count(self, key: str) -> int:
        """A size that may be absent or null (e.g. DeepSeek-V2-Lite's ``q_lora_rank``): 0."""
        value = self.cfg.get(key)
        if value is None:
            return 0
        if not _is_count(value):
            self.problems.add(key, value, "a positive integer or null")
            return 0
        return int(value)

    def flag(self, key: str) -> bool:
        if key in self.cfg:
            value = self.cfg[key]
            if not isinstance(value, bool):
                self.problems.add(key, value, "true or false")
            return bool(value)
        if key in self.defaults:
            return bool(self.defaults[key])
        self.problems.add(key, None, f"required to size a {self.family.name} model: true or false")
        return False

    def layer_list(self, key: str, layers: int) -> frozenset[int]:
        value = self.cfg.get(key, self.defaults.get(key))
        if value is None:
            self._missing(key)
            return frozenset()
        if not isinstance(value, list) or not all(_is_count(i, 0) and i < layers for i in value):
            self.problems.add(key, value, f"a list of layer indices in 0..{layers - 1}")
            return frozenset()
        return frozenset(value)


def _family(cfg: dict[str, Any]) -> tuple[Family, Mapping[str, Any]]:
    model_type = str(cfg.get("model_type") or "")
    if model_type in FAMILIES:
        family = FAMILIES[model_type]
        return family, family.defaults
    if cfg.get("kv_lora_rank") or "n_routed_experts" in cfg:
        moe: MoeStyle = "deepseek"
    elif "moe_intermediate_size" in cfg or "num_experts" in cfg:
        moe = "qwen_moe"
    elif "num_local_experts" in cfg:
        moe = "mixtral"
    else:
        moe = "dense"
    name = f"model_type {model_type!r}" if model_type else "config.json without model_type"
    generic = Family(name, moe, "ASSUMED: no known family, every field required")
    return generic, {**_GENERIC_DEFAULTS, "decoder_sparse_step": 1, "mlp_only_layers": []}


def _text_config(raw: dict[str, Any]) -> dict[str, Any]:
    text = raw.get("text_config")
    return {**raw, **text} if isinstance(text, dict) else raw


def _quantization(
    cfg: dict[str, Any], quant_file: dict[str, Any] | None, problems: Problems
) -> str:
    """The weight format the checkpoint is stored in (``bf16`` when unquantized)."""
    quant = cfg.get("quantization_config")
    if quant is None and quant_file is not None:
        quant = {"quant_method": "modelopt", **(quant_file.get("quantization") or {})}
    if quant is None:
        return "bf16"
    if not isinstance(quant, dict):
        problems.add("quantization_config", quant, "a JSON object")
        return "bf16"
    method = str(quant.get("quant_method") or "").lower()
    known = sorted({*QUANT_METHODS, "modelopt", "compressed-tensors"})
    if method == "modelopt" or (not method and quant.get("quant_algo")):
        algo = str(quant.get("quant_algo") or "").lower()
        if algo in MODELOPT_ALGOS:
            return MODELOPT_ALGOS[algo]
        problems.add(
            "quantization_config.quant_algo",
            quant.get("quant_algo"),
            f"a ModelOpt algorithm the planner has a format for: {sorted(MODELOPT_ALGOS)}",
        )
        return "bf16"
    if method == "compressed-tensors":
        return _compressed_tensors(quant, problems)
    if method in ("awq", "awq_marlin", "gptq", "gptq_marlin"):
        bits = quant.get("bits", quant.get("w_bit"))
        if bits != 4:
            problems.add(
                "quantization_config.bits",
                bits,
                f"4 ({method} checkpoints are planned as INT4 weight-only; the planner has "
                "no format for other widths)",
            )
        return "int4"
    if method in QUANT_METHODS:
        return QUANT_METHODS[method]
    problems.add(
        "quantization_config.quant_method",
        quant.get("quant_method"),
        f"a method the planner has a weight format for: {known} (vLLM's names)",
    )
    return "bf16"


def _compressed_tensors(quant: dict[str, Any], problems: Problems) -> str:
    """llm-compressor's ``config_groups.*.weights`` ({num_bits, type}) as a weight format.

    ASSUMED from the schemes vLLM loads (vllm/model_executor/layers/quantization/
    compressed_tensors): float 8-bit = FP8, float 4-bit = NVFP4, int 4-bit = INT4 (W4A16).
    """
    groups = quant.get("config_groups")
    found: set[str] = set()
    for group in groups.values() if isinstance(groups, dict) else ():
        weights = (group or {}).get("weights") or {}
        bits, kind = weights.get("num_bits"), str(weights.get("type") or "").lower()
        if kind == "float" and bits == 8:
            found.add("fp8")
        elif kind == "float" and bits == 4:
            found.add("nvfp4")
        elif kind == "int" and bits == 4:
            found.add("int4")
        else:
            found.add(f"{kind or '?'}{bits}")
    if len(found) == 1 and next(iter(found)) in ("fp8", "nvfp4", "int4"):
        return next(iter(found))
    problems.add(
        "quantization_config.config_groups",
        sorted(found) or None,
        "one weight scheme the planner has a format for: float 8-bit (fp8), float 4-bit "
        "(nvfp4) or int 4-bit (int4)",
    )
    return "bf16"


def spec_fields(
    path: str | Path,
    index_path: str | Path | None,
    bytes_per_param: Mapping[str, float],
    weight_format: str | None = None,
) -> dict[str, Any]:
    """``ModelSpec`` fields from ``config.json`` at ``path``; raises ``ModelConfigError``.

    ``bytes_per_param``: each weight format's storage cost (so this module needs no ``models``).
    ``weight_format``: refused when the checkpoint is stored quantized in another format.
    """
    path = Path(path)
    subject = f"model config {path}"
    cfg = _text_config(_read_json(path, subject))
    quant_path = path.parent / "hf_quant_config.json"
    quant_file = _read_json(quant_path, subject) if quant_path.is_file() else None
    problems = Problems(subject)
    family, defaults = _family(cfg)
    reader = _Reader(cfg, family, defaults, problems)
    counts = _count(reader)
    checkpoint = _quantization(cfg, quant_file, problems)
    if weight_format is not None and checkpoint != "bf16" and weight_format != checkpoint:
        problems.add(
            "weight_format",
            weight_format,
            f"{checkpoint}: the config's quantization_config stores the weights as "
            f"{checkpoint}, which vLLM serves as stored (use a BF16 checkpoint to serve "
            f"{weight_format})",
        )
    problems.raise_if_any(ModelConfigError)
    total = counts["total"]
    if index_path is not None:
        total = _total_from_index(Path(index_path), counts, bytes_per_param[checkpoint])
    return _spec(cfg, path, counts, total, index_path, checkpoint, family)


def _mlp_figures(r: _Reader, hidden: int, layers: int) -> dict[str, int]:
    """Per-family MLP figures: dense MLP params, MoE layers, experts, top-k, expert and shared
    params per MoE layer."""
    style = r.family.moe
    if style == "dense":
        return {"mlp": 3 * hidden * r.count("intermediate_size"), "moe_layers": 0, "experts": 0,
                "top_k": 0, "expert": 0, "shared": 0}  # fmt: skip
    if style == "mixtral":
        experts = r.count("num_local_experts", "num_experts")
        top_k = r.count("num_experts_per_tok", "experts_per_token")
        expert = 3 * hidden * r.count("intermediate_size")
        return {"mlp": 0, "moe_layers": layers, "experts": experts, "top_k": top_k,
                "expert": expert, "shared": 0}  # fmt: skip
    if style == "qwen_moe":
        experts = r.count("num_experts")
        top_k = r.count("num_experts_per_tok")
        expert = 3 * hidden * r.count("moe_intermediate_size")
        shared = 0
        if r.family.name == "Qwen2-MoE" or "shared_expert_intermediate_size" in r.cfg:
            shared = 3 * hidden * r.count("shared_expert_intermediate_size")
        step = r.count("decoder_sparse_step")
        dense_only = r.layer_list("mlp_only_layers", layers)
        moe = [i for i in range(layers) if i not in dense_only and (i + 1) % step == 0]
        mlp = 3 * hidden * r.count("intermediate_size") if len(moe) < layers else 0
        return {"mlp": mlp, "moe_layers": len(moe), "experts": experts, "top_k": top_k,
                "expert": expert, "shared": shared}  # fmt: skip
    if style == "llama4":
        experts = r.count("num_local_experts")
        top_k = r.count("num_experts_per_tok")
        inter = r.count("intermediate_size")
        if isinstance(r.cfg.get("moe_layers"), list):
            moe_layers = len(r.layer_list("moe_layers", layers))
        else:
            step = r.count("interleave_moe_layer_step")
            moe_layers = len(range(step - 1, layers, step))
        mlp = 3 * hidden * r.count("intermediate_size_mlp") if moe_layers < layers else 0
        return {"mlp": mlp, "moe_layers": moe_layers, "experts": experts, "top_k": top_k,
                "expert": 3 * hidden * inter, "shared": 3 * hidden * inter}  # fmt: skip
    # deepseek: layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0
    # (vllm/model_executor/models/deepseek_v2.py, DeepseekV2DecoderLayer).
    experts = r.count("n_routed_experts")
    top_k = r.count("num_experts_per_tok")
    inter = r.count("moe_intermediate_size")
    shared = r.count("n_shared_experts", minimum=0)
    first_dense = r.count("first_k_dense_replace", minimum=0)
    freq = r.count("moe_layer_freq")
    moe = [i for i in range(layers) if i >= first_dense and i % freq == 0]
    mlp = 3 * hidden * r.count("intermediate_size") if len(moe) < layers else 0
    return {"mlp": mlp, "moe_layers": len(moe), "experts": experts, "top_k": top_k,
            "expert": 3 * hidden * inter, "shared": 3 * hidden * inter * shared}  # fmt: skip


def _attention(r: _Reader, hidden: int, heads: int) -> tuple[int, int, int]:
    """(attention params of one layer, KV heads, head dim); KV heads/head dim 0 for MLA."""
    if r.family.moe == "deepseek" or r.cfg.get("kv_lora_rank"):
        rank = r.count("kv_lora_rank")
        rope = r.count("qk_rope_head_dim")
        nope = r.count("qk_nope_head_dim")
        v_dim = r.count("v_head_dim")
        if "q_lora_rank" not in r.cfg:
            r.problems.add(
                "q_lora_rank", None, "required for MLA: a positive integer, or null (no query "
                "compression, as in DeepSeek-V2-Lite)"
            )  # fmt: skip
        q_rank = r.optional_count("q_lora_rank")
        q_dim = heads * (nope + rope)
        query = hidden * q_rank + q_rank * q_dim if q_rank else hidden * q_dim
        params = (
            query + hidden * (rank + rope) + rank * heads * (nope + v_dim) + heads * v_dim * hidden
        )
        return params, 0, 0
    kv_heads = r.count("num_key_value_heads")
    head_dim = r.count("head_dim")
    if heads % kv_heads:
        r.problems.add(
            "num_key_value_heads", kv_heads, f"a divisor of num_attention_heads ({heads})"
        )
    return 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim, kv_heads, head_dim


def _count(r: _Reader) -> dict[str, Any]:
    hidden = r.count("hidden_size")
    layers = r.count("num_hidden_layers")
    heads = r.count("num_attention_heads")
    vocab = r.count("vocab_size")
    r.count("max_position_embeddings")
    attention, kv_heads, head_dim = _attention(r, hidden, heads)
    m = _mlp_figures(r, hidden, layers)
    experts, top_k, moe_layers = m["experts"], m["top_k"], m["moe_layers"]
    if experts and top_k > experts:
        r.problems.add(
            "num_experts_per_tok", top_k, f"an integer in 1..{experts} (the experts per layer)"
        )
    dense_layers = layers - moe_layers
    embed = vocab * hidden * (1 if r.flag("tie_word_embeddings") else 2)
    router = hidden * experts
    moe_layer = experts * m["expert"] + m["shared"] + router
    # absent: no MTP layers in the checkpoint (only DeepSeek-style configs name them)
    mtp = (
        r.count("num_nextn_predict_layers", minimum=0) if "num_nextn_predict_layers" in r.cfg else 0
    )
    body = layers * attention + dense_layers * m["mlp"] + moe_layers * moe_layer
    mtp_params = mtp * (attention + (moe_layer if experts else m["mlp"]) + 2 * hidden * hidden)
    active = (
        embed
        + layers * attention
        + dense_layers * m["mlp"]
        + moe_layers * (top_k * m["expert"] + m["shared"] + router)
    )
    return {
        "hidden": hidden, "layers": layers, "heads": heads, "kv_heads": kv_heads,
        "head_dim": head_dim, "embed": embed, "experts": experts if moe_layers else 0,
        "top_k": top_k if moe_layers else 0, "moe_layers": moe_layers, "mtp": mtp,
        "routed": moe_layers * experts * m["expert"], "total": embed + body + mtp_params,
        "active": active,
    }  # fmt: skip


def _total_from_index(index_path: Path, counts: dict[str, Any], bpp: float) -> float:
    """Exact total parameters from the checkpoint's bytes (``metadata.total_size``)."""
    index = _read_json(index_path, f"safetensors index {index_path}")
    size = (index.get("metadata") or {}).get("total_size")
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ModelConfigError(
            f"safetensors index {index_path}",
            [Problem("metadata.total_size", size, "a positive integer: the checkpoint's bytes")],
        )
    high = float(counts["embed"])
    return (size - high * max(2.0, bpp)) / bpp + high


def _spec(
    cfg: dict[str, Any],
    path: Path,
    c: dict[str, Any],
    total: float,
    index: Any,
    checkpoint: str,
    family: Family,
) -> dict[str, Any]:
    mla = c["kv_heads"] == 0
    source = f"local config.json {path}" + (f" with safetensors index {index}" if index else "")
    defaults = [key for key in family.defaults if key not in cfg]
    return dict(
        name=str(
            cfg.get("_name_or_path")
            or (path.parent.name if path.name == "config.json" else path.stem)
        ),
        total_params_b=total / 1e9,
        active_params_b=min(total, c["active"]) / 1e9,
        layers=c["layers"],
        attention_heads=c["heads"],
        max_context=int(cfg["max_position_embeddings"]),
        high_precision_params_b=c["embed"] / 1e9,
        attention="mla" if mla else "gqa",
        kv_heads=c["kv_heads"],
        head_dim=c["head_dim"],
        kv_lora_rank=int(cfg.get("kv_lora_rank") or 0) if mla else 0,
        qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 0) if mla else 0,
        mtp_layers=c["mtp"],
        checkpoint_format=checkpoint,
        source=source,
        assumptions=(
            f"{family.name} defaults for {', '.join(defaults)}: {family.source}" if defaults else ""
        ),
        experts=c["experts"],
        experts_per_token=c["top_k"],
        moe_layers=c["moe_layers"],
        hidden_size=c["hidden"],
        routed_params_b=c["routed"] / 1e9,
    )

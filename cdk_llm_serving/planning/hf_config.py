"""A ``ModelSpec`` from a local Hugging Face ``config.json`` (and optional safetensors index).

Reads only local files (no network at plan time). Understands the field names of the common
decoder families: Llama / Qwen / Mistral (GQA), DeepSeek-V2/V3 and Kimi-K2 (MLA:
``kv_lora_rank``, ``q_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``,
``v_head_dim``), MoE as ``n_routed_experts`` / ``num_experts`` / ``num_local_experts`` with
``num_experts_per_tok`` / ``experts_per_token``, ``moe_intermediate_size``,
``n_shared_experts`` or ``shared_expert_intermediate_size``, ``first_k_dense_replace``; MTP
layers as ``num_nextn_predict_layers``; ``tie_word_embeddings``; multimodal configs through
their ``text_config``.

Parameter counts come from the architecture (SwiGLU MLPs: 3 matrices; biases and norms
ignored, well under 0.1 %): embeddings + output head (unless tied) + per-layer attention +
dense MLPs + routed and shared experts and routers + MTP layers. Active parameters count the
``k`` routed experts per token and leave out the MTP layers. Embeddings and head are the
``high_precision_params_b`` (quantized checkpoints keep them in BF16). With
``model.safetensors.index.json``, the index's ``metadata.total_size`` (the checkpoint's exact
bytes) replaces the architecture's total. Checked against DeepSeek-V3's published figures:
the shipped ``tests/data/deepseek-r1-config.json`` counts 683B total (DeepSeek: 671B + 14B
MTP = 685B) and 37.6B active (DeepSeek: 37B).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, Problem, Problems

#: quantization_config.quant_method (or ModelOpt quant_algo) -> the planner's weight format.
QUANT_METHODS = {
    "fp8": "fp8",
    "mxfp4": "mxfp4",
    "nvfp4": "nvfp4",
    "awq": "int4",
    "gptq": "int4",
}


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


def _positive_int(cfg: dict[str, Any], key: str, problems: Problems, *, default: Any = None) -> int:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        problems.add(key, value, "a positive integer")
        return 1
    return value


def _optional_int(cfg: dict[str, Any], keys: tuple[str, ...]) -> int:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def _attention_params(
    cfg: dict[str, Any], hidden: int, heads: int, kv_layout: tuple[int, int], problems: Problems
) -> int:
    """Attention weights of one layer (MLA when ``kv_lora_rank`` is set, else GQA)."""
    if cfg.get("kv_lora_rank"):
        rank = _positive_int(cfg, "kv_lora_rank", problems)
        rope = _positive_int(cfg, "qk_rope_head_dim", problems)
        nope = _positive_int(cfg, "qk_nope_head_dim", problems)
        v_dim = _positive_int(cfg, "v_head_dim", problems)
        q_rank = _optional_int(cfg, ("q_lora_rank",))
        q_dim = heads * (nope + rope)
        query = hidden * q_rank + q_rank * q_dim if q_rank else hidden * q_dim
        return (
            query + hidden * (rank + rope) + rank * heads * (nope + v_dim) + heads * v_dim * hidden
        )
    kv_heads, head_dim = kv_layout
    return 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim


def _kv_layout(cfg: dict[str, Any], hidden: int, heads: int, problems: Problems) -> tuple[int, int]:
    kv_heads = _positive_int(cfg, "num_key_value_heads", problems, default=heads)
    head_dim = _optional_int(cfg, ("head_dim",)) or hidden // heads
    if heads % kv_heads:
        problems.add("num_key_value_heads", kv_heads, f"a divisor of num_attention_heads ({heads})")
    return kv_heads, head_dim


def _moe_figures(cfg: dict[str, Any], hidden: int) -> tuple[int, int, int, int]:
    """(experts, top-k, params of one routed expert, shared-expert params per MoE layer)."""
    experts = _optional_int(cfg, ("n_routed_experts", "num_experts", "num_local_experts"))
    top_k = _optional_int(
        cfg, ("num_experts_per_tok", "experts_per_token", "num_experts_per_token")
    )
    inter = _optional_int(cfg, ("moe_intermediate_size", "intermediate_size"))
    shared_inter = _optional_int(cfg, ("shared_expert_intermediate_size",))
    shared = 3 * hidden * (shared_inter or inter * _optional_int(cfg, ("n_shared_experts",)))
    return experts, top_k, 3 * hidden * inter, shared


def _checkpoint_format(cfg: dict[str, Any]) -> str:
    quant = cfg.get("quantization_config") or {}
    method = str(quant.get("quant_algo") or quant.get("quant_method") or "").lower()
    for key, name in QUANT_METHODS.items():
        if key in method:
            return name
    return "bf16"


def _text_config(raw: dict[str, Any]) -> dict[str, Any]:
    text = raw.get("text_config")
    return {**raw, **text} if isinstance(text, dict) else raw


def spec_fields(
    path: str | Path, index_path: str | Path | None, bytes_per_param: Mapping[str, float]
) -> dict[str, Any]:
    """``ModelSpec`` fields from ``config.json`` at ``path``; raises ``ModelConfigError``.

    ``bytes_per_param`` maps weight formats to their storage cost (``weight_formats()``),
    handed in so this module needs nothing of ``models`` (which builds the spec).
    """
    path = Path(path)
    subject = f"model config {path}"
    cfg = _text_config(_read_json(path, subject))
    problems = Problems(subject)
    counts = _count(cfg, problems)
    problems.raise_if_any(ModelConfigError)
    total = counts["total"]
    if index_path is not None:
        checkpoint = _checkpoint_format(cfg)
        total = _total_from_index(Path(index_path), counts, bytes_per_param[checkpoint])
    return _spec(cfg, path, counts, total, index_path)


def _count(cfg: dict[str, Any], problems: Problems) -> dict[str, Any]:
    hidden = _positive_int(cfg, "hidden_size", problems)
    layers = _positive_int(cfg, "num_hidden_layers", problems)
    heads = _positive_int(cfg, "num_attention_heads", problems)
    vocab = _positive_int(cfg, "vocab_size", problems)
    _positive_int(cfg, "max_position_embeddings", problems)
    mla = bool(cfg.get("kv_lora_rank"))
    kv_heads, head_dim = (0, 0) if mla else _kv_layout(cfg, hidden, heads, problems)
    attention = _attention_params(cfg, hidden, heads, (kv_heads, head_dim), problems)
    experts, top_k, expert, shared = _moe_figures(cfg, hidden)
    if experts and not 1 <= top_k <= experts:
        problems.add(
            "num_experts_per_tok",
            top_k or None,
            f"an integer in 1..{experts} (the experts per layer)",
        )
    dense_layers = (
        min(layers, _optional_int(cfg, ("first_k_dense_replace",))) if experts else layers
    )
    moe_layers = layers - dense_layers
    mlp = 3 * hidden * _optional_int(cfg, ("intermediate_size",))
    embed = vocab * hidden * (1 if cfg.get("tie_word_embeddings", False) else 2)
    router = hidden * experts
    moe_layer = experts * expert + shared + router
    mtp = _optional_int(cfg, ("num_nextn_predict_layers",))
    body = layers * attention + dense_layers * mlp + moe_layers * moe_layer
    mtp_params = mtp * (attention + (moe_layer if experts else mlp) + 2 * hidden * hidden)
    active = (
        embed
        + layers * attention
        + dense_layers * mlp
        + moe_layers * (top_k * expert + shared + router)
    )
    return {
        "hidden": hidden, "layers": layers, "heads": heads, "kv_heads": kv_heads,
        "head_dim": head_dim, "embed": embed, "experts": experts,
        "top_k": top_k, "moe_layers": moe_layers if experts else 0, "mtp": mtp,
        "routed": moe_layers * experts * expert, "total": embed + body + mtp_params, "active": active,
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
    cfg: dict[str, Any], path: Path, c: dict[str, Any], total: float, index: Any
) -> dict[str, Any]:
    mla = bool(cfg.get("kv_lora_rank"))
    heads = c["heads"]
    source = f"local config.json {path}" + (f" with safetensors index {index}" if index else "")
    return dict(
        name=str(
            cfg.get("_name_or_path")
            or (path.parent.name if path.name == "config.json" else path.stem)
        ),
        total_params_b=total / 1e9,
        active_params_b=min(total, c["active"]) / 1e9,
        layers=c["layers"],
        attention_heads=heads,
        max_context=int(cfg["max_position_embeddings"]),
        high_precision_params_b=c["embed"] / 1e9,
        attention="mla" if mla else "gqa",
        kv_heads=c["kv_heads"],
        head_dim=c["head_dim"],
        kv_lora_rank=int(cfg.get("kv_lora_rank") or 0),
        qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 0) if mla else 0,
        mtp_layers=c["mtp"],
        checkpoint_format=_checkpoint_format(cfg),
        source=source,
        experts=c["experts"],
        experts_per_token=c["top_k"],
        moe_layers=c["moe_layers"],
        hidden_size=c["hidden"],
        routed_params_b=c["routed"] / 1e9,
    )

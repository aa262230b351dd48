"""ModelSpec.from_hf_config: a real published config.json, MoE/MLA/MTP/tied fields, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.planning.hf_config import ModelConfigError
from cdk_llm_serving.planning.models import ModelSpec, preset
from cdk_llm_serving.planning.sizing import plan

DATA = Path(__file__).parents[1] / "data"
DEEPSEEK = DATA / "deepseek-r1-config.json"  # source: tests/data/README.md


def test_deepseek_r1_config_gives_the_published_figures():
    spec = ModelSpec.from_hf_config(DEEPSEEK)
    assert spec.attention == "mla" and (spec.kv_lora_rank, spec.qk_rope_head_dim) == (512, 64)
    assert (spec.experts, spec.experts_per_token, spec.moe_layers) == (256, 8, 58)
    assert spec.mtp_layers == 1 and spec.checkpoint_format == "fp8"
    assert spec.total_params_b == pytest.approx(685, rel=0.01)  # DeepSeek: 671B + 14B MTP
    assert spec.active_params_b == pytest.approx(37, rel=0.03)
    assert spec.kv_values_per_token() == preset("deepseek-v3").kv_values_per_token()
    assert spec.max_context == 163840 and spec.is_moe


def test_a_config_spec_plans_like_the_preset():
    from_config = plan(
        ModelSpec.from_hf_config(DEEPSEEK), "fp8", "ml.p5en.48xlarge", max_context=131072
    )
    from_preset = plan("deepseek-r1", "fp8", "ml.p5en.48xlarge", max_context=131072)
    assert (from_config.nodes, from_config.tensor_parallel) == (
        from_preset.nodes,
        from_preset.tensor_parallel,
    )


def _write(tmp_path: Path, **overrides: object) -> Path:
    cfg = {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336,
        "max_position_embeddings": 131072, "tie_word_embeddings": False,
    }  # fmt: skip
    cfg.update(overrides)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_dense_gqa_config_and_tied_embeddings(tmp_path):
    untied = ModelSpec.from_hf_config(_write(tmp_path))
    assert untied.total_params_b == pytest.approx(8.03, rel=0.01)  # Llama 3.1 8B
    assert (untied.kv_heads, untied.head_dim, untied.attention) == (8, 128, "gqa")
    tied = ModelSpec.from_hf_config(_write(tmp_path, tie_word_embeddings=True))
    assert untied.total_params_b - tied.total_params_b == pytest.approx(128256 * 4096 / 1e9)
    assert not tied.is_moe


def test_safetensors_index_gives_the_exact_size(tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 16_060_522_496}, "weight_map": {}}))
    spec = ModelSpec.from_hf_config(_write(tmp_path), index)
    assert spec.total_params_b == pytest.approx(16_060_522_496 / 2 / 1e9)


def test_bad_configs_list_every_problem(tmp_path):
    path = _write(
        tmp_path, hidden_size=0, num_key_value_heads=5, num_experts=8, num_experts_per_tok=9
    )
    with pytest.raises(ModelConfigError) as caught:
        ModelSpec.from_hf_config(path)
    props = {p.property for p in caught.value.problems}
    assert {"hidden_size", "num_key_value_heads", "num_experts_per_tok"} <= props
    assert isinstance(caught.value, ConfigurationError)
    assert "a divisor of num_attention_heads (32)" in str(caught.value)


def test_missing_or_broken_files(tmp_path):
    with pytest.raises(ModelConfigError, match="a readable local file"):
        ModelSpec.from_hf_config(tmp_path / "nope.json")
    broken = tmp_path / "config.json"
    broken.write_text("{")
    with pytest.raises(ModelConfigError, match="valid JSON"):
        ModelSpec.from_hf_config(broken)
    index = tmp_path / "index.json"
    index.write_text(json.dumps({"metadata": {}}))
    with pytest.raises(ModelConfigError, match="metadata.total_size"):
        ModelSpec.from_hf_config(_write(tmp_path), index)

"""ModelSpec.from_hf_config: a real published config.json, MoE/MLA/MTP/tied fields, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.planning.hf_config import ModelConfigError
from cdk_llm_serving.planning.models import ModelSpec, WeightFormat, preset
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


# --- config.json read strictly ---------------------------------------------------------
# The sizing fields of published Hugging Face configs, copied key for key from the verbatim
# copies that the PyPI package aiconfigurator-core 0.12.0 ships (aiconfigurator_core/
# model_configs/<org>--<name>_config.json; the Hub's config.json of each model).
LLAMA_70B = {
    "model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 80,
    "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256,
    "intermediate_size": 28672, "max_position_embeddings": 131072, "tie_word_embeddings": False,
}  # fmt: skip
MIXTRAL_8X7B = {
    "model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "tie_word_embeddings": False,
    "num_local_experts": 8, "num_experts_per_tok": 2,
}  # fmt: skip
QWEN3_235B_FP8 = {
    "model_type": "qwen3_moe", "hidden_size": 4096, "num_hidden_layers": 94,
    "num_attention_heads": 64, "num_key_value_heads": 4, "vocab_size": 151936,
    "intermediate_size": 12288, "max_position_embeddings": 40960, "tie_word_embeddings": False,
    "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 1536,
    "decoder_sparse_step": 1, "mlp_only_layers": [],
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
}  # fmt: skip
GPT_OSS_120B = {
    "model_type": "gpt_oss", "hidden_size": 2880, "num_hidden_layers": 36,
    "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 201088,
    "intermediate_size": 2880, "max_position_embeddings": 131072, "tie_word_embeddings": False,
    "head_dim": 64, "num_local_experts": 128, "num_experts_per_tok": 4, "experts_per_token": 4,
    "quantization_config": {"quant_method": "mxfp4"},
}  # fmt: skip
KIMI_K2 = {
    "model_type": "kimi_k2", "hidden_size": 7168, "num_hidden_layers": 61,
    "num_attention_heads": 64, "num_key_value_heads": 64, "vocab_size": 163840,
    "intermediate_size": 18432, "max_position_embeddings": 131072, "tie_word_embeddings": False,
    "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "n_routed_experts": 384,
    "n_shared_experts": 1, "first_k_dense_replace": 1, "moe_layer_freq": 1, "kv_lora_rank": 512,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "num_nextn_predict_layers": 0,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
}  # fmt: skip
LLAMA4_MAVERICK = {  # the text_config of Llama-4-Maverick-17B-128E-Instruct
    "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48,
        "num_attention_heads": 40, "num_key_value_heads": 8, "vocab_size": 202048,
        "intermediate_size": 8192, "max_position_embeddings": 1048576, "head_dim": 128,
        "num_local_experts": 128, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
        "intermediate_size_mlp": 16384,
    },
}  # fmt: skip
# Qwen1.5-MoE-A2.7B (model card: 14.3B total, 2.7B active): the reference checkpoint of
# transformers' Qwen2MoeConfig, whose defaults are these figures.
QWEN15_MOE = {
    "model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
    "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936,
    "intermediate_size": 5632, "max_position_embeddings": 8192, "tie_word_embeddings": False,
    "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632, "decoder_sparse_step": 1, "mlp_only_layers": [],
}  # fmt: skip
GIB = 2**30


def _config(tmp_path: Path, cfg: dict, *, drop: tuple[str, ...] = (), **overrides) -> Path:
    cfg = {key: value for key, value in {**cfg, **overrides}.items() if key not in drop}
    if "text_config" in cfg:
        cfg["text_config"] = {k: v for k, v in cfg["text_config"].items() if k not in drop}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def _missing(tmp_path: Path, cfg: dict, *drop: str) -> set[str]:
    with pytest.raises(ModelConfigError) as caught:
        ModelSpec.from_hf_config(_config(tmp_path, cfg, drop=drop))
    return {p.property for p in caught.value.problems if p.value is None}


def test_llama_70b_config_sizes_at_its_published_size(tmp_path):
    spec = ModelSpec.from_hf_config(_config(tmp_path, LLAMA_70B))
    assert spec.total_params_b == pytest.approx(70.6, rel=0.005)
    bf16 = WeightFormat.BF16.stored_bytes(spec.total_params_b, spec.high_precision_params_b)
    assert bf16 / GIB == pytest.approx(131.4, abs=0.1)
    assert spec.checkpoint_format == "bf16" and not spec.is_moe


def test_a_llama_config_without_intermediate_size_is_refused_not_planned_at_a_fifth(tmp_path):
    # Today's code planned it at 26.4 GiB (attention and embeddings only).
    assert _missing(tmp_path, LLAMA_70B, "intermediate_size") == {"intermediate_size"}


def test_one_error_names_every_missing_field(tmp_path):
    missing = _missing(tmp_path, LLAMA_70B, "intermediate_size", "vocab_size", "hidden_size")
    assert missing == {"intermediate_size", "vocab_size", "hidden_size"}


def test_llama_defaults_only_where_llamaconfig_derives_them(tmp_path):
    # LlamaConfig.__post_init__: num_key_value_heads = heads, head_dim = hidden // heads;
    # tie_word_embeddings = False.
    spec = ModelSpec.from_hf_config(
        _config(tmp_path, LLAMA_70B, drop=("num_key_value_heads", "tie_word_embeddings"))
    )
    assert (spec.kv_heads, spec.head_dim) == (64, 128)
    assert (
        "num_key_value_heads" in spec.assumptions and "configuration_llama.py" in spec.assumptions
    )


def test_mixtral_without_its_expert_count_is_refused_not_planned_dense(tmp_path):
    spec = ModelSpec.from_hf_config(_config(tmp_path, MIXTRAL_8X7B))
    assert spec.total_params_b == pytest.approx(46.7, rel=0.01)  # Mistral: 46.7B total
    assert spec.active_params_b == pytest.approx(12.9, rel=0.01)  # 12.9B active
    assert (spec.experts, spec.experts_per_token, spec.moe_layers) == (8, 2, 32)
    assert _missing(tmp_path, MIXTRAL_8X7B, "num_local_experts", "num_experts_per_tok") == {
        "num_local_experts",
        "num_experts_per_tok",
    }
    # Mixtral's class defaults num_key_value_heads to the constant 8: required.
    assert _missing(tmp_path, MIXTRAL_8X7B, "num_key_value_heads") == {"num_key_value_heads"}


def test_qwen3_moe_config_and_its_fp8_quantization(tmp_path):
    spec = ModelSpec.from_hf_config(_config(tmp_path, QWEN3_235B_FP8))
    assert spec.total_params_b == pytest.approx(235, rel=0.01)  # Qwen: 235B total, 22B active
    assert spec.active_params_b == pytest.approx(22, rel=0.03)
    assert spec.checkpoint_format == "fp8" and spec.moe_layers == 94
    assert _missing(tmp_path, QWEN3_235B_FP8, "num_experts", "moe_intermediate_size") == {
        "num_experts",
        "moe_intermediate_size",
    }


def test_qwen2_moe_needs_its_shared_expert(tmp_path):
    spec = ModelSpec.from_hf_config(_config(tmp_path, QWEN15_MOE))
    assert spec.total_params_b == pytest.approx(14.3, rel=0.02)
    assert spec.active_params_b == pytest.approx(2.7, rel=0.05)
    assert _missing(tmp_path, QWEN15_MOE, "shared_expert_intermediate_size") == {
        "shared_expert_intermediate_size"
    }


def test_deepseek_family_fields_are_required(tmp_path):
    cfg = json.loads(DEEPSEEK.read_text())
    missing = _missing(tmp_path, cfg, "first_k_dense_replace", "n_shared_experts", "q_lora_rank")
    assert missing == {"first_k_dense_replace", "n_shared_experts", "q_lora_rank"}
    kimi = ModelSpec.from_hf_config(_config(tmp_path, KIMI_K2))
    assert kimi.total_params_b == pytest.approx(1040, rel=0.02)  # Moonshot: 1T total
    assert kimi.active_params_b == pytest.approx(32, rel=0.03)  # 32B active
    assert (kimi.experts, kimi.moe_layers, kimi.mtp_layers) == (384, 60, 0)


def test_gpt_oss_and_llama4_moe_layouts(tmp_path):
    oss = ModelSpec.from_hf_config(_config(tmp_path, GPT_OSS_120B))
    assert oss.total_params_b == pytest.approx(116.8, rel=0.01)  # OpenAI model card: 116.8B total
    # OpenAI's 5.13B active counts the unembedding only; this count also has the input
    # embedding (201088 x 2880 = 0.58B).
    assert oss.active_params_b == pytest.approx(5.13 + 0.58, rel=0.01)
    assert oss.checkpoint_format == "mxfp4"
    maverick = ModelSpec.from_hf_config(_config(tmp_path, LLAMA4_MAVERICK))
    assert maverick.moe_layers == 24  # interleave_moe_layer_step 2
    assert maverick.total_params_b == pytest.approx(400, rel=0.02)  # Meta: 400B total
    assert maverick.active_params_b == pytest.approx(17, rel=0.03)  # 17B active
    assert _missing(tmp_path, LLAMA4_MAVERICK, "intermediate_size_mlp") == {"intermediate_size_mlp"}


@pytest.mark.parametrize(
    ("quantization", "expected"),
    [
        ({"quant_method": "fp8", "fmt": "e4m3"}, "fp8"),
        ({"quant_method": "mxfp4"}, "mxfp4"),
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "int4"),
        ({"quant_method": "gptq", "bits": 4}, "int4"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            "fp8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "group_0": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}
                },
            },
            "nvfp4",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}}},
            },
            "int4",
        ),
    ],
)
def test_quantization_config_is_the_checkpoint_format(tmp_path, quantization, expected):
    path = _config(tmp_path, LLAMA_70B, quantization_config=quantization)
    assert ModelSpec.from_hf_config(path).checkpoint_format == expected


def test_modelopt_hf_quant_config_beside_config_json(tmp_path):
    path = _config(tmp_path, LLAMA_70B)
    (tmp_path / "hf_quant_config.json").write_text(
        json.dumps({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}})
    )
    assert ModelSpec.from_hf_config(path).checkpoint_format == "fp8"


def test_unknown_or_unsupported_quantization_is_refused(tmp_path):
    for quantization, prop in [
        (
            {"quant_method": "bitsandbytes", "load_in_4bit": True},
            "quantization_config.quant_method",
        ),
        ({"quant_method": "gptq", "bits": 8}, "quantization_config.bits"),
        ({"quant_method": "modelopt", "quant_algo": "INT8_SQ"}, "quantization_config.quant_algo"),
    ]:
        with pytest.raises(ModelConfigError) as caught:
            ModelSpec.from_hf_config(_config(tmp_path, LLAMA_70B, quantization_config=quantization))
        assert prop in {p.property for p in caught.value.problems}, quantization


def test_a_weight_format_other_than_the_quantized_checkpoints_is_an_error(tmp_path):
    path = _config(tmp_path, QWEN3_235B_FP8)
    with pytest.raises(ModelConfigError, match="weight_format = 'nvfp4'"):
        ModelSpec.from_hf_config(path, weight_format="nvfp4")
    assert ModelSpec.from_hf_config(path, weight_format="fp8").checkpoint_format == "fp8"
    # A BF16 checkpoint can be quantized on load (vLLM --quantization fp8).
    bf16 = _config(tmp_path, LLAMA_70B)
    assert (
        ModelSpec.from_hf_config(bf16, weight_format=WeightFormat.FP8).checkpoint_format == "bf16"
    )


def test_plan_command_refuses_a_weight_format_the_quantized_config_contradicts(capsys):
    from cdk_llm_serving.ops.cli import main

    args = ["plan", "--model-config", str(DEEPSEEK), "--instance-type", "ml.p6-b200.48xlarge"]
    code = main([*args, "--weight-format", "nvfp4", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 2 and "weight_format" in {p["property"] for p in data["problems"]}
    assert main([*args, "--weight-format", "fp8", "--json"]) == 0

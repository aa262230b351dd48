"""The SageMaker rehearsal's environment substitutions: only what a CPU cannot run."""

from __future__ import annotations

import pytest

from rehearsal.sagemaker.substitutions import SubstitutionError, substitute


def test_gpu_only_settings_are_replaced_and_the_rest_passes_unchanged():
    env, applied = substitute(
        {
            "SM_VLLM_TENSOR_PARALLEL_SIZE": "4",
            "SM_VLLM_ENABLE_EXPERT_PARALLEL": "true",
            "SM_VLLM_MAX_MODEL_LEN": "32768",
            "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
            "SM_VLLM_QUANTIZATION": "awq_marlin",
            "SM_VLLM_SERVED_MODEL_NAME": '["a", "b"]',
            "SM_VLLM_MODEL": "/opt/ml/model",
        }
    )
    assert env["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "1"
    assert env["SM_VLLM_MAX_MODEL_LEN"] == "4096"
    for removed in (
        "SM_VLLM_ENABLE_EXPERT_PARALLEL",
        "SM_VLLM_GPU_MEMORY_UTILIZATION",
        "SM_VLLM_QUANTIZATION",
    ):
        assert removed not in env
    assert env["SM_VLLM_SERVED_MODEL_NAME"] == '["a", "b"]'
    assert env["SM_VLLM_MODEL"] == "/opt/ml/model"
    assert env["VLLM_TARGET_DEVICE"] == "cpu"
    changed = {s.variable for s in applied}
    assert "SM_VLLM_SERVED_MODEL_NAME" not in changed
    assert {"SM_VLLM_TENSOR_PARALLEL_SIZE", "SM_VLLM_QUANTIZATION"} <= changed


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SM_VLLM_QUANTIZATION", "bitsandbytes-someday"),
        ("SM_VLLM_SPECULATIVE_CONFIG", '{"method": "eagle", "model": "/opt/ml/draft"}'),
        ("SM_VLLM_TENSOR_PARALLEL_SIZE", "$(TP)"),
    ],
)
def test_a_listed_variable_with_an_unknown_value_is_refused_not_guessed(variable, value):
    with pytest.raises(SubstitutionError):
        substitute({variable: value})


def test_parsers_become_the_test_models_own_and_an_absent_parser_stays_absent():
    env, _ = substitute(
        {"SM_VLLM_TOOL_CALL_PARSER": "openai", "SM_VLLM_REASONING_PARSER": "openai_gptoss"}
    )
    assert env["SM_VLLM_TOOL_CALL_PARSER"] == "qwen3_coder"
    assert env["SM_VLLM_REASONING_PARSER"] == "qwen3"
    env, _ = substitute({"SM_VLLM_MODEL": "/opt/ml/model"})
    assert "SM_VLLM_TOOL_CALL_PARSER" not in env
    assert "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE" not in env

"""VllmConfig: each field to its flag and its SM_VLLM_* variable; every rejection; hardware checks."""

from __future__ import annotations

import json

import pytest

from cdk_llm_serving.vllm import (
    Eagle3Speculation,
    MtpSpeculation,
    NgramSpeculation,
    VllmConfig,
    VllmConfigError,
    sagemaker_variable,
)
from cdk_llm_serving.vllm.hardware import check_on_hardware

FIELD_CASES = [
    ("served_model_name", "m-1", "--served-model-name", "m-1"),
    ("tensor_parallel_size", 8, "--tensor-parallel-size", "8"),
    ("pipeline_parallel_size", 2, "--pipeline-parallel-size", "2"),
    ("data_parallel_size", 4, "--data-parallel-size", "4"),
    ("quantization", "modelopt_fp4", "--quantization", "modelopt_fp4"),
    ("reasoning_parser", "qwen3", "--reasoning-parser", "qwen3"),
    ("max_model_len", 131072, "--max-model-len", "131072"),
    ("gpu_memory_utilization", 0.92, "--gpu-memory-utilization", "0.92"),
    ("kv_cache_dtype", "fp8", "--kv-cache-dtype", "fp8"),
    ("load_format", "runai_streamer", "--load-format", "runai_streamer"),
]


@pytest.mark.parametrize(
    ("field", "value", "flag", "rendered"), FIELD_CASES, ids=[c[0] for c in FIELD_CASES]
)
def test_each_field_maps_to_its_flag_and_variable(field, value, flag, rendered):
    config = VllmConfig(model="/weights", **{field: value})
    args = config.to_args()
    assert args[0] == "/weights"
    assert args[args.index(flag) + 1] == rendered
    assert config.to_sagemaker_environment()[sagemaker_variable(flag[2:])] == rendered


def test_model_is_positional_in_args_and_a_variable_on_sagemaker():
    config = VllmConfig(model="s3://bucket/weights/", load_format="runai_streamer")
    assert config.to_args() == ["s3://bucket/weights/", "--load-format", "runai_streamer"]
    assert config.to_sagemaker_environment() == {
        "SM_VLLM_MODEL": "s3://bucket/weights/",
        "SM_VLLM_LOAD_FORMAT": "runai_streamer",
    }


def test_booleans_are_bare_flags_or_absent():
    on = VllmConfig(
        model="m",
        enable_expert_parallel=True,
        extra_flags={"enforce-eager": True, "disable-log-stats": False},
    )
    assert "--enable-expert-parallel" in on.to_args() and "--enforce-eager" in on.to_args()
    assert "--disable-log-stats" not in on.to_args()
    env = on.to_sagemaker_environment()
    assert (
        env["SM_VLLM_ENABLE_EXPERT_PARALLEL"] == "true" and env["SM_VLLM_ENFORCE_EAGER"] == "true"
    )
    assert "SM_VLLM_DISABLE_LOG_STATS" not in env
    off = VllmConfig(model="m")
    assert off.to_args() == ["m"] and off.to_sagemaker_environment() == {"SM_VLLM_MODEL": "m"}


def test_tool_parser_turns_on_auto_tool_choice():
    config = VllmConfig(model="m", tool_call_parser="qwen3_coder")
    args = config.to_args()
    assert (
        "--enable-auto-tool-choice" in args
        and args[args.index("--tool-call-parser") + 1] == "qwen3_coder"
    )
    assert (
        "--enable-auto-tool-choice"
        not in VllmConfig(
            model="m", tool_call_parser="hermes", enable_auto_tool_choice=False
        ).to_args()
    )


@pytest.mark.parametrize(
    ("speculation", "expected"),
    [
        (MtpSpeculation(num_speculative_tokens=2), {"method": "mtp", "num_speculative_tokens": 2}),
        (
            Eagle3Speculation(draft_model="/drafts/eagle3", num_speculative_tokens=3),
            {"method": "eagle3", "model": "/drafts/eagle3", "num_speculative_tokens": 3},
        ),
        (
            NgramSpeculation(),
            {
                "method": "ngram",
                "num_speculative_tokens": 4,
                "prompt_lookup_max": 4,
                "prompt_lookup_min": 1,
            },
        ),
    ],
)
def test_speculative_config_is_compact_json(speculation, expected):
    config = VllmConfig(model="m", speculative=speculation)
    args = config.to_args()
    value = args[args.index("--speculative-config") + 1]
    assert " " not in value and json.loads(value) == expected
    assert config.to_sagemaker_environment()["SM_VLLM_SPECULATIVE_CONFIG"] == value


def _parse_args(args: list[str]) -> dict[str, str]:
    parsed, rest = {"model": args[0]}, args[1:]
    index = 0
    while index < len(rest):
        name = rest[index][2:]
        if index + 1 < len(rest) and not rest[index + 1].startswith("--"):
            parsed[name] = rest[index + 1]
            index += 2
        else:
            parsed[name] = "true"
            index += 1
    return parsed


def _parse_environment(env: dict[str, str]) -> dict[str, str]:
    """What the SageMaker container does: SM_VLLM_FOO_BAR -> --foo-bar."""
    return {
        key.removeprefix("SM_VLLM_").lower().replace("_", "-"): value
        for key, value in env.items()
        if key.startswith("SM_VLLM_")
    }


def test_args_and_environment_describe_the_same_server():
    config = VllmConfig(
        model="/opt/ml/model",
        served_model_name="big-nvfp4",
        tensor_parallel_size=8,
        pipeline_parallel_size=2,
        enable_expert_parallel=True,
        quantization="modelopt_fp4",
        speculative=MtpSpeculation(1),
        reasoning_parser="qwen3",
        tool_call_parser="qwen3_xml",
        max_model_len=131072,
        gpu_memory_utilization=0.9,
        kv_cache_dtype="fp8",
        max_num_seqs=64,
        extra_flags={"max-num-batched-tokens": 8192, "enforce-eager": True},
    )
    assert _parse_args(config.to_args()) == _parse_environment(config.to_sagemaker_environment())


@pytest.mark.parametrize(
    ("config", "prop", "fragment"),
    [
        (
            VllmConfig(model="m", enable_auto_tool_choice=True),
            "enable_auto_tool_choice",
            "without a tool_call_parser",
        ),
        (
            VllmConfig(model="m", extra_flags={"enable-reasoning": True}),
            "extra_flags['enable-reasoning']",
            "was removed",
        ),
        (
            VllmConfig(model="m", extra_flags={"--max-num-seqs": 4}),
            "extra_flags['--max-num-seqs']",
            "no leading '--'",
        ),
        (
            VllmConfig(model="m", extra_flags={"quantization": "fp8"}),
            "extra_flags['quantization']",
            "has a typed field",
        ),
        (
            VllmConfig(model="m", speculative=Eagle3Speculation(draft_model="")),
            "speculative.draft_model",
            "needs the draft model",
        ),
        (
            VllmConfig(model="m", speculative=MtpSpeculation(0)),
            "speculative.num_speculative_tokens",
            "at least 1",
        ),
        (
            VllmConfig(
                model="m", speculative=NgramSpeculation(prompt_lookup_min=5, prompt_lookup_max=2)
            ),
            "speculative.prompt_lookup_min",
            "prompt_lookup_min <= prompt_lookup_max",
        ),
        (VllmConfig(model="m", tensor_parallel_size=0), "tensor_parallel_size", "at least 1"),
        (VllmConfig(model="m", gpu_memory_utilization=1.2), "gpu_memory_utilization", "(0, 1]"),
        (VllmConfig(model="m", kv_cache_dtype="int8"), "kv_cache_dtype", "must be one of"),
        (
            VllmConfig(model="m", served_model_name="has space"),
            "served_model_name",
            "without whitespace",
        ),
        (VllmConfig(model=""), "model", "weights' location"),
    ],
)
def test_rejections(config, prop, fragment):
    with pytest.raises(VllmConfigError) as caught:
        config.to_args()
    (problem,) = caught.value.problems
    assert problem.property == prop and fragment in problem.allowed


@pytest.mark.parametrize(
    ("config", "instance_type", "model", "prop"),
    [
        (
            VllmConfig(model="m", tensor_parallel_size=3),
            "ml.p5.48xlarge",
            None,
            "tensor_parallel_size x pipeline_parallel_size x data_parallel_size",
        ),
        (
            VllmConfig(model="m", tensor_parallel_size=8, data_parallel_size=2),
            "ml.p5.48xlarge",
            None,
            "tensor_parallel_size x pipeline_parallel_size x data_parallel_size",
        ),
        (
            VllmConfig(model="m", tensor_parallel_size=8),
            "ml.g6e.12xlarge",
            None,
            "tensor_parallel_size",
        ),
        (
            VllmConfig(model="m", speculative=MtpSpeculation()),
            "ml.p5.48xlarge",
            "gpt-oss-120b",
            "speculative",
        ),
        (
            VllmConfig(model="m", max_model_len=262144),
            "ml.p5.48xlarge",
            "gpt-oss-120b",
            "max_model_len",
        ),
        (
            VllmConfig(model="m", enable_expert_parallel=True, tensor_parallel_size=8),
            "ml.p5.48xlarge",
            "llama-3.1-405b",
            "enable_expert_parallel",
        ),
    ],
)
def test_hardware_rejections(config, instance_type, model, prop):
    check = check_on_hardware(config, instance_type, model=model)
    assert prop in [p.property for p in check.problems]


def test_mtp_on_a_model_with_mtp_layers_and_nvfp4_off_blackwell_warns():
    config = VllmConfig(
        model="m",
        tensor_parallel_size=8,
        pipeline_parallel_size=2,
        quantization="modelopt_fp4",
        speculative=MtpSpeculation(),
    )
    on_hopper = check_on_hardware(config, "ml.p5en.48xlarge", model="reference-2.4t-a95b", nodes=2)
    assert on_hopper.problems == () and "no native kernels on H200" in on_hopper.warnings[0]
    on_blackwell = check_on_hardware(
        config, "ml.p6-b200.48xlarge", model="reference-2.4t-a95b", nodes=2
    )
    assert on_blackwell.problems == () and on_blackwell.warnings == ()

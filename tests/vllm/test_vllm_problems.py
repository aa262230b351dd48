"""vLLM's checks carry ``errors.Problem`` objects end to end: no tuples to unpack."""

from __future__ import annotations

import pytest

from cdk_llm_serving.errors import ConfigurationError, Problem, Problems
from cdk_llm_serving.planning import InstanceType, WeightFormat
from cdk_llm_serving.vllm import (
    NgramSpeculation,
    VllmConfig,
    VllmConfigError,
    check_on_hardware,
    derive_pool_config,
)
from cdk_llm_serving.vllm.multinode import leader_command
from cdk_llm_serving.vllm.registry import quantization_problems, sagemaker_environment_problems

BAD = VllmConfig(
    model="",
    tensor_parallel_size=3,
    speculative=NgramSpeculation(prompt_lookup_min=5),
    extra_flags={"--x": 1, "enable-eplb": True, "nnodes": 2},
)


@pytest.fixture
def no_tuple_unpacking():
    """A ``Problem`` cannot be read as a tuple (the shims are gone), so any code on the paths
    these tests drive that still unpacked one would fail with ``TypeError``."""
    with pytest.raises(TypeError):
        _prop, _value, _allowed = Problem("p", 1, "a")  # type: ignore[misc]
    with pytest.raises(TypeError):
        Problem("p", 1, "a")[0]  # type: ignore[index]


def test_config_problems_are_problems_and_the_error_carries_them(no_tuple_unpacking):
    found = BAD.problems()
    assert found and all(type(problem) is Problem for problem in found)
    with pytest.raises(VllmConfigError) as caught:
        BAD.validate()
    assert isinstance(caught.value, ConfigurationError)
    assert caught.value.problems == tuple(found)
    assert [p.property for p in found] == [
        "model",
        "speculative.prompt_lookup_min",
        "extra_flags['--x']",
    ]


def test_hardware_and_launcher_checks_add_to_a_construct_s_problems(no_tuple_unpacking):
    config = VllmConfig(model="m", tensor_parallel_size=3, extra_flags={"enable-eplb": True})
    check = check_on_hardware(config, InstanceType.ML_P5_48XLARGE, weight_format=WeightFormat.FP8)
    problems = Problems("Service")
    problems.extend(check.problems, "config")
    assert [p.property for p in problems.problems()] == [
        "config.tensor_parallel_size x pipeline_parallel_size x data_parallel_size",
        "config.extra_flags['enable-eplb']",
    ]
    with pytest.raises(VllmConfigError) as caught:
        leader_command(VllmConfig(model="m", extra_flags={"nnodes": 2}), 0)
    problems.absorb(caught.value, "launcher")
    assert [p.property for p in problems.problems()][2:] == [
        "launcher.extra_flags['nnodes']",
        "launcher.nodes",
    ]


def test_registry_checks_return_problems(no_tuple_unpacking):
    found = sagemaker_environment_problems(
        {"SM_VLLM_QUANTIZATION": "nvfp4", "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": "true"}
    ) + quantization_problems("q", "fp8", "awq_marlin", "int4")
    assert all(type(problem) is Problem for problem in found)
    assert [p.property for p in found] == [
        "environment['SM_VLLM_ENABLE_AUTO_TOOL_CHOICE']",
        "environment['SM_VLLM_QUANTIZATION']",
        "q",
    ]


def test_pool_derivation_takes_typed_values(no_tuple_unpacking):
    base = VllmConfig(model="m", max_model_len=32768)
    typed = derive_pool_config(
        base, "gpt-oss-20b", InstanceType.ML_G6E_12XLARGE, [WeightFormat.BF16, WeightFormat.INT4]
    )
    named = derive_pool_config(base, "gpt-oss-20b", "ml.g6e.12xlarge", ["bf16", "int4"])
    assert typed == named and typed.weight_format == "bf16"


def test_pool_derivation_on_a_type_the_catalog_lacks_is_a_planning_error():
    with pytest.raises(ConfigurationError) as caught:
        derive_pool_config(VllmConfig(model="m"), "gpt-oss-20b", "ml.g6e.12xlarg", ["bf16"])
    (problem,) = caught.value.problems
    assert problem.property == "instance_type" and "closest: ml.g6e.12xlarge" in problem.allowed

"""The planner's one name for the weight format (``weight_format``) and its typed values."""

from __future__ import annotations

import warnings

import pytest

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.planning import InstanceType, ModelSizing, ModelSpec, WeightFormat, plan


def _quietly(call):
    """``call()``, failing on any warning (the new names never warn)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


def test_plan_takes_typed_values_and_names_alike():
    by_name = _quietly(lambda: plan("gpt-oss-20b", "mxfp4", "ml.g6.xlarge", max_context=8192))
    typed = _quietly(
        lambda: plan(
            ModelSpec.of("gpt-oss-20b"),
            WeightFormat.MXFP4,
            InstanceType.ML_G6_XLARGE,
            max_context=8192,
        )
    )
    keywords = _quietly(
        lambda: plan(
            "gpt-oss-20b", weight_format="mxfp4", instance_type="ml.g6.xlarge", max_context=8192
        )
    )
    assert by_name == typed == keywords
    assert typed.weight_format == "mxfp4" and typed.instance_type == "ml.g6.xlarge"


def test_plan_refuses_a_missing_format_and_unknown_names():
    # The format and instance type are required (a type checker flags a call without them).
    with pytest.raises(TypeError, match="weight_format.*instance_type"):
        plan("gpt-oss-20b")  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="closest: ml.g6.xlarge"):
        plan("gpt-oss-20b", "mxfp4", "ml.g6.xlarg")
    with pytest.raises(ConfigurationError, match="weight formats must be one of"):
        plan("gpt-oss-20b", "mxfp5", "ml.g6.xlarge")


def test_model_sizing_positional_keyword_and_typed_forms_are_one_value():
    positional = _quietly(lambda: ModelSizing("gpt-oss-20b", "bf16", 32768))
    keyword = _quietly(
        lambda: ModelSizing(model="gpt-oss-20b", weight_format="bf16", max_context=32768)
    )
    typed = _quietly(
        lambda: ModelSizing(ModelSpec.of("gpt-oss-20b"), WeightFormat.BF16, max_context=32768)
    )
    assert positional == keyword == typed
    assert typed.weight_format is WeightFormat.BF16 and typed.model is ModelSpec.of("gpt-oss-20b")
    assert typed.plan_on(InstanceType.ML_G6E_12XLARGE) == typed.plan_on("ml.g6e.12xlarge")
    assert repr(typed) == (
        "ModelSizing(model='gpt-oss-20b', weight_format='bf16', max_context=32768, "
        "concurrency=1, gpu_memory_utilization=0.9, kv_cache_dtype='auto', "
        "tensor_parallel_size=None)"
    )


def test_model_sizing_checks_its_names_when_it_is_made():
    with pytest.raises(ConfigurationError, match="weight_format = 'bf61'"):
        ModelSizing("gpt-oss-20b", "bf61")
    with pytest.raises(ConfigurationError, match="closest: gpt-oss-20b"):
        ModelSizing("gpt-oss-02b", "bf16")
    with pytest.raises(TypeError, match="weight_format"):
        ModelSizing("gpt-oss-20b")  # type: ignore[call-arg]

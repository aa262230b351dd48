"""Typed identifiers: instance types, weight formats, model presets, and the one error channel
they share."""

from __future__ import annotations

import pytest

from cdk_llm_serving import ConfigurationError, InstanceType, ModelSpec, PlanningError, WeightFormat
from cdk_llm_serving._cdk.service_limits import (
    hyperpod_instance_types,
    production_variant_instance_types,
)
from cdk_llm_serving.errors import Problems
from cdk_llm_serving.planning import UnknownInstanceTypeError, default_catalog, plan


def test_an_instance_type_is_its_name():
    t = InstanceType("ml.p5.48xlarge")
    assert t == "ml.p5.48xlarge" and hash(t) == hash("ml.p5.48xlarge")
    assert InstanceType.of(t) is t
    assert t.name == "ml.p5.48xlarge" and type(t.name) is str
    assert f"{t}" == "ml.p5.48xlarge" and repr(t) == "InstanceType('ml.p5.48xlarge')"


def test_an_unknown_instance_type_is_refused_with_the_closest_names():
    with pytest.raises(ConfigurationError) as caught:
        InstanceType("ml.p5.48xlarg")
    (problem,) = caught.value.problems
    assert problem.property == "instance_type" and problem.value == "ml.p5.48xlarg"
    assert "closest: ml.p5.48xlarge" in problem.allowed


def test_parse_collects_the_problem_instead_of_raising():
    problems = Problems("X")
    assert InstanceType.parse(problems, "pools[1].instance_type", "ml.g6e.2xlarg") is None
    assert InstanceType.parse(problems, "pools[2].instance_type", 5) is None
    assert (
        InstanceType.parse(problems, "pools[0].instance_type", "ml.g6e.2xlarge") == "ml.g6e.2xlarge"
    )
    assert [p.property for p in problems.problems()] == [
        "pools[1].instance_type",
        "pools[2].instance_type",
    ]


def test_facts_come_from_botocore_and_the_catalog():
    p5 = InstanceType.ML_P5_48XLARGE
    assert p5.sagemaker_hosting == (p5 in production_variant_instance_types())
    assert p5.hyperpod == (p5 in hyperpod_instance_types())
    assert p5.spec is default_catalog().get(p5) and p5.gpus == 8 and p5.efa
    assert p5.nvidia_gpu and p5.family == "p5"
    cpu = InstanceType("ml.m5.large")
    assert cpu.spec is None and cpu.gpus == 0 and not cpu.efa and not cpu.nvidia_gpu
    assert not InstanceType("ml.inf2.xlarge").nvidia_gpu


def test_where_a_type_may_be_used_is_one_check_each():
    hosting_only = next(
        t for t in production_variant_instance_types() if t not in hyperpod_instance_types()
    )
    problems = Problems("X")
    assert InstanceType(hosting_only).check_hosting(problems, "a")
    assert not InstanceType(hosting_only).check_hyperpod(problems, "b")
    assert [p.property for p in problems.problems()] == ["b"]
    assert "HyperPod cluster instance types" in problems.problems()[0].allowed


def test_every_declared_constant_is_a_catalog_type():
    declared = [name for name in InstanceType.__annotations__ if name.startswith("ML_")]
    assert declared, "no constants declared"
    for name in declared:
        value = getattr(InstanceType, name)
        assert isinstance(value, InstanceType) and value in default_catalog(), name


def test_weight_formats_and_presets_convert_and_refuse_with_closest():
    assert WeightFormat.of("nvfp4") is WeightFormat.NVFP4 and str(WeightFormat.NVFP4) == "nvfp4"
    assert WeightFormat.of(WeightFormat.FP8) is WeightFormat.FP8
    with pytest.raises(ConfigurationError, match="must be one of bf16, fp8, nvfp4"):
        WeightFormat.of("nvfp")
    spec = ModelSpec.of("gpt-oss-120b")
    assert ModelSpec.of(spec) is spec
    with pytest.raises(ConfigurationError, match="gpt-oss-120b"):
        ModelSpec.of("gpt-oss-12b")


def test_planning_and_catalog_errors_are_configuration_errors():
    with pytest.raises(ConfigurationError) as caught:
        plan("gpt-oss-120b", "bf16", "ml.g5.xlarge")
    assert isinstance(caught.value, PlanningError)
    assert str(caught.value).startswith("gpt-oss-120b in bf16 does not fit")
    assert caught.value.problems[0].allowed == str(caught.value)
    with pytest.raises(ConfigurationError) as unknown:
        default_catalog().get("ml.p5.48xlarg")
    assert isinstance(unknown.value, UnknownInstanceTypeError)
    assert "closest: ml.p5.48xlarge" in str(unknown.value)


def test_coerce_converts_known_names_and_leaves_the_rest_for_validate():
    assert type(InstanceType.coerce("ml.p5.48xlarge")) is InstanceType
    assert type(InstanceType.coerce("ml.p5.48xlarg")) is str  # reported later, with the others
    token = "${Token[TOKEN.1]}"
    assert InstanceType.coerce(token) is token
    assert InstanceType.coerce(None) is None


def test_a_problem_shows_a_typed_name_as_the_name_written():
    from cdk_llm_serving.errors import Problem

    shown = str(Problem("pools[0].instance_type", InstanceType.ML_P5_48XLARGE, "x"))
    assert shown == "pools[0].instance_type = 'ml.p5.48xlarge': x"


def test_a_weight_format_parses_into_problems_with_the_closest_formats():
    problems = Problems("X")
    assert WeightFormat.parse(problems, "weights['fp8']", "fp8") is WeightFormat.FP8
    assert WeightFormat.parse(problems, "formats[1]", "nvfp") is None
    (problem,) = problems.problems()
    assert problem.property == "formats[1]" and "nvfp4" in problem.allowed

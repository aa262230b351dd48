"""The typed, CDK-shaped public surface: grants, metric options, imports, options type."""

from __future__ import annotations

import inspect
import re

import pytest
from aws_cdk import Duration, Stack

from cdk_llm_serving import (
    ConfigurationError,
    ContainerImage,
    EndpointAutoScaling,
    InferenceComponentEndpoint,
    InstancePool,
    InstancePoolEndpoint,
    ModelData,
    PoolEndpointProps,
    StagingEndpoints,
    VllmPool,
    VllmPoolEndpoint,
)
from cdk_llm_serving._cdk.contracts import PropValue
from cdk_llm_serving.errors import Problems
from cdk_llm_serving.sagemaker.autoscaling import AutoScalingOptions
from cdk_llm_serving.sagemaker.endpoint_options import DEFAULTS
from cdk_llm_serving.vllm import VllmConfig
from tests.support.builders import IMAGE, new_stack, pool_endpoint, template_of
from tests.support.public_api_usage import build
from tests.support.template_helpers import actions_of, policy_statements


def test_a_bucket_grants_read_to_a_serving_model_and_metrics_take_cloudwatch_options():
    stack = new_stack()
    endpoint, metric = build(stack)
    assert metric.statistic == "Average" and metric.color == "#ff0000"
    assert metric.dimensions["EndpointName"] == endpoint.endpoint_name
    template = template_of(stack)
    role = stack.get_logical_id(endpoint.model.role.node.default_child)  # type: ignore[union-attr, arg-type]
    statements = policy_statements(template, role)
    bucket = stack.get_logical_id(stack.node.find_child("Extra").node.default_child)  # type: ignore[arg-type]
    assert any("s3:GetObject*" in actions_of(s) and bucket in str(s) for s in statements)


def test_metric_methods_take_instance_type_as_keyword_only():
    endpoint, _ = build(new_stack())
    with pytest.raises(TypeError):
        endpoint.metric_invocations("ml.g6e.12xlarge")  # type: ignore[misc]
    latency = endpoint.metric_model_latency(
        instance_type="ml.g6e.12xlarge", period=Duration.minutes(5)
    )
    assert latency.statistic == "p99" and latency.dimensions["InstanceType"] == "ml.g6e.12xlarge"


def test_every_pool_endpoint_takes_the_one_props_shape():
    """Each construct that makes a pool endpoint takes its options as ``PoolEndpointProps``
    keywords, the same spelling everywhere."""
    for construct in (
        InstancePoolEndpoint,
        InferenceComponentEndpoint,
        VllmPoolEndpoint,
        StagingEndpoints,
    ):
        parameters = inspect.signature(inspect.unwrap(construct.__init__)).parameters
        assert str(parameters["props"].annotation) == "Unpack[PoolEndpointProps]"
    build = inspect.signature(InstancePoolEndpoint.build_from_recommendation).parameters
    assert str(build["props"].annotation) == "Unpack[PoolEndpointProps]"


def _documented_default(doc: str, name: str) -> str:
    match = re.search(rf":param {name}: (.*?)(?=\n\s*:param |\Z)", doc, re.DOTALL)
    assert match, f"{name} is not documented"
    text = " ".join(match.group(1).split())
    assert "Default: " in text, f"{name}: no Default"
    return text.split("Default: ", 1)[1]


def _as_documented(value: object) -> str:
    if isinstance(value, bool | str) or value is None:
        return f"``{value}``"
    if isinstance(value, Duration):
        return value.to_human_string()
    return str(value)


@pytest.mark.parametrize("option", sorted(PoolEndpointProps.__optional_keys__))
def test_each_option_documents_its_default_as_it_is(option):
    documented = _documented_default(PoolEndpointProps.__doc__ or "", option)
    default = DEFAULTS.get(option)  # type: ignore[misc]
    expected = PROSE_DEFAULTS[option] if default is None else _as_documented(default)
    assert _says(documented, expected), f"{option}: documented {documented!r}, not {expected!r}"


def _says(documented: str, expected: str) -> bool:
    """``documented`` starts with ``expected`` as a whole (``10`` does not say ``1``)."""
    rest = documented[len(expected) :]
    return documented.startswith(expected) and (not rest or rest[0] in " .,;()")


#: Defaults the construct works out or leaves to SageMaker: what the docs say.
PROSE_DEFAULTS = {
    "endpoint_name": "derived from the construct path",
    "container_startup_timeout": "the planner's cold-start estimate",
    "model_data_download_timeout": "the planner's download estimate",
    "volume_size_gb": "SageMaker's",
    "volume_kms_key": "none",
    "async_inference": "none (real-time)",
    "capacity_reservation_arn": "none",
    "deployment": "rolling on GPU pools with 2+ instances",
    "rollback_alarms": "alarms on 5xx errors",
    "managed_instance_count": "off",
    "catalog": "``default_catalog()``",
}


def test_the_default_drift_test_can_fail():
    with pytest.raises(AssertionError):
        _documented_default(":param a: no default here", "a")
    assert _as_documented(Duration.minutes(30)) == "30 minutes"
    assert not _says("60 seconds.", _as_documented(6))
    assert (
        not _says("10. More text", "1") and _says("1. More", "1") and _says("``True``.", "``True``")
    )


def test_vllm_endpoint_forwards_its_props_to_the_endpoint():
    serving = VllmPoolEndpoint(
        new_stack(),
        "Serving",
        image=ContainerImage.from_ecr_uri(IMAGE),
        model="gpt-oss-20b",
        config=VllmConfig(model="x", served_model_name="gpt-oss-20b", max_model_len=8192),
        weights={"bf16": ModelData.from_s3_uri("s3://my-weights-bucket/a/")},
        pools=["ml.g6e.12xlarge"],
        variant_name="Main",
        initial_instance_count=2,
    )
    assert serving.endpoint.variant_name == "Main" == serving.variant_name
    variant = serving.endpoint.cfn_endpoint_config.production_variants[0]  # type: ignore[index]
    assert variant.initial_instance_count == 2 and serving.endpoint.catalog is serving.catalog


def test_an_option_of_the_wrong_type_or_name_is_one_configuration_error():
    with pytest.raises(ConfigurationError) as caught:
        pool_endpoint(initial_instance_count="2", variant_nme="x")  # type: ignore[call-arg]
    assert [str(p) for p in caught.value.problems] == [
        "variant_nme = 'x': not a prop of InstancePoolEndpoint; did you mean variant_name?",
        "initial_instance_count = '2': must be int, not a str",
    ]


def test_imports_by_name_and_arn_grant_and_watch():
    stack = Stack(new_stack().node.root, "Other")
    by_name = InstancePoolEndpoint.from_endpoint_name(stack, "ByName", "Prod-Chat")
    by_arn = InstancePoolEndpoint.from_endpoint_arn(
        stack, "ByArn", "arn:aws:sagemaker:us-east-1:123456789012:endpoint/prod-chat"
    )
    assert by_arn.endpoint_name == "prod-chat"
    assert by_name.metric_invocations().dimensions["EndpointName"] == "Prod-Chat"
    assert stack.resolve(by_name.endpoint_arn)["Fn::Join"][1][-1] == ":endpoint/prod-chat"
    assert (
        "/endpoints/prod-chat/openai/v1" in stack.resolve(by_arn.openai_base_url)["Fn::Join"][1][-1]
    )


def test_vllm_pool_endpoint_is_the_endpoint_api():
    stack = new_stack()
    serving = VllmPoolEndpoint(
        stack,
        "Serving",
        image=ContainerImage.from_ecr_uri(IMAGE),
        model="gpt-oss-20b",
        config=VllmConfig(model="x", served_model_name="gpt-oss-20b", max_model_len=8192),
        weights={"bf16": ModelData.from_s3_uri("s3://my-weights-bucket/a/")},
        pools=[VllmPool("ml.g6e.12xlarge")],
        endpoint_name="chat",
    )
    assert serving.endpoint_name == "chat" == serving.endpoint.endpoint_name
    assert serving.metric_invocations().dimensions["EndpointName"] == "chat"
    assert serving.auto_scale(max_capacity=3) is serving.endpoint.auto_scaling


def test_build_from_recommendation_names_a_missing_file():
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        InstancePoolEndpoint.build_from_recommendation(stack, "FromFile", "no-such-file.json")
    assert caught.value.problems[0].property == "path.file"


def test_value_types_report_problems_under_the_property_they_were_given_as():
    problems = Problems("test")
    pool = InstancePool("ml.nope.xlarge", max_concurrency=0)
    assert isinstance(pool, PropValue)
    pool.validate(problems, "pools[2]")
    with pytest.raises(ConfigurationError) as caught:
        problems.raise_if_any()
    assert {p.property for p in caught.value.problems} == {
        "pools[2].instance_type",
        "pools[2].max_concurrency",
    }


def test_auto_scaling_options_name_every_keyword_of_the_construct():
    keywords = inspect.signature(EndpointAutoScaling.__init__).parameters
    assert set(AutoScalingOptions.__annotations__) == set(keywords) - {
        "self",
        "scope",
        "id",
        "endpoint",
    }


def test_build_from_recommendation_checks_its_props_before_reading_the_file():
    with pytest.raises(ConfigurationError) as caught:
        InstancePoolEndpoint.build_from_recommendation(
            new_stack(), "FromFile", "pools.json", endpont_name="chat"
        )
    [problem] = caught.value.problems
    assert str(problem) == "endpont_name = 'chat': not an option; did you mean 'endpoint_name'?"

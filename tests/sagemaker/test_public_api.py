"""The typed, CDK-shaped public surface: grants, metric options, imports, options type."""

from __future__ import annotations

import inspect
import re
from dataclasses import fields
from typing import get_type_hints

import pytest
from aws_cdk import Duration, Stack

from cdk_llm_serving import (
    ConfigurationError,
    ContainerImage,
    EndpointAutoScaling,
    InferenceComponentEndpoint,
    InferenceComponentEndpointKeywords,
    InstancePool,
    InstancePoolEndpoint,
    ModelData,
    PoolEndpointKeywords,
    VllmPool,
    VllmPoolEndpoint,
)
from cdk_llm_serving._cdk.contracts import PropValue
from cdk_llm_serving._cdk.durations import human
from cdk_llm_serving.errors import Problems
from cdk_llm_serving.sagemaker.autoscaling import AutoScalingOptions
from cdk_llm_serving.sagemaker.endpoint_options import PoolEndpointOptions
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


def test_the_options_are_declared_once_names_types_and_defaults():
    """The keyword types carry names and types only; ``PoolEndpointOptions`` the defaults and
    their documentation; the constructs take the keywords and apply those defaults."""
    option_types = get_type_hints(PoolEndpointOptions)
    for keywords in (PoolEndpointKeywords, InferenceComponentEndpointKeywords):
        declared = get_type_hints(keywords)
        assert set(declared) <= set(option_types)
        assert {name: option_types[name] for name in declared} == declared
    assert set(get_type_hints(PoolEndpointKeywords)) == set(option_types)
    assert set(option_types) - set(get_type_hints(InferenceComponentEndpointKeywords)) == {
        "container_startup_timeout",
        "model_data_download_timeout",
    }
    for construct, keywords in (
        (InstancePoolEndpoint, PoolEndpointKeywords),
        (InferenceComponentEndpoint, InferenceComponentEndpointKeywords),
    ):
        parameters = inspect.signature(inspect.unwrap(construct.__init__)).parameters
        assert str(parameters["options"].annotation) == f"Unpack[{keywords.__name__}]"
        assert parameters["options"].kind is inspect.Parameter.VAR_KEYWORD
    endpoint = pool_endpoint()
    assert endpoint.options == PoolEndpointOptions()
    assert all(getattr(endpoint.options, f.name) is f.default for f in fields(PoolEndpointOptions))


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
        return human(value)
    return str(value)


@pytest.mark.parametrize("option", [f.name for f in fields(PoolEndpointOptions)])
def test_each_option_documents_its_default_as_it_is(option):
    default = next(f.default for f in fields(PoolEndpointOptions) if f.name == option)
    documented = _documented_default(PoolEndpointOptions.__doc__ or "", option)
    expected = PROSE_DEFAULTS[option] if default is None and option in PROSE_DEFAULTS else None
    expected = expected or _as_documented(default)
    assert _says(documented, expected), f"{option}: documented {documented!r}, default {default!r}"


def _says(documented: str, expected: str) -> bool:
    """``documented`` starts with ``expected`` as a whole (``10`` does not say ``1``)."""
    rest = documented[len(expected) :]
    return documented.startswith(expected) and (not rest or rest[0] in " .,;()")


#: Defaults the construct works out (``None`` in the dataclass): what the docs say instead.
PROSE_DEFAULTS = {
    "endpoint_name": "derived from the construct path",
    "container_startup_timeout": "the planner's cold-start estimate",
    "model_data_download_timeout": "the planner's download estimate",
    "deployment": "blue/green",
    "rollback_alarms": "alarms on 5xx errors",
}


def test_the_default_drift_test_can_fail():
    with pytest.raises(AssertionError):
        _documented_default(":param a: no default here", "a")
    assert _as_documented(Duration.minutes(30)) == "30 minutes"
    assert not _says("60 seconds.", _as_documented(6))
    assert (
        not _says("10. More text", "1") and _says("1. More", "1") and _says("``True``.", "``True``")
    )


def test_vllm_endpoint_and_recommendations_forward_the_same_defaults(tmp_path):
    stack = new_stack()
    serving = VllmPoolEndpoint(
        stack,
        "Serving",
        image=ContainerImage.from_ecr_uri(IMAGE),
        model="gpt-oss-20b",
        config=VllmConfig(model="x", served_model_name="gpt-oss-20b", max_model_len=8192),
        weights={"bf16": ModelData.from_s3_uri("s3://my-weights-bucket/a/")},
        pools=["ml.g6e.12xlarge"],
    )
    assert serving.endpoint.options == PoolEndpointOptions(catalog=serving.catalog)
    typed = VllmPoolEndpoint(
        new_stack(),
        "Serving",
        image=ContainerImage.from_ecr_uri(IMAGE),
        model="gpt-oss-20b",
        config=VllmConfig(model="x", served_model_name="gpt-oss-20b", max_model_len=8192),
        weights={"bf16": ModelData.from_s3_uri("s3://my-weights-bucket/a/")},
        pools=["ml.g6e.12xlarge"],
        endpoint_options={"variant_name": "Main", "initial_instance_count": 2},
    )
    assert typed.endpoint.options == PoolEndpointOptions(
        variant_name="Main", initial_instance_count=2, catalog=typed.catalog
    )


def test_an_option_of_the_wrong_type_or_name_is_one_configuration_error():
    with pytest.raises(ConfigurationError) as caught:
        pool_endpoint(initial_instance_count="2", variant_nme="x")  # type: ignore[call-arg]
    assert [str(p) for p in caught.value.problems] == [
        "variant_nme = 'x': not an option; did you mean 'variant_name'?",
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


def test_vllm_pool_endpoint_is_the_endpoint_api_and_takes_an_options_type():
    stack = new_stack()
    serving = VllmPoolEndpoint(
        stack,
        "Serving",
        image=ContainerImage.from_ecr_uri(IMAGE),
        model="gpt-oss-20b",
        config=VllmConfig(model="x", served_model_name="gpt-oss-20b", max_model_len=8192),
        weights={
            "bf16": __import__("cdk_llm_serving").ModelData.from_s3_uri("s3://my-weights-bucket/a/")
        },
        pools=[VllmPool("ml.g6e.12xlarge")],
        endpoint_options=PoolEndpointOptions(endpoint_name="chat"),
    )
    assert serving.endpoint_name == "chat" == serving.endpoint.endpoint_name
    assert serving.metric_invocations().dimensions["EndpointName"] == "chat"
    assert serving.auto_scale(max_capacity=3) is serving.endpoint.auto_scaling
    with pytest.raises(TypeError):
        VllmPoolEndpoint(stack, "Bad", routing_strategy="RANDOM")  # type: ignore[call-arg]


def test_build_from_recommendation_names_a_missing_file():
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        InstancePoolEndpoint.build_from_recommendation(
            stack, "FromFile", "no-such-file.json", options=PoolEndpointOptions()
        )
    assert caught.value.problems[0].property == "path.file"


def test_value_types_report_problems_under_the_property_they_were_given_as():
    problems = Problems("test")
    pool = InstancePool("ml.nope.xlarge", max_concurrency=0)
    assert isinstance(pool, PropValue)
    pool.validate(problems, "pools[2]")
    PoolEndpointOptions(variant_name="bad name!", metric_publish_frequency=7).validate(
        problems, "endpoint_options"
    )
    with pytest.raises(ConfigurationError) as caught:
        problems.raise_if_any()
    assert {p.property for p in caught.value.problems} == {
        "pools[2].instance_type",
        "pools[2].max_concurrency",
        "endpoint_options.variant_name",
        "endpoint_options.metric_publish_frequency",
    }


def test_auto_scaling_options_name_every_keyword_of_the_construct():
    keywords = inspect.signature(EndpointAutoScaling.__init__).parameters
    assert set(AutoScalingOptions.__annotations__) == set(keywords) - {
        "self",
        "scope",
        "id",
        "endpoint",
    }


def test_build_from_recommendation_takes_its_options_as_a_dict_too():
    with pytest.raises(ConfigurationError) as caught:
        InstancePoolEndpoint.build_from_recommendation(
            new_stack(), "FromFile", "pools.json", options={"endpont_name": "chat"}
        )
    [problem] = caught.value.problems
    assert str(problem) == (
        "options.endpont_name = 'chat': not an option; did you mean 'endpoint_name'?"
    )

"""Names that become other systems' names: the transformation or the refusal, stated."""

from __future__ import annotations

import pytest
from aws_cdk import Environment, Stack
from constructs import Construct

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.errors import Problems
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.inference_features import InferenceAutoScaling
from cdk_llm_serving.vllm import VllmConfig
from tests.support.builders import new_app, new_stack, pool_endpoint
from tests.support.hyperpod import gpt_oss_120b_endpoint, single_node_groups


def _addons(stack: Stack) -> HyperPodServingAddons:
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=single_node_groups()
    )
    return HyperPodServingAddons(stack, "Addons", cluster=cluster)


def test_a_hugging_face_served_name_becomes_the_operator_endpoints_kubernetes_name():
    """Before: ``openai/gpt-oss-120b`` was lower-cased and refused as ``name``, a prop the
    user never gave."""
    stack = new_stack()
    config = VllmConfig(model="x", served_model_name="openai/GPT-OSS-120b", max_model_len=32768)
    endpoint = gpt_oss_120b_endpoint(stack, _addons(stack), config=config)
    assert endpoint.name == endpoint.endpoint_name == "openai-gpt-oss-120b-mxfp4-tp8"


def test_pool_endpoint_names_that_differ_only_in_case_are_refused():
    stack = new_stack()
    pool_endpoint(Construct(stack, "A"), endpoint_name="Chat-Prod")
    with pytest.raises(ConfigurationError) as caught:
        pool_endpoint(Construct(stack, "B"), endpoint_name="chat-prod")
    (problem,) = caught.value.problems
    assert problem.property == "endpoint_name"
    assert "'Test/A/Endpoint' already names its endpoint 'Chat-Prod'" in str(problem)
    assert "compared without case" in str(problem)


def test_the_same_endpoint_name_in_stacks_of_two_accounts_is_accepted():
    app = new_app()
    for account in ("111111111111", "222222222222"):
        stack = Stack(
            app, f"Serving{account}", env=Environment(region="us-east-1", account=account)
        )
        pool_endpoint(stack, endpoint_name="chat")


def test_the_same_endpoint_name_in_two_stacks_of_one_region_is_refused():
    app = new_app()
    first = Stack(app, "First", env=Environment(region="us-east-1"))
    second = Stack(app, "Second", env=Environment(region="us-east-1"))
    pool_endpoint(first, endpoint_name="chat")
    with pytest.raises(ConfigurationError, match="compared without case"):
        pool_endpoint(second, endpoint_name="CHAT")


def test_two_operator_endpoints_of_one_served_name_are_refused():
    stack = new_stack()
    addons = _addons(stack)
    gpt_oss_120b_endpoint(stack, addons)
    with pytest.raises(ConfigurationError) as caught:
        gpt_oss_120b_endpoint(stack, addons, id="Again", namespace="other")
    assert [p.property for p in caught.value.problems] == ["endpoint_name"]


def test_an_endpoint_metric_name_in_another_case_is_refused():
    """``invocations`` is a metric nobody publishes: the alarm on it never fires."""
    endpoint = pool_endpoint()
    with pytest.raises(ConfigurationError) as caught:
        endpoint.metric("invocations")
    (problem,) = caught.value.problems
    assert str(problem) == (
        "metric_name = 'invocations': CloudWatch metric names are case-sensitive: SageMaker "
        "publishes 'Invocations'"
    )
    assert endpoint.metric("Invocations").metric_name == "Invocations"
    assert endpoint.metric("MyOwnMetric").metric_name == "MyOwnMetric"  # not ours to know


def test_an_operator_scaling_metric_in_another_case_is_refused():
    problems = Problems("scaling")
    InferenceAutoScaling(max_replicas=2, metric_name="modelLatency").validate(
        problems, "auto_scaling"
    )
    assert [str(p) for p in problems.problems()] == [
        "auto_scaling.metric_name = 'modelLatency': CloudWatch metric names are case-sensitive: "
        "SageMaker publishes 'ModelLatency'"
    ]

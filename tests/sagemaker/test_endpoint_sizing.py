"""InstancePoolEndpoint with the planner: pools must hold their models; timeouts follow estimates."""

from __future__ import annotations

import pytest
from aws_cdk import Duration
from aws_cdk.assertions import Annotations, Match

from cdk_llm_serving import ConfigurationError, InstancePool
from cdk_llm_serving.planning.models import ModelSpec
from cdk_llm_serving.planning.sizing import ModelSizing
from tests.support.builders import new_stack, pool_endpoint, serving_model


def test_a_pool_that_cannot_hold_its_override_model_stops_synth():
    stack = new_stack()
    full = serving_model(
        stack, "Full", sizing=ModelSizing("gpt-oss-120b", "mxfp4", max_context=32768)
    )
    bf16 = serving_model(
        stack, "Bf16", sizing=ModelSizing("gpt-oss-120b", "bf16", max_context=32768)
    )
    with pytest.raises(ConfigurationError) as caught:
        pool_endpoint(
            stack,
            model=full,
            pools=[InstancePool("ml.p5.48xlarge"), InstancePool("ml.g6e.12xlarge", model=bf16)],
        )
    (problem,) = caught.value.problems
    assert problem.property == "pools[1]" and problem.value == "ml.g6e.12xlarge"
    assert problem.allowed.startswith(
        "cannot hold model 'Bf16': gpt-oss-120b in bf16 does not fit one node of ml.g6e.12xlarge"
    )
    assert (
        "Would fit:" in problem.allowed
        and "mxfp4 weights on 1 x ml.g6e.12xlarge" in problem.allowed
    )


def test_timeouts_follow_the_slowest_pools_estimate():
    stack = new_stack()
    model = serving_model(stack, sizing=ModelSizing("deepseek-v3", "fp8", max_context=32768))
    endpoint = pool_endpoint(
        stack,
        model=model,
        pools=[InstancePool("ml.p5en.48xlarge"), InstancePool("ml.p6-b200.48xlarge")],
    )
    (first, second) = endpoint.pool_plans
    variant = stack.resolve(endpoint.cfn_endpoint_config.production_variants)[0]
    assert (
        variant["modelDataDownloadTimeoutInSeconds"]
        == max(
            first.cold_start.download_timeout_seconds, second.cold_start.download_timeout_seconds
        )
        > 600
    )
    assert (
        variant["containerStartupHealthCheckTimeoutInSeconds"]
        == first.cold_start.startup_timeout_seconds
    )


def test_given_timeouts_win_but_warn_when_below_the_estimate():
    stack = new_stack()
    model = serving_model(stack, sizing=ModelSizing("deepseek-v3", "fp8", max_context=32768))
    endpoint = pool_endpoint(
        stack,
        model=model,
        pools=[InstancePool("ml.p5en.48xlarge")],
        model_data_download_timeout=Duration.minutes(5),
    )
    variant = stack.resolve(endpoint.cfn_endpoint_config.production_variants)[0]
    assert variant["modelDataDownloadTimeoutInSeconds"] == 300
    Annotations.from_stack(stack).has_warning(
        "/Test/Endpoint",
        Match.string_like_regexp(
            "model_data_download_timeout 300 s is below the planner's estimate"
        ),
    )


def test_an_estimate_beyond_the_service_maximum_stops_synth():
    stack = new_stack()
    giant = ModelSpec(
        name="giant",
        total_params_b=2000,
        active_params_b=100,
        layers=60,
        attention_heads=64,
        kv_heads=8,
        head_dim=128,
        max_context=8192,
    )
    model = serving_model(stack, sizing=ModelSizing(giant, "fp8", max_context=4096))
    with pytest.raises(ConfigurationError) as caught:
        pool_endpoint(stack, model=model, pools=[InstancePool("ml.p6-b300.48xlarge")])
    (problem,) = caught.value.problems
    assert problem.property == "model_data_download_timeout" and problem.value == "estimated 4000 s"
    assert "exceeds the service maximum of 3600 s" in problem.allowed


def test_a_format_without_native_kernels_warns():
    stack = new_stack()
    model = serving_model(stack, sizing=ModelSizing("gpt-oss-120b", "nvfp4", max_context=32768))
    pool_endpoint(stack, model=model, pools=[InstancePool("ml.p5.48xlarge")])
    Annotations.from_stack(stack).has_warning(
        "/Test/Endpoint", Match.string_like_regexp("nvfp4 has no native kernels on H100")
    )

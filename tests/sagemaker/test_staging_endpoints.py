"""StagingEndpoints: one one-pool endpoint per copy of a VllmPoolEndpoint, for per-copy evals."""

from __future__ import annotations

import pytest

from cdk_llm_serving import ConfigurationError, StagingEndpoints
from cdk_llm_serving.testing.checks import checked_template
from tests.support.builders import endpoint, new_stack

POOLS = ["ml.g6e.12xlarge", "ml.g6e.2xlarge"]


def staged(**props):
    stack = new_stack()
    source = endpoint(stack, POOLS)
    staging = StagingEndpoints(stack, "Staging", source=source, **props)
    return stack, source, staging


def of_type(template: dict, kind: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def test_one_endpoint_per_copy_on_that_copy_s_model_and_pool():
    stack, source, staging = staged()
    template = checked_template(stack)
    assert [(c.served_model_name, c.instance_type) for c in staging.copies] == [
        ("gpt-oss-20b-bf16-tp4", "ml.g6e.12xlarge"),
        ("gpt-oss-20b-int4-tp1", "ml.g6e.2xlarge"),
    ]
    assert all(c.client_model_name == source.client_model_name for c in staging.copies)
    # The copies' models are the source's own: nothing duplicated.
    assert len(of_type(template, "AWS::SageMaker::Model")) == 2
    assert len(of_type(template, "AWS::SageMaker::Endpoint")) == 3
    configs = {
        k: v["Properties"]
        for k, v in of_type(template, "AWS::SageMaker::EndpointConfig").items()
        if k.startswith("Staging")
    }
    variants = sorted(
        (
            (c["ProductionVariants"][0]["InstancePools"], c["ProductionVariants"][0]["ModelName"])
            for c in configs.values()
        ),
        key=str,
    )
    models = {
        ("4" if k.startswith("ServingGptOss20bBf16Tp4") else "1"): k
        for k in of_type(template, "AWS::SageMaker::Model")
    }
    assert variants == [
        (
            [{"InstanceType": "ml.g6e.12xlarge", "Priority": 1}],
            {"Fn::GetAtt": [models["4"], "ModelName"]},
        ),
        (
            [{"InstanceType": "ml.g6e.2xlarge", "Priority": 1}],
            {"Fn::GetAtt": [models["1"], "ModelName"]},
        ),
    ]
    for config in configs.values():
        assert config["ProductionVariants"][0]["InitialInstanceCount"] == 1
        assert config["MetricsConfig"]["EnableEnhancedMetrics"] is False
        assert config["MetricsConfig"]["EnableDetailedObservability"] is False


def test_each_copy_outputs_what_eval_needs():
    stack, _, staging = staged()
    outputs = checked_template(stack)["Outputs"]
    names = sorted(
        o["Value"] for k, o in outputs.items() if k.startswith("Staging") and "Name" in k
    )
    assert names == ["gpt-oss-20b-bf16-tp4", "gpt-oss-20b-int4-tp1"]
    urls = [o for k, o in outputs.items() if k.startswith("Staging") and "BaseUrl" in k]
    assert len(urls) == 2 and all("eval --base-url" in o["Description"] for o in urls)


def test_the_staging_endpoints_take_the_pool_endpoint_props():
    stack, _, _ = staged(initial_instance_count=2)
    configs = of_type(checked_template(stack), "AWS::SageMaker::EndpointConfig")
    counts = {
        k: c["Properties"]["ProductionVariants"][0]["InitialInstanceCount"]
        for k, c in configs.items()
    }
    assert sorted(v for k, v in counts.items() if k.startswith("Staging")) == [2, 2]


@pytest.mark.parametrize(
    ("count", "allowed"),
    [
        (0, "a whole number from 1 to 10"),
        (11, "a whole number from 1 to 10"),
        (1.5, "must be int, not a float"),
        (True, "must be int, not a bool"),
    ],
)
def test_instance_count_out_of_range(count, allowed):
    with pytest.raises(ConfigurationError, match=f"initial_instance_count = {count}: {allowed}"):
        staged(initial_instance_count=count)


def test_a_shared_endpoint_name_or_a_misspelled_prop_is_refused():
    with pytest.raises(ConfigurationError) as caught:
        staged(endpoint_name="copy", enhanced_metric=True)
    assert [str(p) for p in caught.value.problems] == [
        "enhanced_metric = True: not a prop of StagingEndpoints; did you mean enhanced_metrics?"
    ]
    with pytest.raises(ConfigurationError, match="each copy's endpoint is named from its path"):
        staged(endpoint_name="copy")


def test_props_are_checked_against_their_types():
    with pytest.raises(ConfigurationError, match="source = 'my-endpoint': must be"):
        StagingEndpoints(new_stack(), "Staging", source="my-endpoint")


def test_the_eval_gate_function_may_call_every_staging_copy():
    from cdk_llm_serving.evals.tasks import example_path
    from cdk_llm_serving.testing.checks import cfn_lint

    stack, _, staging = staged()
    gate = staging.eval_gate(example_path())
    stack.resolve(gate.payload)
    template = checked_template(stack)
    assert cfn_lint(template) == []
    (function,) = [
        v["Properties"]
        for k, v in of_type(template, "AWS::Lambda::Function").items()
        if k.startswith("StagingEvalGate")
    ]
    assert function["Handler"] == "cdk_llm_serving.ops.evals.gate_handler.handler"
    assert function["Timeout"] == 110 and function["Runtime"] == "python3.11"
    assert function["FunctionName"].startswith("Test-Staging-EvalGate-")
    statements = [
        s
        for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        for k, p in of_type(template, kind).items()
        if k.startswith("StagingEvalGate")
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert {"sagemaker:InvokeEndpoint", "sagemaker:CallWithBearerToken"} <= actions
    invoked = str([s["Resource"] for s in statements if "sagemaker:InvokeEndpoint" in s["Action"]])
    for copy in staging.copies:  # endpoint ARNs hold the name in lower case
        assert f":endpoint/{copy.endpoint.endpoint_name.lower()}'" in invoked
    assert [c["expect_copy"] for c in gate.event["copies"]] == [
        "gpt-oss-20b-bf16-tp4",
        "gpt-oss-20b-int4-tp1",
    ]
    assert {c["model"] for c in gate.event["copies"]} == {"gpt-oss-20b"}


def test_a_bad_task_file_fails_the_synth(tmp_path):
    path = tmp_path / "tasks.yaml"
    path.write_text("version: 1\ntasks: [{name: t, samples: [{prompt: p}]}]\n")
    _, _, staging = staged()
    with pytest.raises(ConfigurationError, match=r"tasks\[0\].samples\[0\].*exactly one check"):
        staging.eval_gate(path)


def test_an_instance_pool_endpoint_is_staged_too_and_needs_served_names():
    from tests.support.builders import pool_endpoint, serving_model

    stack = new_stack()
    source = pool_endpoint(stack)
    staging = StagingEndpoints(stack, "Staging", source=source)
    assert [(c.served_model_name, c.instance_type) for c in staging.copies] == [
        ("model", "ml.p5.48xlarge"),
        ("model", "ml.g6e.12xlarge"),
    ]
    stack = new_stack()
    anonymous = pool_endpoint(stack, model=serving_model(stack, served_model_name=None))
    with pytest.raises(ConfigurationError, match=r"source.pools\[0\].model.served_model_name"):
        StagingEndpoints(stack, "Staging", source=anonymous)

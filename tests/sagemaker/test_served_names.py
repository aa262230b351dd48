"""Every copy serves the shared client name after its own copy name (vLLM config file route).

What the container does with it is cited in ``cdk_llm_serving/sagemaker/served_names.py``
(vLLM 0.33.0 ``OpenAIServingModels.model_name`` reports the first served name; the SageMaker
vLLM entrypoint passes ``SM_VLLM_CONFIG`` as ``--config``; vLLM expands a YAML list into the
flag plus one token per item).
"""

from __future__ import annotations

import json

import pytest
import yaml

from cdk_llm_serving import ModelData, VllmPool, VllmPoolEndpoint
from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.vllm import VllmConfig
from tests.support.builders import new_stack, serving_model, template_of
from tests.support.template_helpers import resources_of_type


@pytest.fixture(scope="module")
def fleet():
    stack = new_stack("Names")
    serving = VllmPoolEndpoint(
        stack,
        "Serving",
        image=serving_model(stack, "Probe").image,
        model="gpt-oss-20b",
        base=VllmConfig(model="x", served_model_name="gpt-oss-20b", max_model_len=32768),
        weights={
            "bf16": ModelData.from_s3_uri("s3://weights/gpt-oss-20b/"),
            "int4": ModelData.from_s3_uri("s3://weights/gpt-oss-20b-int4/"),
        },
        pools=[VllmPool("ml.g6e.12xlarge"), VllmPool("ml.g6e.2xlarge")],
    )
    return stack, serving, template_of(stack)


def puts(template: dict) -> dict[str, dict]:
    """Key -> putObject parameters of every served-names custom resource."""
    found = {}
    for resource in resources_of_type(template, "Custom::AWS").values():
        create = resource["Properties"]["Create"]
        call = json.loads(create if isinstance(create, str) else json.dumps(create))
        if call["action"] == "putObject":
            found[call["parameters"]["Key"]] = call["parameters"]
    return found


def test_each_copy_serves_its_name_first_then_the_shared_one(fleet):
    stack, serving, template = fleet
    assert serving.client_model_name == "gpt-oss-20b"
    written = puts(template)
    by_copy = {}
    for model in serving.models.values():
        env = stack.resolve(model.cfn_model.primary_container)["environment"]
        assert "SM_VLLM_SERVED_MODEL_NAME" not in env  # a flag would override the file
        path = env["SM_VLLM_CONFIG"]
        assert path.startswith("/opt/ml/model/cdk-llm-serving/") and path.endswith(".yaml")
        prefix = model.model_data.key_prefix
        parameters = written[prefix + path.removeprefix("/opt/ml/model/")]
        assert parameters["Bucket"] == "weights"
        by_copy[model.served_model_name] = yaml.safe_load(parameters["Body"])
    assert by_copy == {
        "gpt-oss-20b-bf16-tp4": {"served-model-name": ["gpt-oss-20b-bf16-tp4", "gpt-oss-20b"]},
        "gpt-oss-20b-int4-tp1": {"served-model-name": ["gpt-oss-20b-int4-tp1", "gpt-oss-20b"]},
    }


def test_the_writer_may_put_and_delete_exactly_its_file_and_the_model_waits_for_it(fleet):
    _, _, template = fleet
    keys = sorted(puts(template))
    statements = [
        statement
        for policy in resources_of_type(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "s3:PutObject" in statement["Action"]
    ]
    resources = sorted(json.dumps(s["Resource"]) for s in statements)
    assert len(resources) == 2 and all(
        any(key in resource for resource in resources) for key in keys
    )
    models = [
        m
        for m in resources_of_type(template, "AWS::SageMaker::Model").values()
        if "SM_VLLM_CONFIG" in m["Properties"]["PrimaryContainer"]["Environment"]
    ]
    assert len(models) == 2
    assert all(any("ServedNames" in dep for dep in m["DependsOn"]) for m in models)


def test_a_shared_name_needs_weights_and_the_vllm_container():
    stack = new_stack("Bad")
    with pytest.raises(ConfigurationError) as error:
        serving_model(
            stack,
            model_data=None,
            served_model_name="copy",
            client_model_name="shared",
            served_model_name_variable="MODEL_NAME",
            environment={"SM_VLLM_CONFIG": "/x.yaml"},
        )
    text = str(error.value)
    assert "3 problems" in text and "needs model_data" in text
    assert "AWS's SageMaker vLLM container only" in text and "SM_VLLM_CONFIG" in text


def test_one_name_for_both_needs_no_file():
    stack = new_stack("Same")
    model = serving_model(stack, served_model_name="m", client_model_name="m")
    env = stack.resolve(model.cfn_model.primary_container)["environment"]
    assert env["SM_VLLM_SERVED_MODEL_NAME"] == "m" and model.served_names_file is None

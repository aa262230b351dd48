"""Every copy serves the shared client name after its own copy name (vLLM config file route).

What the container does with it is cited in ``cdk_llm_serving/sagemaker/served_names.py``
(vLLM 0.33.0 ``OpenAIServingModels.model_name`` reports the first served name; the SageMaker
vLLM entrypoint passes ``SM_VLLM_CONFIG`` as ``--config``; vLLM expands a YAML list into the
flag plus one token per item).
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from cdk_llm_serving import ModelData, VllmPool, VllmPoolEndpoint
from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.ops.fleet import served_name
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
        config=VllmConfig(model="x", served_model_name="gpt-oss-20b", max_model_len=32768),
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


def _writer_statements(template: dict, action: str) -> list[str]:
    return [
        json.dumps(statement["Resource"])
        for policy in resources_of_type(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if action in statement["Action"]
    ]


def test_two_owners_of_the_same_weights_and_names_never_share_a_file():
    """Deleting one endpoint (or moving a construct) must not remove another's file."""
    stack = new_stack("Shared")
    weights = ModelData.from_s3_uri("s3://weights/gpt-oss-20b/")
    first, second = (
        serving_model(stack, id, model_data=weights, served_model_name="c", client_model_name="s")
        for id in ("Staging", "Production")
    )
    assert first.served_names_file and second.served_names_file
    keys = {first.served_names_file.key, second.served_names_file.key}
    assert len(keys) == 2 and all(k.startswith("gpt-oss-20b/cdk-llm-serving/") for k in keys)


def test_the_old_file_is_deletable_after_the_prefix_changes_and_only_its_own():
    """CloudFormation deletes the replaced file in cleanup, when the policy names the new key."""
    keys = {}
    for prefix in ("gpt-oss-20b/v1/", "gpt-oss-20b/v2/"):
        stack = new_stack("Moved")
        model = serving_model(
            stack,
            model_data=ModelData.from_s3_uri(f"s3://weights/{prefix}"),
            served_model_name="c",
            client_model_name="s",
        )
        assert model.served_names_file is not None
        keys[prefix] = model.served_names_file.key
        template = template_of(stack)
    (put,) = _writer_statements(template, "s3:PutObject")
    assert keys["gpt-oss-20b/v2/"] in put and keys["gpt-oss-20b/v1/"] not in put
    (delete,) = _writer_statements(template, "s3:DeleteObject")
    resource = json.loads(delete)  # arn:<partition>:s3:::<bucket>/<key pattern>
    if isinstance(resource, dict):
        resource = "".join(p for p in resource["Fn::Join"][1] if isinstance(p, str))
    pattern = re.escape(resource.split(":::")[-1]).replace(r"\*", ".*")
    assert re.fullmatch(pattern, "weights/" + keys["gpt-oss-20b/v1/"])
    other_owner = keys["gpt-oss-20b/v1/"].replace(keys["gpt-oss-20b/v1/"][-13:-5], "00000000")
    assert not re.fullmatch(pattern, "weights/" + other_owner)
    assert not re.fullmatch(pattern, "weights/gpt-oss-20b/v1/config.json")


@pytest.mark.parametrize("uri", ["s3://weights/gpt-oss-20b/model.tar.gz", "s3://weights/m.tgz/"])
def test_an_archive_is_refused_not_mounted_as_an_empty_prefix(uri):
    """SageMaker would mount ``<archive>/`` as a folder: the weights and the names file missing."""
    with pytest.raises(ConfigurationError) as error:
        serving_model(
            new_stack("Archive"),
            model_data=ModelData.from_s3_uri(uri),
            served_model_name="c",
            client_model_name="s",
        )
    (problem,) = error.value.problems
    assert problem.property == "model_data.prefix" and "not an archive" in problem.allowed


def test_fleet_reads_the_copy_name_from_the_synthesized_environment(fleet):
    """``ops.fleet`` cannot import this package's constructs; it reads what they write."""
    stack, serving, _ = fleet
    for model in serving.models.values():
        env = stack.resolve(model.cfn_model.primary_container)["environment"]
        assert served_name(env) == model.served_model_name


def test_cdk_destroy_deletes_exactly_the_file_the_resource_wrote(fleet):
    _, _, template = fleet
    for resource in resources_of_type(template, "Custom::AWS").values():
        create, delete = (json.loads(resource["Properties"][k]) for k in ("Create", "Delete"))
        if create["action"] != "putObject":
            continue
        assert (delete["service"], delete["action"]) == ("S3", "deleteObject")
        assert delete["parameters"] == {
            "Bucket": create["parameters"]["Bucket"],
            "Key": create["parameters"]["Key"],
        }
        assert create["physicalResourceId"]["id"] == create["parameters"]["Key"]

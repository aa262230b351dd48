"""``ContainerImage.from_dlc`` and the region check of ECR images.

The DLC account per region is aws-cdk-lib's own region fact (the real artifact), the
registry domain the partition's ``AWS::URLSuffix``.
"""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk.region_info import RegionInfo

from cdk_llm_serving import ContainerImage
from cdk_llm_serving.errors import ConfigurationError
from tests.support.builders import serving_model, template_of
from tests.support.template_helpers import only_resource

DLC = ContainerImage.from_dlc("vllm", "server-sagemaker-cuda-v1")


def stack_in(region: str | None, name: str = "Images") -> Stack:
    return Stack(App(), name, env=Environment(region=region) if region else None)


def model_template(region: str | None, image: ContainerImage = DLC) -> dict:
    stack = stack_in(region)
    serving_model(stack, image=image)
    return template_of(stack)


def image_of(template: dict) -> object:
    _, model = only_resource(template, "AWS::SageMaker::Model")
    return model["Properties"]["PrimaryContainer"]["Image"]


@pytest.mark.parametrize("region", ["us-west-2", "ap-east-1", "me-south-1"])
def test_dlc_account_comes_from_the_region_facts(region):
    account = RegionInfo.get(region).dlc_repository_account
    assert account is not None
    template = model_template(region)
    assert image_of(template) == {
        "Fn::Join": [
            "",
            [
                f"{account}.dkr.ecr.{region}.",
                {"Ref": "AWS::URLSuffix"},
                "/vllm:server-sagemaker-cuda-v1",
            ],
        ]
    }
    policies = json.dumps(
        [
            r
            for r in template["Resources"].values()
            if r["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        ]
    )
    assert f":ecr:{region}:{account}:repository/vllm" in policies


def test_a_region_agnostic_stack_maps_the_account_per_region():
    template = model_template(None)
    rendered = json.dumps(image_of(template))
    assert "Fn::FindInMap" in rendered and "AWS::Region" in rendered
    (mapping,) = template["Mappings"].values()
    assert mapping["us-east-1"] == {"value": "763104351884"}
    assert mapping["ap-east-1"] == {"value": "871362719292"}


def test_a_region_without_a_dlc_account_is_refused():
    assert RegionInfo.get("af-south-1").dlc_repository_account is None
    with pytest.raises(ConfigurationError) as error:
        model_template("af-south-1")
    assert "image = 'DLC vllm:server-sagemaker-cuda-v1 in af-south-1'" in str(error.value)


def test_an_ecr_image_from_another_region_is_refused_when_the_region_is_known():
    other = ContainerImage.from_ecr_uri(
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm:server-sagemaker-cuda-v1"
    )
    with pytest.raises(ConfigurationError) as error:
        model_template("eu-west-1", other)
    assert "the image is in us-east-1 but the stack deploys to eu-west-1" in str(error.value)
    # Unknown at synth time: nothing to compare.
    assert image_of(model_template(None, other)).startswith("123456789012.dkr.ecr.us-east-1")

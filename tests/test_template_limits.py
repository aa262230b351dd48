"""CloudFormation's template limits fail synth with the heaviest constructs and the remedy."""

from __future__ import annotations

import pytest
from aws_cdk import CfnResource, CfnWaitConditionHandle, NestedStack

from cdk_llm_serving._cdk.template_limits import (
    MAX_RESOURCES,
    MAX_TEMPLATE_BYTES,
    RESOURCE_LIMIT_CONTEXT,
)
from tests.support.builders import new_stack, serving_model, template_of


def test_a_stack_over_the_byte_limit_fails_synth_naming_the_heaviest_constructs():
    stack = new_stack()
    serving_model(stack)
    # One bulky resource of the user's own pushes the template over 1,000,000 bytes.
    CfnResource(
        stack,
        "Bulky",
        type="Custom::Bulky",
        properties={
            "ServiceToken": "arn:aws:sns:us-east-1:111111111111:t",
            "Payload": "x" * MAX_TEMPLATE_BYTES,
        },
    )
    with pytest.raises(RuntimeError, match="ValidationFailed") as failure:
        template_of(stack)
    message = str(failure.value)
    assert "TemplateSizeLimit" in message
    assert "over CloudFormation's limit of 1,000,000; the heaviest constructs: Bulky (" in message
    assert "ModelRole" in message  # the library construct's share is named too
    assert "Remedy: split the constructs over several stacks" in message
    assert message.count("ERROR The template is") == 1


def test_a_stack_over_the_resource_limit_fails_before_aws_cdk_lib_naming_the_constructs():
    # aws-cdk-lib's own limit moves with this context key; ours follows it (default 500).
    stack = new_stack(**{RESOURCE_LIMIT_CONTEXT: 5})
    serving_model(stack)
    for index in range(5):
        CfnWaitConditionHandle(stack, f"Handle{index}")
    with pytest.raises(RuntimeError) as failure:
        template_of(stack)
    message = str(failure.value)
    assert "CloudFormation resources, over the limit of 5 a stack may hold" in message
    assert "Model (" in message and "Handle0 (1)" in message
    assert "Remedy: split the constructs over several stacks" in message
    assert "TooManyResourcesInStack" not in message  # ours, not aws-cdk-lib's, speaks first


def test_the_resource_limit_is_cloudformations():
    assert (
        MAX_RESOURCES == 500
    )  # https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html


def test_resources_inside_a_nested_stack_count_for_the_nested_stack_not_its_parent():
    stack = new_stack(**{RESOURCE_LIMIT_CONTEXT: 12})
    serving_model(stack)
    nested = NestedStack(stack, "Nested")
    for index in range(10):
        CfnWaitConditionHandle(nested, f"Handle{index}")
    resources = template_of(stack)["Resources"]
    # Under the limit of 12 only because the nested stack's 10 handles stay out of the count.
    assert 2 < len(resources) <= 12
    assert [body["Type"] for body in resources.values()].count("AWS::CloudFormation::Stack") == 1

"""Validation accepts only what both botocore's API model and CloudFormation's schema accept.

``CLOUDFORMATION_NARROWER`` is compared with the resource schemas cfn-lint ships, and the
schemas are walked alongside botocore's shapes so a new release that narrows (or widens) an
enum shows up here.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.model import ListShape, Shape, StructureShape

from cdk_llm_serving._cdk.service_limits import CLOUDFORMATION_NARROWER, limits, sagemaker_model
from cdk_llm_serving.errors import ConfigurationError
from tests.support.builders import new_stack, pool_endpoint
from tests.support.cfn_schemas import resource_schema

#: CloudFormation resource -> the botocore input shape its properties mirror.
ROOTS = {
    "AWS::SageMaker::EndpointConfig": "CreateEndpointConfigInput",
    "AWS::SageMaker::Endpoint": "CreateEndpointInput",
    "AWS::SageMaker::Model": "CreateModelInput",
    "AWS::SageMaker::InferenceComponent": "CreateInferenceComponentInput",
    "AWS::SageMaker::Cluster": "CreateClusterRequest",
}

#: Narrower enums in places no construct of ours sets (found by the walk, left out on purpose).
UNUSED = {
    ("ClusterInstanceGroupSpecification", "OnStartDeepHealthChecks"),
    ("ClusterAutoPatchConfig", "PatchingStrategy"),
}


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = schema
        for part in node["$ref"].split("/")[1:]:
            target = target[part]
        node = target
    return node


def schema_at(resource_type: str, path: str) -> dict[str, Any]:
    schema = resource_schema(resource_type)
    node = schema
    for part in path.split("/"):
        node = _resolve(schema, node)
        node = node["items"] if part == "*" else node["properties"][part]
    return _resolve(schema, node)


def narrower_enums() -> set[tuple[str, str]]:
    """(structure, member) whose CloudFormation enum lacks values of botocore's enum."""
    found: set[tuple[str, str]] = set()

    def walk(schema: dict[str, Any], node: dict[str, Any], shape: Shape, depth: int) -> None:
        node = _resolve(schema, node)
        if depth > 12:
            return
        if isinstance(shape, ListShape) and "items" in node:
            walk(schema, node["items"], shape.member, depth + 1)
        elif isinstance(shape, StructureShape):
            properties = node.get("properties", {})
            for name, member in shape.members.items():
                if name not in properties:
                    continue
                child = _resolve(schema, properties[name])
                botocore_enum = set(getattr(member, "enum", None) or ())
                if botocore_enum and "enum" in child and not botocore_enum <= set(child["enum"]):
                    found.add((shape.name, name))
                walk(schema, child, member, depth + 1)

    for resource_type, root in ROOTS.items():
        schema = resource_schema(resource_type)
        walk(schema, schema, sagemaker_model().shape_for(root), 0)
    return found


def test_every_recorded_narrowing_is_the_schema_s_own():
    for (structure, member), constraint in CLOUDFORMATION_NARROWER.items():
        node = schema_at(constraint.resource_type, constraint.path)
        assert constraint.enum is not None
        schema_enum = [str(value) for value in node["enum"]]
        assert set(constraint.enum) == set(schema_enum), (structure, member)
        # ... and still narrower than the API (fewer values, or a list where the API has
        # none), else the entry is dead weight.
        shape = sagemaker_model().shape_for(structure)
        target = shape.members[member] if member is not None else shape
        api_enum = list(getattr(target, "enum", None) or [])
        assert not api_enum or set(api_enum) - set(constraint.enum), (structure, member)
        expected = [v for v in api_enum if v in schema_enum] if api_enum else schema_enum
        assert list(limits(structure, member).enum) == expected


def test_the_walk_finds_exactly_the_recorded_and_the_unused_narrowings():
    recorded = {
        (structure, member) for structure, member in CLOUDFORMATION_NARROWER if member is not None
    }
    # DeepHealthCheckType is recorded by its own shape; the walk names it by the list member.
    recorded.add(("ClusterInstanceGroupSpecification", "OnStartDeepHealthChecks"))
    found = narrower_enums()
    assert ("ProductionVariantRoutingConfig", "RoutingStrategy") in found
    assert found <= recorded | UNUSED, found - recorded - UNUSED


def test_kv_aware_routing_is_refused_at_synth():
    with pytest.raises(ConfigurationError) as error:
        pool_endpoint(new_stack("KvAware"), routing_strategy="KV_AWARE")
    assert "routing_strategy = 'KV_AWARE'" in str(error.value)
    assert "LEAST_OUTSTANDING_REQUESTS, RANDOM, PREFIX_AWARE" in str(error.value)
    assert (
        "the SageMaker API accepts KV_AWARE but CloudFormation's AWS::SageMaker::EndpointConfig"
        in str(error.value)
    )


def test_a_value_neither_accepts_gets_the_plain_message():
    with pytest.raises(ConfigurationError) as error:
        pool_endpoint(new_stack("Typo"), routing_strategy="RANDOMLY")
    assert "CloudFormation" not in str(error.value) and "RANDOM" in str(error.value)

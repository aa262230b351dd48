"""where CloudFormation's resource schema (as cfn-lint ships it) is narrower
than botocore's service model, HyperPod validation uses the schema's values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving._cdk.service_limits import sagemaker_model
from cdk_llm_serving.hyperpod._facts import hyperpod_facts
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
from tests.support.builders import new_stack
from tests.support.cfn_schemas import resource_schema


def _schema_enums() -> Iterator[tuple[str, list[str]]]:
    """(botocore shape name, CloudFormation enum) for every enum of the cluster schema whose
    definition, or definition property, has a botocore shape of the same name."""
    model = sagemaker_model()
    shapes = set(model.shape_names)
    for name, definition in resource_schema("AWS::SageMaker::Cluster")["definitions"].items():
        if "enum" in definition and name in shapes:
            yield name, definition["enum"]
        if name not in shapes:
            continue
        members = getattr(model.shape_for(name), "members", {})
        for prop, spec in definition.get("properties", {}).items():
            if "enum" in spec and prop in members:
                yield members[prop].name, spec["enum"]


def _botocore_enum(shape: str) -> list[str]:
    return list(getattr(sagemaker_model().shape_for(shape), "enum", None) or [])


def test_every_narrower_schema_enum_is_recorded_as_the_schema_has_it():
    recorded: dict[str, Any] = hyperpod_facts()["cloudformation_enums"]
    narrower = {
        shape: enum for shape, enum in _schema_enums() if set(enum) < set(_botocore_enum(shape))
    }
    assert narrower, "expected at least DeepHealthCheckType to be narrower"
    assert {shape: sorted(enum) for shape, enum in narrower.items()} == {
        shape: sorted(enum) for shape, enum in recorded.items()
    }


def test_a_health_check_cloudformation_refuses_is_refused_at_synth():
    assert "MultiNodeTrainingValidation" in _botocore_enum("DeepHealthCheckType")
    groups = [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu(
            "gpu",
            "ml.p5en.48xlarge",
            2,
            deep_health_checks=("InstanceStress", "MultiNodeTrainingValidation"),
        ),
    ]
    with pytest.raises(ConfigurationError) as caught:
        HyperPodEksCluster(
            new_stack(), "HyperPod", kubernetes_version="1.33", instance_groups=groups
        )
    (problem,) = caught.value.problems
    assert problem.property == "instance_groups[1].deep_health_checks"
    assert problem.value == "MultiNodeTrainingValidation"

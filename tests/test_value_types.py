"""Every value type a construct takes as a prop follows the one declared contract."""

from __future__ import annotations

import inspect

import pytest

import cdk_llm_serving
from cdk_llm_serving._cdk.contracts import PropValue

#: Plain values passed as construct props. (VllmPool is checked by VllmPoolEndpoint with the
#: planner, since what a pool may run depends on the model and the other pools.)
VALUE_TYPES = [
    "AsyncInference",
    "BlueGreenDeployment",
    "CapacitySize",
    "ComponentSpecification",
    "ContainerImage",
    "Exposure",
    "HelmChartSource",
    "HyperPodInstanceGroup",
    "InferenceAutoScaling",
    "InstancePool",
    "KubernetesTaint",
    "ModelData",
    "PoolEndpointOptions",
    "RollingDeployment",
    "TrafficShift",
]


@pytest.mark.parametrize("name", VALUE_TYPES)
def test_value_type_validates_under_the_property_it_was_given_as(name):
    cls = getattr(cdk_llm_serving, name)
    assert issubclass(cls, PropValue)
    parameters = list(inspect.signature(cls.validate).parameters)
    assert parameters[:3] == ["self", "problems", "prop"]

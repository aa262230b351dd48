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
    "RollingDeployment",
    "TrafficShift",
]


@pytest.mark.parametrize("name", VALUE_TYPES)
def test_value_type_validates_under_the_property_it_was_given_as(name):
    cls = getattr(cdk_llm_serving, name)
    assert issubclass(cls, PropValue)
    parameters = list(inspect.signature(cls.validate).parameters)
    assert parameters[:3] == ["self", "problems", "prop"]


def test_prop_types_refuse_a_bool_count_a_string_list_and_each_bad_element():
    """typeguard decides, on the library's form of each hint (``errors._for_typeguard``): a
    bool is not a count, a string is not a list of strings, a tuple is a list, ``X | None``
    and a mapping's values are checked, and every bad element is its own problem."""
    from collections.abc import Mapping, Sequence

    from cdk_llm_serving.errors import Problems, check_types

    hints = {
        "replicas": int,
        "instance_types": Sequence[str],
        "sizes": list[int],
        "name": str | None,
        "environment": Mapping[str, str],
        "labels": tuple[str, ...],
    }
    values = {
        "replicas": True,
        "instance_types": "ml.p5.48xlarge",
        "sizes": (1, "2", 3.5),
        "name": 3,
        "environment": {"A": 1},
        "labels": ["a", "b"],
    }
    problems = Problems("X")
    check_types(problems, hints, values)
    assert [str(p) for p in problems.problems()] == [
        "replicas = True: must be int, not a bool",
        "instance_types = 'ml.p5.48xlarge': must be a list, each element str; not a str",
        "sizes[1] = '2': must be int, not a str",
        "sizes[2] = 3.5: must be int, not a float",
        "name = 3: must be str | None, not an int",
        "environment = {'A': 1}: must be Mapping[str, str], not a dict",
    ]

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


def test_prop_types_follow_the_library_s_rules_not_typeguard_s():
    """Why ``errors.check_types`` is not typeguard's ``check_type`` (see errors.py): a bool is
    not a count, a string is not a list of strings, a tuple is a list, and every bad element is
    its own problem with its value."""
    from collections.abc import Sequence

    import typeguard

    from cdk_llm_serving.errors import Problems, check_types

    hints = {"replicas": int, "instance_types": Sequence[str], "sizes": list[int]}
    values = {"replicas": True, "instance_types": "ml.p5.48xlarge", "sizes": (1, "2", 3.5)}
    problems = Problems("X")
    check_types(problems, hints, values)
    assert [str(p) for p in problems.problems()] == [
        "replicas = True: must be int, not a bool",
        "instance_types = 'ml.p5.48xlarge': must be a list, each element str; not a str",
        "sizes[1] = '2': must be int, not a str",
        "sizes[2] = 3.5: must be int, not a float",
    ]
    # typeguard takes the first two and stops at the tuple (not a list), naming no value.
    typeguard.check_type("replicas", True, int)
    typeguard.check_type("instance_types", "ml.p5.48xlarge", Sequence[str])
    with pytest.raises(TypeError, match="must be a list; got tuple instead"):
        typeguard.check_type("sizes", (1, "2", 3.5), list[int])

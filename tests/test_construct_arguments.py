"""A misspelled, missing or extra argument to a construct is one ``ConfigurationError`` naming each (with the closest prop names), not Python's ``TypeError``
that names only the first. Every public construct whose ``__init__`` is ``checked_props``."""

from __future__ import annotations

import inspect

import pytest
from aws_cdk import App, Stack
from constructs import Construct

import cdk_llm_serving
from cdk_llm_serving import ConfigurationError


def _checked_constructs() -> list[type]:
    found = []
    for name in sorted(cdk_llm_serving.__all__):
        value = getattr(cdk_llm_serving, name)
        if (
            inspect.isclass(value)
            and issubclass(value, Construct)
            and hasattr(value.__init__, "__wrapped__")
        ):
            found.append(value)
    return found


CONSTRUCTS = _checked_constructs()


def test_the_public_constructs_are_checked():
    names = {c.__name__ for c in CONSTRUCTS}
    assert {"ServingModel", "VllmPoolEndpoint", "HyperPodEksCluster"} <= names, names


@pytest.mark.parametrize("construct", CONSTRUCTS, ids=lambda c: c.__name__)
def test_every_binding_problem_at_once(construct):
    stack = Stack(App(), "S")
    parameters = inspect.signature(construct.__init__.__wrapped__).parameters
    required = [
        name for name, p in parameters.items() if p.default is p.empty and p.kind is p.KEYWORD_ONLY
    ]
    with pytest.raises(ConfigurationError) as raised:
        construct(stack, "X", not_a_prop_of_anything=1)
    problems = {p.property: p.allowed for p in raised.value.problems}
    assert problems.pop("not_a_prop_of_anything").startswith(f"not a prop of {construct.__name__}")
    assert problems == {name: "required" for name in required}
    assert raised.value.subject == f"{construct.__name__} 'S/X'"
    assert isinstance(raised.value, TypeError)  # what Python raises for a call that does not bind


def test_a_misspelled_prop_names_the_closest():
    stack = Stack(App(), "S")
    with pytest.raises(ConfigurationError) as raised:
        cdk_llm_serving.ServingModel(stack, "M", imagee=None)
    allowed = {p.property: p.allowed for p in raised.value.problems}
    assert "did you mean image" in allowed["imagee"] and allowed["image"] == "required"


def test_extra_positional_arguments_are_named():
    stack = Stack(App(), "S")
    with pytest.raises(ConfigurationError) as raised:
        cdk_llm_serving.ServingModel(stack, "M", "image-uri")
    assert raised.value.problems[0].property == "(positional)"


def test_unpacked_props_are_checked_with_the_keywords_at_once():
    """``**props: Unpack[PoolEndpointProps]``: a misspelled prop, a wrong prop type and a wrong
    keyword type are one error, whether or not the call binds."""
    from cdk_llm_serving.sagemaker import InstancePoolEndpoint

    stack = Stack(App(), "Props")
    with pytest.raises(ConfigurationError) as bound:
        InstancePoolEndpoint(stack, "E", model=None, pools=[], endpoint_nme="x", variant_name=3)
    assert [p.property for p in bound.value.problems] == ["endpoint_nme", "model", "variant_name"]
    assert "did you mean endpoint_name?" in str(bound.value)
    with pytest.raises(ConfigurationError) as unbound:
        InstancePoolEndpoint(stack, "F", pools=[], endpoint_name="x")
    assert [p.property for p in unbound.value.problems] == ["model"]

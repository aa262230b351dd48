"""One vocabulary across the public surface: a walk over ``cdk_llm_serving.__all__``.

Every exported class, its constructor, its ``from_*``/``build_*`` class methods and its
dataclass fields are read for the rules below, so a new construct that says an old name, takes
a bare string where a typed value exists, grants the other way round or raises another error
class fails here, not in review.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cdk_llm_serving import ConfigurationError

#: Old name -> the one name for the concept (no aliases before the first release).
RENAMED = {
    "quantization": "weight_format",
    "base": "config",
    "model_store": "weights",
    "stream_from": "weights",
    "autoscaling": "auto_scaling",
    "node_autoscaling": "node_auto_scaling",
    "alerts": "alarms",
}
#: Where an old name is the right name: vLLM's own ``--quantization`` flag.
OWN_NAME = {("VllmConfig", "quantization")}

#: Records the library returns (a plan, a pool's derived configuration): they report names
#: (``as_dict``, JSON) and carry the typed facts beside them (``Plan.format_spec``,
#: ``Plan.instance_spec``); nobody writes them as input.
RESULTS = {"Plan", "PoolVllmPlan"}
#: Lookups by name, below the typed value (``InstanceType`` is a ``str``, and the catalog is
#: what ``InstanceType`` itself reads, so it cannot import it back).
LOOKUPS = {("Catalog", "get")}

#: Parameter (or field) name -> the typed value it must accept (strings are converted).
TYPED = {
    "instance_type": "InstanceType",
    "instance_types": "InstanceType",
    "weight_format": "WeightFormat",
    "kubernetes_version": "KubernetesVersion",
}


#: The public surface: the top level and every sub-package a user imports from.
MODULES = ("", ".sagemaker", ".hyperpod", ".planning", ".vllm")


def _exported() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for suffix in MODULES:
        module = importlib.import_module(f"cdk_llm_serving{suffix}")
        for name in module.__all__:
            found.setdefault(name, getattr(module, name))
    return found


def _exported_classes() -> list[tuple[str, type]]:
    return sorted((name, value) for name, value in _exported().items() if inspect.isclass(value))


def _callables(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    """The constructor and every public method, class method and static method."""
    yield "__init__", inspect.unwrap(cls.__init__)
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, classmethod | staticmethod):
            yield name, inspect.unwrap(member.__func__)
        elif inspect.isfunction(member):
            yield name, inspect.unwrap(member)


def _parameters(cls: type) -> Iterator[tuple[str, str, str]]:
    """(where, name, annotation text) of every keyword a user writes for ``cls``."""
    if dataclasses.is_dataclass(cls):
        for field in dataclasses.fields(cls):
            if field.init:
                yield "field", field.name, str(field.type)
    for where, function in _callables(cls):
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            continue
        for parameter in signature.parameters.values():
            if parameter.name in ("self", "cls", "scope", "id"):
                continue
            annotation = parameter.annotation
            text = (
                annotation
                if isinstance(annotation, str)
                else getattr(annotation, "__name__", str(annotation))
            )
            yield where, parameter.name, str(text)


def _doc(cls: type) -> str:
    return (inspect.getdoc(cls) or "") + "\n" + (inspect.getdoc(cls.__init__) or "")


CLASSES = _exported_classes()
FUNCTIONS = sorted(
    (name, value) for name, value in _exported().items() if inspect.isfunction(value)
)


@pytest.mark.parametrize(("name", "function"), FUNCTIONS, ids=[name for name, _ in FUNCTIONS])
def test_functions_say_the_same_names(name, function):
    signature = inspect.signature(inspect.unwrap(function))
    wrong = [
        p.name
        for p in signature.parameters.values()
        if p.name in RENAMED or (p.name in TYPED and TYPED[p.name] not in str(p.annotation))
    ]
    assert not wrong, f"{name}({', '.join(wrong)}): old names or bare values"


def test_the_walk_sees_the_public_surface():
    names = {name for name, _ in CLASSES}
    assert {"InstancePoolEndpoint", "VllmPoolEndpoint", "InstancePool", "ModelSizing"} <= names
    assert len(CLASSES) > 40


@pytest.mark.parametrize(("name", "cls"), CLASSES, ids=[name for name, _ in CLASSES])
def test_one_name_per_concept(name, cls):
    wrong = []
    for where, parameter, _ in _parameters(cls):
        if parameter in RENAMED and (name, parameter) not in OWN_NAME:
            wrong.append(f"{where}({parameter}=): say {RENAMED[parameter]}")
    assert not wrong, f"{name}: {wrong}"


@pytest.mark.parametrize(("name", "cls"), CLASSES, ids=[name for name, _ in CLASSES])
def test_identifiers_take_their_typed_value(name, cls):
    if name in RESULTS:
        return
    wrong = [
        f"{where}({parameter}: {annotation})"
        for where, parameter, annotation in _parameters(cls)
        if parameter in TYPED
        and TYPED[parameter] not in annotation
        and (name, where) not in LOOKUPS
    ]
    assert not wrong, f"{name} takes bare values where a typed one exists: {wrong}"


@pytest.mark.parametrize(("name", "cls"), CLASSES, ids=[name for name, _ in CLASSES])
def test_grants_go_to_a_grantee_and_return_a_grant(name, cls):
    wrong = []
    for method_name, member in vars(cls).items():
        if not method_name.startswith("grant_") or not callable(member):
            continue
        signature = inspect.signature(inspect.unwrap(member))
        returns = str(signature.return_annotation)
        first = next(iter(list(signature.parameters.values())[1:]), None)
        if "Grant" not in returns or first is None or "IGrantable" not in str(first.annotation):
            wrong.append(f"{method_name}{signature}")
    assert not wrong, f"{name}: grant_x(grantee: iam.IGrantable, ...) -> iam.Grant, not {wrong}"


@pytest.mark.parametrize(("name", "cls"), CLASSES, ids=[name for name, _ in CLASSES])
def test_every_error_is_a_configuration_error(name, cls):
    if issubclass(cls, BaseException):
        assert issubclass(cls, ConfigurationError), f"{name} is another error channel"


def test_the_walk_can_fail():
    class Old:
        """A construct that still says quantization."""

        def __init__(self, *, quantization: str, instance_type: str) -> None: ...

        def grant_read(self) -> None: ...

    with pytest.raises(AssertionError):
        test_one_name_per_concept("Old", Old)
    with pytest.raises(AssertionError):
        test_identifiers_take_their_typed_value("Old", Old)
    with pytest.raises(AssertionError):
        test_grants_go_to_a_grantee_and_return_a_grant("Old", Old)
    with pytest.raises(AssertionError):
        test_every_error_is_a_configuration_error("KeyError", KeyError)

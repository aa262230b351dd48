"""Every ``:param x:`` in a HyperPod construct's docstring names a parameter it takes."""

from __future__ import annotations

import inspect
import re

import pytest

import cdk_llm_serving.hyperpod as hyperpod

_CLASSES = [
    getattr(hyperpod, name)
    for name in hyperpod.__all__
    if inspect.isclass(getattr(hyperpod, name))
    and re.search(r":param \w+:", inspect.getdoc(getattr(hyperpod, name)) or "")
]


def documented_but_missing(cls: type) -> list[str]:
    documented = re.findall(r":param (\w+):", inspect.getdoc(cls) or "")
    taken = set(inspect.signature(cls.__init__).parameters)
    return [name for name in documented if name not in taken]


@pytest.mark.parametrize("cls", _CLASSES, ids=lambda cls: cls.__name__)
def test_documented_parameters_exist(cls):
    assert documented_but_missing(cls) == []


def test_the_check_finds_a_parameter_that_does_not_exist():
    class Documented:
        """:param gpu_subnet: a subnet.
        :param vpc: a VPC."""

        def __init__(self, vpc: object) -> None: ...

    assert documented_but_missing(Documented) == ["gpu_subnet"]
    assert hyperpod.HyperPodEksCluster in _CLASSES

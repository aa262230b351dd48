"""Duration defaults written in plain seconds agree with aws-cdk-lib's own answers."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from aws_cdk import Duration

import cdk_llm_serving
from cdk_llm_serving._cdk.durations import Span
from cdk_llm_serving._cdk.validation import seconds_of, whole_seconds


def _module_spans() -> dict[str, Span]:
    """Every module-level ``Span`` of the library (the defaults read without the kernel)."""
    found: dict[str, Span] = {}
    for info in pkgutil.walk_packages(cdk_llm_serving.__path__, "cdk_llm_serving."):
        if ".assets" in info.name:
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, Span):
                found[f"{info.name}.{name}"] = value
    return found


SPANS = _module_spans()


def test_the_library_holds_its_duration_defaults_as_spans():
    assert len(SPANS) >= 10, sorted(SPANS)


@pytest.mark.parametrize("name", sorted(SPANS))
def test_a_span_answers_as_its_duration_does(name):
    span = SPANS[name]
    assert span.duration.to_seconds(integral=False) == span.seconds
    assert span.human() == span.duration.to_human_string()


@pytest.mark.parametrize("amount", [0.2, 0.001, 1, 2, 30, 60, 120, 300, 900, 3600, 7200, 86400])
def test_of_seconds_writes_what_aws_cdk_lib_would(amount):
    span = Span.of_seconds(amount)
    assert span.text == span.duration.to_human_string()
    assert span.duration.to_seconds(integral=False) == amount


def test_a_default_is_known_and_another_duration_is_read():
    default = Span.of_seconds(300)
    assert default.given(default.duration) is default
    other = default.given(Duration.minutes(5))
    assert other is not default and other.seconds == 300 and other.human() == "5 minutes"
    assert whole_seconds(default.duration, default) == 300
    assert seconds_of(Duration.seconds(7), default) == 7
    assert seconds_of(None, default) is None and seconds_of(9, default) == 9


def test_a_fraction_of_a_second_is_still_refused_where_whole_seconds_are_read():
    with pytest.raises(RuntimeError, match="whole number of seconds"):
        Span.read(Duration.millis(1500))
    assert Span.read(Duration.millis(1500), integral=False).seconds == 1.5

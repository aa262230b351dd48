"""The Python-side token check agrees with aws-cdk-lib on real tokens and plain values, and the
shared checks ask it only of values they would refuse."""

from __future__ import annotations

import pytest
from aws_cdk import Aws, Duration, Fn, Token

from cdk_llm_serving._cdk import validation
from cdk_llm_serving._cdk.service_limits import Limits
from cdk_llm_serving._cdk.validation import is_unresolved
from cdk_llm_serving.errors import Problems

TOKENS = [
    Aws.REGION,
    f"arn:aws:s3:::{Aws.ACCOUNT_ID}-weights",
    Fn.join("-", [Aws.REGION, "weights"]),
    Token.as_number(Aws.ACCOUNT_ID),
    Token.as_number(Fn.get_att("Endpoint", "Count")),
]
PLAIN = ["ml.p5.48xlarge", "${NotAToken}", "", 0, 3, 2.5, -1.0, 1e300, True, None]


# Fixed ids: a token's text carries a counter that differs from process to process, and
# pytest-xdist needs every worker to collect the same test ids.
TOKEN_IDS = ["region", "arn-with-account", "join", "number-account", "number-get-att"]


@pytest.mark.parametrize("value", TOKENS, ids=TOKEN_IDS)
def test_tokens_are_unresolved(value):
    assert Token.is_unresolved(value)
    assert is_unresolved(value)


@pytest.mark.parametrize("value", PLAIN, ids=repr)
def test_plain_values_are_resolved(value):
    assert not is_unresolved(value)
    if value is not None:
        assert not Token.is_unresolved(value)


class _NoKernel:
    """Stands in for ``Token``: any question to the kernel fails the test."""

    @staticmethod
    def is_unresolved(value: object) -> bool:
        raise AssertionError(f"asked the kernel about {value!r}")


@pytest.mark.parametrize(
    "value",
    [None, True, False, Duration.minutes(1), object()],
    ids=["None", "True", "False", "Duration", "object"],  # stable: xdist compares ids
)
def test_values_that_are_never_tokens_are_not_asked_about(monkeypatch, value):
    monkeypatch.setattr(validation, "Token", _NoKernel)
    assert not is_unresolved(value)


NAME = Limits(minimum=1, maximum=63, pattern=r"[a-zA-Z0-9](-*[a-zA-Z0-9])*", enum=())
RANGE = Limits(minimum=1, maximum=10, pattern=None, enum=())


def test_checks_ask_nothing_of_values_they_accept(monkeypatch):
    monkeypatch.setattr(validation, "Token", _NoKernel)
    problems = Problems("test")
    validation.check_name(problems, "name", "my-endpoint", NAME, "a name")
    validation.check_range(problems, "count", 5, RANGE)
    validation.check_at_least(problems, "count", 5, 1)
    validation.check_one_of(problems, "strategy", "RANDOM", ["RANDOM", "LEAST"], "strategy")
    validation.check_s3_prefix(problems, "prefix", "models/llama/")
    validation.check_kubernetes_name(problems, "name", "vllm-serve")
    assert not problems


@pytest.mark.parametrize(
    "check",
    [
        lambda p, v: validation.check_name(p, "name", v, NAME, "a name"),
        lambda p, v: validation.check_one_of(p, "strategy", v, ["RANDOM"], "strategy"),
        lambda p, v: validation.check_s3_prefix(p, "prefix", v + "/model.tar.gz"),
        lambda p, v: validation.check_kubernetes_name(p, "name", v),
    ],
    ids=["name", "one-of", "s3-prefix", "kubernetes-name"],
)
def test_a_string_token_passes_the_checks_that_would_refuse_its_text(check):
    problems = Problems("test")
    check(problems, Aws.REGION)
    assert not problems
    check(problems, "Not_Valid!")
    assert problems


def test_a_number_token_passes_range_checks():
    problems = Problems("test")
    token = Token.as_number(Aws.ACCOUNT_ID)
    validation.check_range(problems, "count", token, RANGE)
    validation.check_at_least(problems, "count", token, 1)
    assert not problems
    validation.check_range(problems, "count", 11, RANGE)
    assert problems

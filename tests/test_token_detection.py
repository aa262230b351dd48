"""The Python-side token check agrees with aws-cdk-lib on real tokens and plain values."""

from __future__ import annotations

import pytest
from aws_cdk import Aws, Fn, Token

from cdk_llm_serving._cdk.validation import is_unresolved

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
def test_plain_values_are_resolved_without_asking_the_kernel(value):
    assert not is_unresolved(value)
    if value is not None:
        assert not Token.is_unresolved(value)

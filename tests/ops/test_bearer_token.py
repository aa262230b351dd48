"""The SageMaker bearer token has the structure AWS's generator gives it.

Source: aws/sagemaker-python-sdk,
``sagemaker-core/src/sagemaker/core/token_generator/token_generator.py`` (``_generate_token``):
POST to ``https://sagemaker.amazonaws.com/`` with ``Action=CallWithBearerToken``, SigV4
query-presigned for service ``sagemaker``, scheme stripped, ``&Version=1`` appended,
standard base64, prefix ``sagemaker-api-key-``, lifetime at most 43,200 s.

The signature is recomputed here from the SigV4 specification (hashlib/hmac, not botocore),
so a token signed for another method, host or service fails.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import urllib.parse
from datetime import timedelta

import pytest
from botocore.credentials import Credentials

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.ops.bearer_token import generate_bearer_token

ACCESS_KEY, SECRET_KEY, SESSION_TOKEN = (
    "AKIDEXAMPLE",
    "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    "FQoG//session+token=",
)


def decode(token: str) -> str:
    assert token.startswith("sagemaker-api-key-")
    encoded = token.removeprefix("sagemaker-api-key-")
    # Standard alphabet with padding (base64.b64encode), not the URL-safe one.
    assert base64.b64encode(base64.b64decode(encoded, validate=True)).decode() == encoded
    return base64.b64decode(encoded).decode()


def query_of(presigned: str) -> list[tuple[str, str]]:
    assert not presigned.startswith("https://") and presigned.startswith(
        "sagemaker.amazonaws.com/?"
    )
    return urllib.parse.parse_qsl(presigned.split("?", 1)[1], keep_blank_values=True)


#: The body is empty: its SHA-256 is the payload hash of the canonical request.
EMPTY_BODY_SHA256 = hashlib.sha256(b"").hexdigest()


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def expected_signature(params: list[tuple[str, str]], method: str, secret: str) -> str:
    """SigV4 query signing (docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html)."""
    signed = sorted((k, v) for k, v in params if k != "X-Amz-Signature")
    query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in signed
    )
    canonical = "\n".join(
        [method, "/", query, "host:sagemaker.amazonaws.com\n", "host", EMPTY_BODY_SHA256]
    )
    fields = dict(params)
    date = fields["X-Amz-Date"]
    scope = fields["X-Amz-Credential"].split("/", 1)[1]
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = ("AWS4" + secret).encode()
    for part in scope.split("/"):
        key = _hmac(key, part)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_token_is_a_presigned_post_for_call_with_bearer_token_version_1():
    token = generate_bearer_token(
        "us-west-2", credentials=Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)
    )
    presigned = decode(token)
    assert presigned.endswith("&Version=1")
    # Version=1 is appended after signing: the signature does not cover it.
    params = query_of(presigned.removesuffix("&Version=1"))
    fields = dict(params)
    assert fields["Action"] == "CallWithBearerToken"
    assert fields["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    access_key, date, region, service, terminator = fields["X-Amz-Credential"].split("/")
    assert (access_key, region, service, terminator) == (
        ACCESS_KEY,
        "us-west-2",
        "sagemaker",
        "aws4_request",
    )
    assert fields["X-Amz-Date"].startswith(date) and len(fields["X-Amz-Date"]) == 16
    assert fields["X-Amz-Expires"] == "43200"  # the generator's default: 12 hours
    assert fields["X-Amz-SignedHeaders"] == "host"
    assert fields["X-Amz-Security-Token"] == SESSION_TOKEN
    assert fields["X-Amz-Signature"] == expected_signature(params, "POST", SECRET_KEY)
    assert fields["X-Amz-Signature"] != expected_signature(params, "GET", SECRET_KEY)


def test_lifetime_and_long_term_credentials():
    token = generate_bearer_token(
        "eu-central-1",
        credentials=Credentials(ACCESS_KEY, SECRET_KEY),
        expiry=timedelta(minutes=15),
    )
    fields = dict(query_of(decode(token).removesuffix("&Version=1")))
    assert fields["X-Amz-Expires"] == "900" and "X-Amz-Security-Token" not in fields
    assert "/eu-central-1/sagemaker/" in fields["X-Amz-Credential"]


@pytest.mark.parametrize(
    "expiry", [timedelta(0), timedelta(hours=12, seconds=1), timedelta(milliseconds=1500)]
)
def test_lifetimes_the_generator_refuses(expiry):
    with pytest.raises(ConfigurationError, match="expiry = .*1 to 43200"):
        generate_bearer_token(
            "us-west-2", credentials=Credentials(ACCESS_KEY, SECRET_KEY), expiry=expiry
        )


def test_region_from_aws_region_as_aws_generator_reads_it(monkeypatch):
    """sagemaker-core's ``generate_token`` falls back to ``AWS_REGION``; botocore alone does not."""
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_REGION", "ap-southeast-2")
    token = generate_bearer_token(credentials=Credentials(ACCESS_KEY, SECRET_KEY))
    fields = dict(query_of(decode(token).removesuffix("&Version=1")))
    assert "/ap-southeast-2/sagemaker/" in fields["X-Amz-Credential"]

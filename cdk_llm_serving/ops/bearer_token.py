"""SageMaker bearer tokens for the OpenAI-compatible ``/openai/v1`` path, made as AWS's generator
makes them (aws/sagemaker-python-sdk, ``sagemaker-core/src/sagemaker/core/token_generator/
token_generator.py``) with botocore only; the steps: docs/design/cli.md, "SageMaker bearer tokens".
"""

from __future__ import annotations

import base64
import os
from datetime import timedelta

from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials
from botocore.session import get_session

from ..errors import Problems

#: The global host the generator signs for (not the regional runtime host).
TOKEN_HOST = "sagemaker.amazonaws.com"
TOKEN_SERVICE = "sagemaker"
TOKEN_ACTION = "CallWithBearerToken"
TOKEN_PREFIX = "sagemaker-api-key-"
#: Appended to the presigned URL after signing.
TOKEN_VERSION_SUFFIX = "&Version=1"
#: The longest lifetime AWS's generator accepts (12 hours).
MAX_TOKEN_SECONDS = 43_200


class BearerTokenError(RuntimeError):
    """No credentials or no region to sign with (the environment, not an argument; a lifetime
    outside 1 s - 12 h is a ``ConfigurationError``)."""


def generate_bearer_token(
    region: str | None = None,
    *,
    credentials: Credentials | ReadOnlyCredentials | None = None,
    expiry: timedelta = timedelta(hours=12),
) -> str:
    """A ``sagemaker-api-key-…`` bearer token valid for ``expiry``.

    :param region: the endpoint's region. Default: ``AWS_REGION`` (what AWS's generator
        reads), else botocore's configured region (``AWS_DEFAULT_REGION`` / profile; botocore
        itself does not read ``AWS_REGION``).
    :param credentials: credentials to sign with. Default: the standard botocore chain.
    :param expiry: the token's lifetime, 1 s to 12 h. Default: 12 hours (as AWS's generator).
    """
    seconds = int(expiry.total_seconds())
    problems = Problems("generate_bearer_token")
    if not 1 <= seconds <= MAX_TOKEN_SECONDS or seconds != expiry.total_seconds():
        allowed = f"token lifetime must be a whole number of seconds from 1 to {MAX_TOKEN_SECONDS}"
        problems.add("expiry", expiry.total_seconds(), allowed)
    problems.raise_if_any()
    session = get_session()
    region = region or os.environ.get("AWS_REGION") or session.get_config_variable("region")
    if not region:
        raise BearerTokenError("no region: pass one or set AWS_REGION")
    if credentials is None:
        found = session.get_credentials()
        if found is None:
            raise BearerTokenError("no AWS credentials found in the standard chain")
        credentials = found
    frozen = (
        credentials
        if isinstance(credentials, ReadOnlyCredentials)
        else credentials.get_frozen_credentials()
    )
    request = AWSRequest(
        method="POST",
        url=f"https://{TOKEN_HOST}/",
        headers={"host": TOKEN_HOST},
        params={"Action": TOKEN_ACTION},
    )
    SigV4QueryAuth(frozen, TOKEN_SERVICE, region, expires=seconds).add_auth(request)
    presigned = request.url.replace("https://", "") + TOKEN_VERSION_SUFFIX
    return TOKEN_PREFIX + base64.b64encode(presigned.encode("utf-8")).decode("utf-8")

"""AWS errors as one readable line and a distinct exit status; retries the SDK way."""

from __future__ import annotations

from dataclasses import dataclass

from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
)

from .exit_codes import (
    EXIT_ACCESS_DENIED,
    EXIT_AWS_OTHER,
    EXIT_INVALID,
    EXIT_NO_CREDENTIALS,
    EXIT_NO_REGION,
    EXIT_NOT_FOUND,
    EXIT_THROTTLED,
    EXIT_UNREACHABLE,
)

#: Standard-mode retries with backoff for throttling and transient errors.
RETRY_CONFIG = Config(retries={"mode": "standard", "max_attempts": 8})

_BY_CODE = {
    "ThrottlingException": EXIT_THROTTLED,
    "Throttling": EXIT_THROTTLED,
    "TooManyRequestsException": EXIT_THROTTLED,
    "AccessDeniedException": EXIT_ACCESS_DENIED,
    "AccessDenied": EXIT_ACCESS_DENIED,
    "UnauthorizedOperation": EXIT_ACCESS_DENIED,
    "ResourceNotFound": EXIT_NOT_FOUND,
    "ResourceNotFoundException": EXIT_NOT_FOUND,
    "ValidationException": EXIT_INVALID,
}


@dataclass(frozen=True)
class AwsFailure:
    exit_code: int
    message: str


def describe_failure(error: Exception, doing: str) -> AwsFailure:
    """``doing`` says what was attempted, e.g. ``describe endpoint 'x'``."""
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "Unknown")
        text = error.response.get("Error", {}).get("Message", "")
        exit_code = _BY_CODE.get(code, EXIT_AWS_OTHER)
        # SageMaker reports a missing endpoint as a ValidationException "Could not find ...".
        if code == "ValidationException" and ("Could not find" in text or "does not exist" in text):
            exit_code = EXIT_NOT_FOUND
        return AwsFailure(exit_code, f"cannot {doing}: {code}: {text}".rstrip(": "))
    if isinstance(error, NoCredentialsError):
        return AwsFailure(EXIT_NO_CREDENTIALS, f"cannot {doing}: {error}")
    if isinstance(error, NoRegionError):
        return AwsFailure(
            EXIT_NO_REGION, f"cannot {doing}: {error} (give --region or set AWS_REGION)"
        )
    if isinstance(error, (EndpointConnectionError, ConnectTimeoutError)):
        return AwsFailure(EXIT_UNREACHABLE, f"cannot {doing}: {error}")
    if isinstance(error, BotoCoreError):
        return AwsFailure(EXIT_AWS_OTHER, f"cannot {doing}: {error}")
    raise error

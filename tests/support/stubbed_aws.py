"""A real boto3 client under botocore's Stubber: requests and responses are checked against
the service's model, and every queued response must be used."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from botocore.stub import Stubber

#: Throwaway credentials: the Stubber answers before anything is signed or sent.
CREDENTIALS = {"aws_access_key_id": "AKIAEXAMPLEEXAMPLE00", "aws_secret_access_key": "example"}


@contextmanager
def stubbed_client(service: str, region: str) -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client(service, region_name=region, **CREDENTIALS)
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()

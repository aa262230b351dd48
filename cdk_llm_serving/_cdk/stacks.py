"""``Stack.of(scope)`` and the stack's region, as the constructs ask for them.

Thin names over aws-cdk-lib's own answers (each a round trip to the jsii kernel); nothing is
kept here: a construct that needs its stack more than once keeps it in a field of its own.
"""

from __future__ import annotations

from aws_cdk import Stack
from constructs import IConstruct


def stack_of(scope: IConstruct) -> Stack:
    """``Stack.of(scope)``."""
    return Stack.of(scope)


def region_of_stack(scope: IConstruct) -> str:
    """``Stack.of(scope).region``: a literal when the stack has one, else a token."""
    return Stack.of(scope).region

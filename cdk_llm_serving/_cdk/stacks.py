"""``Stack.of(scope)`` and the stack's region, as the constructs ask for them.

Thin names over aws-cdk-lib's own answers (each a round trip to the jsii kernel, but for a
scope that is a stack already: ``Stack.of(stack)`` is ``stack``); nothing is kept here. A
construct that needs its stack more than once keeps it in a field of its own.
"""

from __future__ import annotations

from aws_cdk import Stack
from constructs import IConstruct


def stack_of(scope: IConstruct) -> Stack:
    """``Stack.of(scope)``."""
    # By the class hierarchy (as ``template_limits._is_a``): jsii registers no virtual
    # subclasses, and ``isinstance`` against its ABCs walks every loaded subclass.
    if Stack in type(scope).__mro__:
        return scope  # type: ignore[return-value]
    return Stack.of(scope)


def region_of_stack(scope: IConstruct) -> str:
    """``Stack.of(scope).region``: a literal when the stack has one, else a token."""
    return stack_of(scope).region

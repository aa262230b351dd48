"""``Stack.of(scope)`` and the stack's region, as the constructs ask for them."""

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

"""``Stack.of(scope)`` and the stack's region, asked of the jsii kernel once per scope.

Each construct of a pool endpoint needs its stack (limits, ARNs, the region of its
dashboards) and each ``Stack.of`` and ``stack.region`` is a round trip to the kernel. A
construct's stack never changes, so the answer is kept per scope object, for as long as the
object lives. Callers pass the scope a construct was created in (the user's stack, usually),
which many constructs share, rather than the new construct itself.
"""

from __future__ import annotations

import weakref

from aws_cdk import Stack
from constructs import IConstruct

_STACKS: weakref.WeakKeyDictionary[IConstruct, Stack] = weakref.WeakKeyDictionary()
_REGIONS: weakref.WeakKeyDictionary[Stack, str] = weakref.WeakKeyDictionary()


def stack_of(scope: IConstruct) -> Stack:
    """``Stack.of(scope)``."""
    stack = _STACKS.get(scope)
    if stack is None:
        stack = _STACKS[scope] = Stack.of(scope)
    return stack


def region_of_stack(scope: IConstruct) -> str:
    """``Stack.of(scope).region``: a literal when the stack has one, else a token."""
    stack = stack_of(scope)
    region = _REGIONS.get(stack)
    if region is None:
        region = _REGIONS[stack] = stack.region
    return region

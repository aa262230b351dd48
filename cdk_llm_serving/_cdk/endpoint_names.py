"""The SageMaker endpoint names an app claims: unique per Region and account, compared
without case (botocore's ``CreateEndpoint.EndpointName``), so two that differ only in case
fail at synth, not in CloudFormation.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from aws_cdk import Stack, Token
from constructs import IConstruct

from ..errors import Problems

#: Per app: (account, Region, lower-case name) -> (the construct that claimed it, its name).
_CLAIMS: WeakKeyDictionary[object, dict[tuple[str, str, str], tuple[IConstruct, str]]] = (
    WeakKeyDictionary()
)
#: Per stack: its app's claims, account and Region (read once: each is a jsii call).
_STACKS: WeakKeyDictionary[
    Stack, tuple[dict[tuple[str, str, str], tuple[IConstruct, str]], str, str]
] = WeakKeyDictionary()
#: An environment-agnostic stack may be deployed anywhere: it shares one key with its kind.
_ANY = "*"


def claim_endpoint_name(
    scope: IConstruct, problems: Problems, prop: str, name: str, stack: Stack | None = None
) -> None:
    """Record ``name`` for ``scope`` (in ``stack``, default ``Stack.of(scope)``); a problem when
    another construct of the app in the same account and Region claimed it in any case."""
    if "${Token[" in name:  # a string-encoded token (CDK guide, "Tokens and token encodings")
        return
    stack = stack or Stack.of(scope)
    known = _STACKS.get(stack)
    if known is None:
        account, region = (
            _ANY if Token.is_unresolved(value) else value for value in (stack.account, stack.region)
        )
        known = _STACKS[stack] = (_CLAIMS.setdefault(stack.node.root, {}), account, region)
    claims, account, region = known
    key = (account, region, name.lower())
    claimed = claims.get(key)
    if claimed is None or claimed[0] is scope:
        claims[key] = (scope, name)
        return
    problems.add(
        prop,
        name,
        f"'{claimed[0].node.path}' already names its endpoint {claimed[1]!r}: SageMaker endpoint "
        "names are unique per account and Region and compared without case (CreateEndpoint); "
        "give one of them another name",
    )

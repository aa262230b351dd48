"""Fail synth, not deploy, when a stack outgrows CloudFormation's limits: 500 resources and a
1,000,000-byte template (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html;
aws-cdk-lib only warns about the size). Both checks name the heaviest constructs and the
remedies; one ``TemplateLimits`` construct per stack registers them
(docs/design/errors-and-checks.md, "CloudFormation's template limits").
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from typing import Any, TypeGuard, TypeVar

import jsii
from aws_cdk import (
    CfnResource,
    IPolicyValidationContext,
    IPolicyValidationPlugin,
    NestedStack,
    PolicyValidationPluginReport,
    PolicyViolatingResource,
    PolicyViolation,
    Stack,
    Validations,
)
from constructs import Construct, IConstruct, IValidation

from .stacks import stack_of

#: CloudFormation's quotas.
MAX_TEMPLATE_BYTES = 1_000_000
MAX_RESOURCES = 500
#: aws-cdk-lib's context key that moves its own resource-count check.
RESOURCE_LIMIT_CONTEXT = "@aws-cdk/core:stackResourceLimit"
REMEDY = (
    "split the constructs over several stacks (one endpoint or service per stack scales "
    "best), drop the per-endpoint dashboards, move groups of constructs into NestedStacks, "
    "or (for the byte limit) set the context key @aws-cdk/core:suppressTemplateIndentation "
    "to true, which writes templates without indentation"
)
_HEAVIEST_SHOWN = 5
_T = TypeVar("_T")

#: The id of the ``TemplateLimits`` construct under each checked stack.
SINGLETON_ID = "CdkLlmServingTemplateLimits"


def check_template_limits(scope: IConstruct) -> None:
    """Check the stack of ``scope`` against CloudFormation's limits at synth (once per stack)."""
    stack = stack_of(scope)
    if stack.node.try_find_child(SINGLETON_ID) is None:
        TemplateLimits(stack)


class TemplateLimits(Construct):
    """The template-limit checks of one stack (``check_template_limits`` adds it once)."""

    def __init__(self, stack: Stack) -> None:
        super().__init__(stack, SINGLETON_ID)
        stack.node.add_validation(ResourceCountCheck(stack))
        self.size_check = TemplateSizeCheck(stack.artifact_id)
        Validations.of(stack.node.root).add_plugins(self.size_check)


def _heaviest(weights: Counter[str]) -> str:
    return ", ".join(
        f"{name} ({weight:,})" for name, weight in weights.most_common(_HEAVIEST_SHOWN)
    )


def _top_construct(path: str, stack_path: str) -> str:
    """The construct directly under the stack that ``path`` belongs to."""
    relative = path[len(stack_path) + 1 :] if path.startswith(stack_path + "/") else path
    return relative.split("/", 1)[0]


@jsii.implements(IValidation)
class ResourceCountCheck:
    """Count the stack's CloudFormation resources before aws-cdk-lib renders the template."""

    def __init__(self, stack: Stack) -> None:
        self._stack = stack

    def validate(self) -> list[str]:
        resources = _own_resources(self._stack.node.find_all())
        limit = int(self._stack.node.try_get_context(RESOURCE_LIMIT_CONTEXT) or MAX_RESOURCES)
        if len(resources) <= limit:
            return []
        stack_path = self._stack.node.path
        weights = Counter(_top_construct(r.node.path, stack_path) for r in resources)
        return [
            f"{len(resources)} CloudFormation resources, over the limit of {limit} a stack may "
            f"hold; the most: {_heaviest(weights)} resources. Remedy: {REMEDY}."
        ]


def _own_resources(constructs: Iterable[IConstruct]) -> list[CfnResource]:
    """The CfnResources of a stack, without those inside its nested stacks."""
    found = list(constructs)
    nested: set[int] = set()
    for construct in found:
        if _is_a(construct, NestedStack):
            nested.update(id(c) for c in construct.node.find_all()[1:])
    return [c for c in found if _is_a(c, CfnResource) and id(c) not in nested]


def _is_a(construct: IConstruct, cls: type[_T]) -> TypeGuard[_T]:
    """``isinstance`` by the class hierarchy alone: against jsii's ABCs a negative
    ``isinstance`` walks every loaded subclass (0.4 s of CPU over the reference app), and jsii
    registers no virtual subclasses (docs/design/errors-and-checks.md)."""
    return cls in type(construct).__mro__


@jsii.implements(IPolicyValidationPlugin)
class TemplateSizeCheck:
    """A policy-validation plugin: one stack's template file as written, against the byte limit."""

    def __init__(self, artifact_id: str) -> None:
        self._artifact_id = artifact_id

    @property
    def name(self) -> str:
        return "cdk-llm-serving template limits"

    @property
    def version(self) -> str | None:
        return None

    @property
    def rule_ids(self) -> list[str] | None:
        return ["TemplateSizeLimit"]

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        violations = [
            violation
            for path in context.template_paths
            if os.path.basename(path).removesuffix(".template.json") == self._artifact_id
            for violation in _size_violation(path)
        ]
        return PolicyValidationPluginReport(success=not violations, violations=violations)


def _size_violation(template_path: str) -> list[PolicyViolation]:
    size = os.path.getsize(template_path)
    if size <= MAX_TEMPLATE_BYTES:
        return []
    with open(template_path, encoding="utf-8") as handle:
        resources: dict[str, dict[str, Any]] = json.load(handle).get("Resources", {})
    weights: Counter[str] = Counter()
    first_resource: dict[str, str] = {}
    for logical_id, body in resources.items():
        # Without path metadata (``--no-path-metadata``) the logical ID is all there is.
        path = body.get("Metadata", {}).get("aws:cdk:path", logical_id)
        construct = _top_construct(path, path.split("/", 1)[0])
        weights[construct] += len(json.dumps(body, indent=1))
        first_resource.setdefault(construct, logical_id)
    heaviest = weights.most_common(1)[0][0]
    return [
        PolicyViolation(
            rule_name="TemplateSizeLimit",
            description=(
                f"The template is {size:,} bytes, over CloudFormation's limit of "
                f"{MAX_TEMPLATE_BYTES:,}; the heaviest constructs: {_heaviest(weights)} bytes."
            ),
            fix=f"Remedy: {REMEDY}.",
            violating_resources=[
                PolicyViolatingResource(
                    resource_logical_id=first_resource[heaviest],
                    template_path=template_path,
                    locations=["Resources"],
                )
            ],
        )
    ]

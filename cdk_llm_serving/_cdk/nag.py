"""Acknowledging cdk-nag findings that a construct's design makes unavoidable, with reasons
(docs/design/least-privilege.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import (
    Acknowledgment,
    Aspects,
    IAspect,
    IPolicyValidationContext,
    IPolicyValidationPlugin,
    PolicyValidationPluginReport,
    PolicyViolatingResource,
    PolicyViolation,
    Stack,
    Validations,
)
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import IConstruct

from .validation import is_unresolved


def _finding_text(value: Any) -> str:
    """A resolved CloudFormation value as cdk-nag names it in a finding id: ``<Name>`` for a
    reference or attribute, joins flattened, other intrinsics as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_finding_text(part) for part in parts)
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        return re.sub(r"\$\{([^}]+)\}", r"<\1>", value["Fn::Sub"])
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        resource, attribute = value["Fn::GetAtt"]
        return f"<{resource}.{attribute}>"
    return json.dumps(value, separators=(",", ":"))


#: The validation plugin's name; its acknowledgement ids are ``CdkLlmServing::<rule>``.
STATEMENT_PLUGIN = "CdkLlmServing"
#: Its rule: one finding per (action, resource) pair of an Allow statement with a wildcard.
WILDCARD_STATEMENT_RULE = "IAMWildcardStatement"


def _is_wildcard(text: str) -> bool:
    return "*" in text


def statement_finding(action: str, resource: str) -> str:
    """The id of ``WildcardStatements``' finding for one action on one (rendered) resource."""
    return f"{WILDCARD_STATEMENT_RULE}[Action::{action}][Resource::{resource}]"


def wildcard_pairs(actions: Sequence[str], resources: Sequence[str]) -> list[tuple[str, str]]:
    """The (action, resource) pairs of one statement that carry a wildcard in either part."""
    return [
        (action, resource)
        for action in actions
        for resource in resources
        if _is_wildcard(action) or _is_wildcard(resource)
    ]


@dataclass(frozen=True)
class BoundWildcard:
    """A statement a construct reasons about: its actions, its (wildcard) resources, why.
    Acknowledged as cdk-nag's ``AwsSolutions-IAM5`` ids and as one ``WildcardStatements``
    finding per (action, resource) pair, so another action on the same ``*`` fails synth."""

    actions: tuple[str, ...]
    resources: tuple[str, ...]
    reason: str


def acknowledge_statements(
    scope: IConstruct, bound: Iterable[BoundWildcard], *, stack: Stack | None = None
) -> None:
    """Acknowledge exactly the wildcard pairs of ``bound`` on ``scope`` (a policy), nothing
    else; one ``resolve`` and one acknowledgment call for all of them."""
    bound = list(bound)
    resources = list(dict.fromkeys(r for b in bound for r in b.resources))
    resolved = dict(zip(resources, (stack or Stack.of(scope)).resolve(resources), strict=True))
    reasons: dict[str, list[str]] = {}
    for entry in bound:
        rendered = [_finding_text(resolved.get(r, r)) for r in entry.resources]
        rules = [f"AwsSolutions-IAM5[Resource::{r}]" for r in rendered if _is_wildcard(r)]
        rules += [f"AwsSolutions-IAM5[Action::{a}]" for a in entry.actions if _is_wildcard(a)]
        rules += [
            f"{STATEMENT_PLUGIN}::{statement_finding(action, resource)}"
            for action, resource in wildcard_pairs(entry.actions, rendered)
        ]
        for rule in rules:
            reasons.setdefault(rule, []).append(entry.reason)
    if reasons:
        Validations.of(scope).acknowledge(
            *(
                Acknowledgment(id=rule, reason=" ".join(dict.fromkeys(why)))
                for rule, why in reasons.items()
            )
        )


def acknowledge_wildcard_resources(
    scope: IConstruct,
    resources: list[str],
    reason: str,
    *,
    actions: Sequence[str] | None = None,
) -> None:
    """Acknowledge ``actions`` on exactly these wildcard resources, nothing broader. Without
    ``actions``, the actions the policies under ``scope`` grant on these resources *now*: call
    it when the construct is done with them."""
    if actions is not None:
        acknowledge_statements(scope, [BoundWildcard(tuple(actions), tuple(resources), reason)])
        return
    _acknowledge_held(scope, reason, {_finding_text(r) for r in Stack.of(scope).resolve(resources)})


def acknowledge_generated_statements(scope: IConstruct, reason: str) -> None:
    """Acknowledge the wildcard statements the policies under ``scope`` hold *now*: call it
    right after the aws-cdk-lib construct that writes them, so a statement added later is
    reported."""
    _acknowledge_held(scope, reason, None)


def _acknowledge_held(scope: IConstruct, reason: str, only: set[str] | None) -> None:
    """Every Allow statement of the policies under ``scope``, bound to its actions and its
    resources (those in ``only``, when given), as the policies hold them now."""
    for node in scope.node.find_all():
        for document in _policy_documents(node):
            bound = []
            for statement in document.get("Statement", []):
                rendered = (_finding_text(r) for r in _as_list(statement.get("Resource")))
                held = tuple(r for r in rendered if only is None or r in only)
                if statement.get("Effect") == "Allow" and (held or only is None):
                    actions = tuple(_as_list(statement.get("Action")))
                    bound.append(BoundWildcard(actions, held, reason))
            if bound:
                acknowledge_statements(node, bound)


def _policy_documents(node: IConstruct) -> list[dict[str, Any]]:
    """The resolved policy documents of an IAM policy or role resource (none for others)."""
    if isinstance(node, (iam.CfnPolicy, iam.CfnManagedPolicy)):
        return [Stack.of(node).resolve(node.policy_document) or {}]
    if isinstance(node, iam.CfnRole):
        policies = Stack.of(node).resolve(node.policies) or []
        return [p.get("PolicyDocument", {}) for p in policies]
    return []


#: ``HIPAA.Security`` rules the NIST 800-53 R5 and PCI DSS 3.2.1 packs apply as the same rule
#: function (cdk-nag 3.0.2 ``lib/packs/nist-800-53-r5.js``, ``pci-dss-321.js``).
_SHARED_RULES = frozenset(
    {
        "CloudWatchLogGroupEncrypted",
        "EC2RestrictedCommonPorts",
        "IAMNoInlinePolicy",
        "LambdaInsideVPC",
        "S3BucketReplicationEnabled",
        "S3DefaultEncryptionKMS",
        "SageMakerEndpointConfigurationKMSKeyConfigured",
        "SecretsManagerUsingKMSKey",
        "VPCNoUnrestrictedRouteToIGW",
    }
)
COMPLIANCE_PACK_RULES: dict[str, frozenset[str]] = {
    "NIST.800.53.R5": _SHARED_RULES
    | {"LambdaConcurrency", "LambdaDLQ", "SecretsManagerRotationEnabled"},
    "PCI.DSS.321": _SHARED_RULES,
}


def compliance_rule_ids(rule: str) -> list[str]:
    """``rule`` and, for a ``HIPAA.Security-<X>`` id, the same rule in the other compliance
    packs that apply it (``COMPLIANCE_PACK_RULES``): one reason, every pack's finding."""
    prefix = "HIPAA.Security-"
    if not rule.startswith(prefix):
        return [rule]
    name = rule.removeprefix(prefix)
    return [
        rule,
        *(f"{pack}-{name}" for pack, rules in COMPLIANCE_PACK_RULES.items() if name in rules),
    ]


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge ``rule`` on ``scope`` with ``reason`` (with its compliance-pack twins)."""
    Validations.of(scope).acknowledge(
        *(Acknowledgment(id=i, reason=reason) for i in compliance_rule_ids(rule))
    )


#: HIPAA.Security rules on a Lambda function's own settings (concurrency, DLQ, VPC).
_HIPAA_LAMBDA_RULES = ("LambdaConcurrency", "LambdaDLQ", "LambdaInsideVPC")


@jsii.implements(IAspect)
class AcknowledgeCdkInternals:
    """An aspect that acknowledges, with ``reason``, the findings on what aws-cdk-lib itself
    generates under a subtree (a kubectl provider, a bucket-deployment handler): managed
    policies (IAM4), the Lambda runtime (L1), and HIPAA.Security's inline policy, Lambda
    settings and log group key, which aws-cdk-lib decides, not us."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def visit(self, node: IConstruct) -> None:
        # Stack.of is a jsii round trip: asked only of the two kinds of node that resolve.
        ids: list[str] = []
        if isinstance(node, iam.CfnRole):
            for arn in Stack.of(node).resolve(node.managed_policy_arns) or []:
                ids.append(f"AwsSolutions-IAM4[Policy::{_finding_text(arn)}]")
        elif isinstance(node, iam.CfnPolicy):
            # Its wildcard statements are acknowledged one by one, bound to their actions,
            # when the construct that wrote them is done (``acknowledge_generated_statements``).
            ids.append("HIPAA.Security-IAMNoInlinePolicy")
        elif isinstance(node, lambda_.CfnFunction):
            # Only the findings it raises: a stale acknowledgement would cover a later one.
            if _outdated_runtime(node.runtime):
                ids.append("AwsSolutions-L1")
            ids.extend(f"HIPAA.Security-{rule}" for rule in _HIPAA_LAMBDA_RULES)
            if node.vpc_config is not None:
                ids.remove("HIPAA.Security-LambdaInsideVPC")
        elif isinstance(node, logs.CfnLogGroup):
            ids.append("HIPAA.Security-CloudWatchLogGroupEncrypted")
        ids = [twin for i in ids for twin in compliance_rule_ids(i)]
        if ids:
            Validations.of(node).acknowledge(
                *(Acknowledgment(id=i, reason=self.reason) for i in dict.fromkeys(ids))
            )


_RUNTIME = re.compile(r"^([a-z]+)(\d+(\.?\d+|\.x)?)?.*$")


def _runtime_version(name: str) -> tuple[str, tuple[int, ...]]:
    match = _RUNTIME.match(name)
    if match is None:
        return name, ()
    version = (match.group(2) or "0").replace(".x", "")
    return match.group(1), tuple(int(part) for part in re.findall(r"\d+", version))


def _outdated_runtime(runtime: str | None) -> bool:
    """As cdk-nag's ``AwsSolutions-L1`` (rules/lambda/LambdaLatestVersion): older than the
    newest of its family in ``Runtime.ALL``; ``provided`` runtimes and images are not checked."""
    if not runtime or is_unresolved(runtime):
        return False
    family, version = _runtime_version(runtime)
    if family == "provided":
        return False
    known = [_runtime_version(r.name) for r in lambda_.Runtime.ALL]
    newest = max((v for f, v in known if f == family), default=version)
    return version < newest


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def acknowledge_cdk_internals(scope: IConstruct, reason: str) -> None:
    """``AcknowledgeCdkInternals`` on ``scope``, and its policies' wildcard statements as
    they stand now (``acknowledge_generated_statements``): call it right after the
    aws-cdk-lib construct that generates them."""
    acknowledge_generated_statements(scope, reason)
    Aspects.of(scope).add(AcknowledgeCdkInternals(reason))


def _template_documents(resource: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    properties = resource.get("Properties", {})
    if resource.get("Type") in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        return [properties.get("PolicyDocument", {})]
    if resource.get("Type") in ("AWS::IAM::Role", "AWS::IAM::User", "AWS::IAM::Group"):
        return [p.get("PolicyDocument", {}) for p in properties.get("Policies", [])]
    return []


def wildcard_findings(template: Mapping[str, Any]) -> dict[str, list[str]]:
    """``statement_finding`` ids of ``template``'s IAM policies, by logical id: each pair of an
    ``Allow`` statement's action and resource that holds ``*`` (``NotAction``/``NotResource``
    count as ``*``), resources rendered as cdk-nag renders them."""
    found: dict[str, list[str]] = {}
    for logical_id, resource in template.get("Resources", {}).items():
        for document in _template_documents(resource):
            for statement in _as_list(document.get("Statement")):
                if statement.get("Effect") != "Allow":
                    continue
                actions = [str(a) for a in _as_list(statement.get("Action"))]
                if "NotAction" in statement:
                    actions.append("*")
                resources = [_finding_text(r) for r in _as_list(statement.get("Resource"))]
                if "NotResource" in statement:
                    resources.append("*")
                for action, target in wildcard_pairs(actions, resources):
                    found.setdefault(logical_id, []).append(statement_finding(action, target))
    return {key: list(dict.fromkeys(ids)) for key, ids in found.items()}


@jsii.implements(IPolicyValidationPlugin)
class WildcardStatements:
    """A validation plugin: every wildcard statement in a synthesized IAM policy is a finding
    (``IAMWildcardStatement[Action::<a>][Resource::<r>]``) until acknowledged for its own
    action and resource; cdk-nag's IAM5 names a finding by resource alone, so one reasoned
    ``*`` would hide any later one. Use it as a cdk-nag pack:
    ``Validations.of(app).add_plugins(WildcardStatements(app))``."""

    def __init__(self, scope: IConstruct | None = None) -> None:
        del scope  # taken, as cdk-nag's packs take it; the templates are what it reads

    @property
    def name(self) -> str:
        return STATEMENT_PLUGIN

    @property
    def version(self) -> str | None:
        return None

    @property
    def rule_ids(self) -> list[str] | None:
        return [WILDCARD_STATEMENT_RULE]

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        resources: dict[str, list[PolicyViolatingResource]] = {}
        for path in context.template_paths:
            template = json.loads(Path(path).read_text())
            for logical_id, ids in wildcard_findings(template).items():
                for rule in ids:
                    resources.setdefault(rule, []).append(
                        PolicyViolatingResource(
                            resource_logical_id=logical_id,
                            template_path=path,
                            locations=["Properties"],
                        )
                    )
        violations = [
            PolicyViolation(
                rule_name=rule,
                description=(
                    "a wildcard statement that no acknowledgement bound to its action and "
                    "resource reasons about: narrow it, or acknowledge "
                    f"'{STATEMENT_PLUGIN}::{rule}' on its policy with the reason"
                ),
                severity="error",
                violating_resources=found,
            )
            for rule, found in resources.items()
        ]
        return PolicyValidationPluginReport(success=not violations, violations=violations)

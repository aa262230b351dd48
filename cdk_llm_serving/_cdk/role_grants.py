"""Least-privilege statements for SageMaker execution roles, with cdk-nag reasons recorded
(docs/design/least-privilege.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from aws_cdk import ArnFormat, Aws, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from .._partitions import partition_of_region
from ..errors import ConfigurationError, Problem
from ..model_sources import ContainerImage, ModelData
from .nag import BoundWildcard, acknowledge_statements, acknowledge_wildcard_resources

#: ``Aws.PARTITION`` and ``Aws.ACCOUNT_ID``: the same tokens every time, read from the kernel once.
_PARTITION = Aws.PARTITION
_ACCOUNT_ID = Aws.ACCOUNT_ID


def resource_account_condition(account: str) -> dict[str, dict[str, str]]:
    """Only resources owned by ``account``: a squatted bucket or foreign key in another fails
    (docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-resourceaccount)."""
    return {"StringEquals": {"aws:ResourceAccount": account}}


@dataclass(frozen=True)
class Statement:
    """One IAM statement as plain values: the one shape of an artifact grant, added to a
    role's own policy (``ExecutionRoleGrants``) or granted to any grantee (``grant_to``)."""

    actions: tuple[str, ...]
    resources: tuple[str, ...]
    conditions: Mapping[str, Any] | None = None

    def policy_statement(self) -> iam.PolicyStatement:
        return iam.PolicyStatement(
            actions=list(self.actions),
            resources=list(self.resources),
            conditions=dict(self.conditions) if self.conditions else None,
        )

    def grant_to(self, grantee: iam.IGrantable) -> iam.Grant:
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(self.actions),
            resource_arns=list(self.resources),
            conditions=dict(self.conditions) if self.conditions else None,
        )


def image_pull_statements(image: ContainerImage) -> list[Statement]:
    """Pull ``image`` from its ECR repository (and the registry token, which has no resource)."""
    token = Statement(("ecr:GetAuthorizationToken",), ("*",))
    repository_arn = image.resolve_repository_arn(_PARTITION)
    if repository_arn is None:
        return [token]
    actions = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
    return [Statement(actions, (repository_arn,)), token]


def model_data_read_statements(model_data: ModelData) -> list[Statement]:
    """Read the objects under ``model_data``'s prefix (first), list that prefix, decrypt with
    its key; each conditioned on the bucket's (and key's) account."""
    bucket_arn = f"arn:{_PARTITION}:s3:::{model_data.bucket_name}"
    owner = resource_account_condition(model_data.bucket_account or _ACCOUNT_ID)
    prefixes = [model_data.key_prefix, f"{model_data.key_prefix}*"]
    statements = [
        Statement(("s3:GetObject",), (f"{bucket_arn}/{model_data.key_prefix}*",), owner),
        Statement(
            ("s3:ListBucket",), (bucket_arn,), {"StringLike": {"s3:prefix": prefixes}, **owner}
        ),
    ]
    key = model_data.encryption_key
    if key is not None:
        statements.append(
            Statement(("kms:Decrypt",), (key.key_arn,), resource_account_condition(key.env.account))
        )
    return statements


def sagemaker_inference_principal(region: str) -> iam.IPrincipal:
    """``sagemaker.amazonaws.com``, for a role SageMaker inference assumes, only on behalf of
    this account's SageMaker resources in ``region``: AWS's condition for inference, which must
    not name one model or endpoint
    (https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html)."""
    # A token region is encoded as ``${Token[...]}`` (no partition of its own): no jsii call.
    partition = (None if "${Token[" in region else partition_of_region(region)) or _PARTITION
    source = f"arn:{partition}:sagemaker:{region}:{_ACCOUNT_ID}:*"
    return iam.ServicePrincipal(
        "sagemaker.amazonaws.com", conditions={"ArnLike": {"aws:SourceArn": source}}
    )


#: What SageMaker does in the log groups it writes for a model's containers.
_LOG_ACTIONS = (
    "logs:CreateLogGroup",
    "logs:CreateLogStream",
    "logs:DescribeLogStreams",
    "logs:PutLogEvents",
)
#: What SageMaker does for a model's network interfaces in the given subnets.
_VPC_INTERFACE_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcs",
)


def endpoint_log_group(endpoint_name: str) -> str:
    """The log group SageMaker writes an endpoint's containers to
    (https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html)."""
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def inference_component_log_group(component_name: str) -> str:
    """The log group of an inference component's containers. ASSUMED from AWS samples and
    observed accounts; AWS's logging table lists no such group (docs/design/least-privilege.md)."""
    return f"/aws/sagemaker/InferenceComponents/{component_name}"


class ExecutionRoleGrants:
    """Adds statements to a managed policy of their own (``policy``), attached to ``role``, and
    records why each wildcard is needed: ``acknowledge()`` covers that policy only, so a
    wildcard added to the role anywhere else is still reported."""

    def __init__(
        self,
        scope: Construct,
        role: iam.IRole,
        policy_id: str = "ExecutionRolePolicy",
        *,
        stack: Stack | None = None,
    ) -> None:
        """``stack``: the stack of ``scope``, when the caller holds it already (else asked)."""
        self.scope = scope
        self.stack = stack
        self.role = role
        self.policy_id = policy_id
        self.policy: iam.ManagedPolicy | None = None
        self._bound: list[BoundWildcard] = []
        self._log_groups: set[str] = set()

    def add(self, *statements: iam.PolicyStatement) -> None:
        """Add ``statements`` to the grants' own policy (created, attached to the role, on first
        use), in one call: each is a round trip to the jsii kernel."""
        if self.policy is None:
            # The first statements in the policy's own props: no second call to add them.
            self.policy = iam.ManagedPolicy(
                self.scope,
                self.policy_id,
                roles=[self.role],
                description="cdk-llm-serving: the role's least-privilege grants",
                statements=list(statements),
            )
            return
        self.policy.add_statements(*statements)

    def image_pull(self, image: ContainerImage) -> None:
        self._add_reasoned(
            image_pull_statements(image),
            "ecr:GetAuthorizationToken has no resource-level permissions.",
        )

    def model_data_read(self, model_data: ModelData) -> None:
        self._add_reasoned(
            model_data_read_statements(model_data),
            "Read-only access to the objects under the model's own weight prefix; their names are the checkpoint's files.",
            reasoned=0,
        )

    def metrics(self) -> None:
        """``cloudwatch:PutMetricData`` in SageMaker's namespaces only (the action has no resource)."""
        namespaces = {
            "StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker*"]}
        }
        self._add_reasoned(
            [Statement(("cloudwatch:PutMetricData",), ("*",), namespaces)],
            "cloudwatch:PutMetricData has no resource-level permissions; a namespace condition limits it to SageMaker's.",
        )

    def write_logs(self, *log_groups: str) -> None:
        """Create and write ``log_groups`` (names, see ``endpoint_log_group``; a token is joined
        at deploy time) and their streams, nothing else under ``/aws/sagemaker/``; each once."""
        stack = self.stack or Stack.of(self.scope)
        fresh = [group for group in dict.fromkeys(log_groups) if group not in self._log_groups]
        if not fresh:
            return
        self._log_groups.update(fresh)
        arns = [
            stack.format_arn(
                service="logs",
                resource="log-group",
                resource_name=group,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            for group in fresh
        ]
        resources = tuple(resource for arn in arns for resource in (arn, f"{arn}:log-stream:*"))
        self._add_reasoned(
            [Statement(_LOG_ACTIONS, resources)],
            "SageMaker names the log streams of the endpoint's own log group at run time "
            "(<variant>/<instance-id>); the group is this endpoint's (or inference component's).",
        )

    def vpc_interfaces(self) -> None:
        self._add_reasoned(
            [Statement(_VPC_INTERFACE_ACTIONS, ("*",))],
            "SageMaker creates the container's network interfaces in the given subnets; these EC2 actions take no resource ARN known at synth time.",
        )

    def acknowledge(self) -> None:
        """Acknowledge the recorded wildcard statements (their actions on their resources) on
        the grants' own policy, nothing else: another action on the same ``*`` is reported."""
        if self.policy is None:
            return
        acknowledge_statements(self.policy, self._bound, stack=self.stack)
        self._bound.clear()

    def _add_reasoned(
        self, statements: Sequence[Statement], reason: str, reasoned: int = -1
    ) -> None:
        """Add ``statements``; ``statements[reasoned]`` holds wildcards, for ``reason``."""
        wildcard = statements[reasoned]
        self._bound.append(BoundWildcard(wildcard.actions, wildcard.resources, reason))
        self.add(*(statement.policy_statement() for statement in statements))


#: Id of the customer managed policy, under the grantee's role, that holds the bearer-token grant.
BEARER_TOKEN_POLICY_ID = "SageMakerCallWithBearerToken"
#: Why the bearer-token statement's ``*`` is unavoidable and bounded.
BEARER_TOKEN_REASON = (
    "sagemaker:CallWithBearerToken has no resource type (Service Authorization Reference); "
    "aws:ResourceAccount limits it to the caller's own account, as AWS's managed policy "
    "AmazonSageMakerJobRuntimeAccess does."
)


#: On ``*``, for the caller's own account only (as AmazonSageMakerJobRuntimeAccess writes it).
_BEARER_TOKEN = Statement(
    ("sagemaker:CallWithBearerToken",),
    ("*",),
    {"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}},
)


def bearer_token_statement() -> iam.PolicyStatement:
    """``CallWithBearerToken`` on ``*``, only for resources of the caller's own account, as
    AWS's managed policy ``AmazonSageMakerJobRuntimeAccess`` conditions it."""
    return _BEARER_TOKEN.policy_statement()


def _role_of(grantee: iam.IGrantable) -> iam.IRole | None:
    principal = grantee.grant_principal
    if isinstance(principal, Construct) and hasattr(principal, "role_name"):
        return principal  # type: ignore[return-value]
    return None


def grant_bearer_token(grantee: iam.IGrantable) -> iam.Grant | None:
    """Give ``grantee`` the bearer-token statement: a role in one managed policy of its own
    (``BEARER_TOKEN_POLICY_ID``, shared by every endpoint, so ``acknowledge_bearer_token`` covers
    exactly that ``*``); another principal in its default policy (the returned ``Grant``)."""
    role = _role_of(grantee)
    if role is None:
        return _BEARER_TOKEN.grant_to(grantee)
    if role.node.try_find_child(BEARER_TOKEN_POLICY_ID) is None:
        iam.ManagedPolicy(
            cast(Construct, role),
            BEARER_TOKEN_POLICY_ID,
            roles=[role],
            statements=[bearer_token_statement()],
            description="cdk-llm-serving: SageMaker's OpenAI-compatible path (bearer token)",
        )
    return None


def acknowledge_bearer_token(grantee: iam.IGrantable, reason: str = BEARER_TOKEN_REASON) -> None:
    """Acknowledge cdk-nag's IAM5 ``Resource::*`` on the grantee's bearer-token policy only."""
    role = _role_of(grantee)
    policy = role.node.try_find_child(BEARER_TOKEN_POLICY_ID) if role is not None else None
    if policy is None:
        raise ConfigurationError(
            "acknowledge_bearer_token",
            [
                Problem(
                    "grantee",
                    str(grantee.grant_principal),
                    f"holds no {BEARER_TOKEN_POLICY_ID} policy: "
                    "only a role granted with grant_invoke has one to acknowledge",
                )
            ],
        )
    acknowledge_wildcard_resources(policy, ["*"], reason, actions=["sagemaker:CallWithBearerToken"])

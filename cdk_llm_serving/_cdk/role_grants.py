"""Least-privilege statements for SageMaker execution roles, with cdk-nag reasons recorded."""

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
    """Only resources owned by ``account``: a squatted bucket or foreign key in another fails.

    ``aws:ResourceAccount`` is a global condition key that S3 and KMS support
    (docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-resourceaccount).
    """
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
    repository_arn = image.resolve_repository_arn(_PARTITION)
    pull = (
        [
            Statement(
                (
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                ),
                (repository_arn,),
            )
        ]
        if repository_arn is not None
        else []
    )
    return [*pull, Statement(("ecr:GetAuthorizationToken",), ("*",))]


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
    """``sagemaker.amazonaws.com``, for a role SageMaker inference (a model, an endpoint)
    assumes, only on behalf of this account's SageMaker resources in ``region`` (the
    stack's: a literal, or the ``AWS::Region`` token).

    AWS's confused-deputy guidance for SageMaker real-time, serverless and asynchronous
    inference gives exactly this trust condition, ``ArnLike aws:SourceArn
    arn:<partition>:sagemaker:<region>:<account>:*``, and says the ARN must not be narrowed
    to one model or endpoint ("Cross-service confused deputy prevention", section
    "SageMaker AI Inference",
    https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html).
    The account is in the ARN, so no ``aws:SourceAccount`` (the same page).
    One jsii call: the partition of a literal region from botocore's partitions
    (``partition_of_region``), the tokens read once (``_PARTITION``, ``_ACCOUNT_ID``).
    """
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


def endpoint_log_group(endpoint_name: str) -> str:
    """The log group SageMaker writes an endpoint's containers to:
    ``/aws/sagemaker/Endpoints/[EndpointName]``, streams ``[production-variant-name]/
    [instance-id]`` (and ``.../data-log`` for asynchronous endpoints); AWS's table "Log
    groups and streams that Amazon SageMaker AI sends to Amazon CloudWatch Logs"
    (https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html)."""
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def inference_component_log_group(component_name: str) -> str:
    """The log group of an inference component's containers,
    ``/aws/sagemaker/InferenceComponents/<inference-component-name>``. ASSUMED from
    observed accounts, not from AWS's logging table (which predates inference components
    and lists no such group): public AWS samples read component logs there
    (``logGroupName=f"/aws/sagemaker/InferenceComponents/{ic_name}"``) and exported account
    configurations hold such groups; the namespace of the components' own metrics has the
    same name (``/aws/sagemaker/InferenceComponents``)."""
    return f"/aws/sagemaker/InferenceComponents/{component_name}"


class ExecutionRoleGrants:
    """Adds statements to a policy of their own, attached to ``role``, and records why each wildcard is needed.

    The statements live in one customer managed policy (``policy``, id ``policy_id`` under
    ``scope``), not in the role's default policy: ``acknowledge()`` acknowledges cdk-nag's
    IAM5 finding for exactly those wildcard resources on that policy only, so a wildcard
    added to the role anywhere else is still reported.
    """

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
        self.add(*(statement.policy_statement() for statement in image_pull_statements(image)))
        self._wildcard(
            ("ecr:GetAuthorizationToken",),
            ("*",),
            "ecr:GetAuthorizationToken has no resource-level permissions.",
        )

    def model_data_read(self, model_data: ModelData) -> None:
        statements = model_data_read_statements(model_data)
        self._wildcard(
            statements[0].actions,
            statements[0].resources[:1],
            "Read-only access to the objects under the model's own weight prefix; their names are the checkpoint's files.",
        )
        self.add(*(statement.policy_statement() for statement in statements))

    def metrics(self) -> None:
        """``cloudwatch:PutMetricData`` in SageMaker's namespaces only (the action has no resource)."""
        self.add(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={
                    "StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker*"]}
                },
            ),
        )
        self._wildcard(
            ("cloudwatch:PutMetricData",),
            ("*",),
            "cloudwatch:PutMetricData has no resource-level permissions; a namespace condition limits it to SageMaker's.",
        )

    def write_logs(self, *log_groups: str) -> None:
        """Create and write ``log_groups`` (names, see ``endpoint_log_group``) and their
        streams, nothing else under ``/aws/sagemaker/`` (issue 32: it was every SageMaker log
        group of the account). A name may hold tokens (a deploy-time endpoint name): the ARN
        is joined at deploy time. Each group once per policy."""
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
        self.add(iam.PolicyStatement(actions=list(_LOG_ACTIONS), resources=list(resources)))
        self._wildcard(
            _LOG_ACTIONS,
            resources,
            "SageMaker names the log streams of the endpoint's own log group at run time "
            "(<variant>/<instance-id>); the group is this endpoint's (or inference component's).",
        )

    def vpc_interfaces(self) -> None:
        actions = (
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
        self.add(iam.PolicyStatement(actions=list(actions), resources=["*"]))
        self._wildcard(
            actions,
            ("*",),
            "SageMaker creates the container's network interfaces in the given subnets; these EC2 actions take no resource ARN known at synth time.",
        )

    def acknowledge(self) -> None:
        """Acknowledge the recorded wildcard statements (their actions on their resources) on
        the grants' own policy, nothing else: another action on the same ``*`` is reported."""
        if self.policy is None:
            return
        acknowledge_statements(self.policy, self._bound, stack=self.stack)
        self._bound.clear()

    def _wildcard(self, actions: Sequence[str], resources: Sequence[str], reason: str) -> None:
        self._bound.append(BoundWildcard(tuple(actions), tuple(resources), reason))


#: Id of the customer managed policy, under the grantee's role, that holds the bearer-token grant.
BEARER_TOKEN_POLICY_ID = "SageMakerCallWithBearerToken"
#: Why the bearer-token statement's ``*`` is unavoidable and bounded.
BEARER_TOKEN_REASON = (
    "sagemaker:CallWithBearerToken has no resource type (Service Authorization Reference); "
    "aws:ResourceAccount limits it to the caller's own account, as AWS's managed policy "
    "AmazonSageMakerJobRuntimeAccess does."
)


#: The caller's own account, as AmazonSageMakerJobRuntimeAccess writes it.
_OWN_ACCOUNT = {"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}}


def bearer_token_statement() -> iam.PolicyStatement:
    """``CallWithBearerToken`` on ``*``, only for resources of the caller's own account.

    The condition is the one AWS's managed policy ``AmazonSageMakerJobRuntimeAccess``
    puts on the same action (docs.aws.amazon.com/aws-managed-policy/latest/reference/
    AmazonSageMakerJobRuntimeAccess.html, statement ``BearerTokenPermissions``).
    """
    return iam.PolicyStatement(
        actions=["sagemaker:CallWithBearerToken"],
        resources=["*"],
        conditions=_OWN_ACCOUNT,
    )


def _role_of(grantee: iam.IGrantable) -> iam.IRole | None:
    principal = grantee.grant_principal
    if isinstance(principal, Construct) and hasattr(principal, "role_name"):
        return principal  # type: ignore[return-value]
    return None


def grant_bearer_token(grantee: iam.IGrantable) -> iam.Grant | None:
    """Give ``grantee`` the bearer-token statement in a policy of its own.

    A role gets it in one customer managed policy (``BEARER_TOKEN_POLICY_ID`` under the
    role, shared by every endpoint that grants it), so ``acknowledge_bearer_token`` can
    acknowledge exactly that ``*``; other principals get it in their default policy
    (the returned ``Grant``).
    """
    role = _role_of(grantee)
    if role is None:
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["sagemaker:CallWithBearerToken"],
            resource_arns=["*"],
            conditions=_OWN_ACCOUNT,
        )
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

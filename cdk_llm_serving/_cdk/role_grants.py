"""Least-privilege statements for SageMaker execution roles, with cdk-nag reasons recorded."""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, Stack
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from ..model_sources import ContainerImage, ModelData
from .nag import acknowledge_wildcard_resources


class ExecutionRoleGrants:
    """Adds statements to ``role`` and remembers why each wildcard resource is needed.

    Call ``acknowledge()`` once all grants are made: it acknowledges cdk-nag's IAM5
    finding for exactly those wildcard resources on ``scope`` (an ancestor of the role's
    policy), with the collected reasons.
    """

    def __init__(self, scope: IConstruct, role: iam.IRole) -> None:
        self.scope = scope
        self.role = role
        self._reasons: dict[str, list[str]] = {}

    def image_pull(self, image: ContainerImage) -> None:
        repository_arn = image.resolve_repository_arn(Aws.PARTITION)
        if repository_arn is not None:
            self.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=[
                        "ecr:BatchCheckLayerAvailability",
                        "ecr:BatchGetImage",
                        "ecr:GetDownloadUrlForLayer",
                    ],
                    resources=[repository_arn],
                )
            )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"])
        )
        self._wildcard("*", "ecr:GetAuthorizationToken has no resource-level permissions.")

    def model_data_read(self, model_data: ModelData) -> None:
        bucket_arn = f"arn:{Aws.PARTITION}:s3:::{model_data.bucket_name}"
        objects = f"{bucket_arn}/{model_data.key_prefix}*"
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[objects])
        )
        self._wildcard(
            objects,
            "Read-only access to the objects under the model's own weight prefix; their names are the checkpoint's files.",
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={
                    "StringLike": {
                        "s3:prefix": [model_data.key_prefix, f"{model_data.key_prefix}*"]
                    }
                },
            )
        )
        if model_data.encryption_key is not None:
            model_data.encryption_key.grant_decrypt(self.role)

    def logs_and_metrics(self) -> None:
        log_groups = Stack.of(self.scope).format_arn(
            service="logs",
            resource="log-group",
            resource_name="/aws/sagemaker/*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:DescribeLogStreams",
                    "logs:PutLogEvents",
                ],
                resources=[log_groups, f"{log_groups}:log-stream:*"],
            )
        )
        reason = "SageMaker names the endpoint's log group and streams at deploy time; access stays under /aws/sagemaker/."
        self._wildcard(log_groups, reason)
        self._wildcard(f"{log_groups}:log-stream:*", reason)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={
                    "StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker*"]}
                },
            )
        )
        self._wildcard(
            "*",
            "cloudwatch:PutMetricData has no resource-level permissions; a namespace condition limits it to SageMaker's.",
        )

    def vpc_interfaces(self) -> None:
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "ec2:CreateNetworkInterface",
                    "ec2:CreateNetworkInterfacePermission",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DeleteNetworkInterfacePermission",
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeVpcs",
                ],
                resources=["*"],
            )
        )
        self._wildcard(
            "*",
            "SageMaker creates the container's network interfaces in the given subnets; these EC2 actions take no resource ARN known at synth time.",
        )

    def acknowledge(self) -> None:
        for resource, reasons in self._reasons.items():
            acknowledge_wildcard_resources(self.scope, [resource], " ".join(dict.fromkeys(reasons)))
        self._reasons.clear()

    def _wildcard(self, resource: str, reason: str) -> None:
        self._reasons.setdefault(resource, []).append(reason)

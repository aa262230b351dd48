"""Options for an asynchronous-inference endpoint: where results go and who hears of them."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns

from .._cdk.role_grants import resource_account_condition
from .._cdk.service_limits import limits
from .._cdk.validation import check_range
from ..errors import Problems


@dataclass(frozen=True, eq=False)
class AsyncInference:
    """Queue requests and write responses to S3 instead of answering on the connection.

    :param output_bucket: where responses are written (required).
    :param output_prefix: key prefix for responses. Default: ``async-output/``.
    :param failure_prefix: key prefix for failed requests. Default: ``async-failures/``.
    :param encryption_key: KMS key for the output objects. Default: the bucket's own key, if any
        (SSE-S3 otherwise).
    :param success_topic: SNS topic told of each success. Default: none.
    :param error_topic: SNS topic told of each failure. Default: none.
    :param max_concurrent_invocations_per_instance: requests one instance takes at once.
        Default: SageMaker's choice.
    """

    output_bucket: s3.IBucket | None
    output_prefix: str = "async-output/"
    failure_prefix: str = "async-failures/"
    encryption_key: kms.IKey | None = None
    success_topic: sns.ITopic | None = None
    error_topic: sns.ITopic | None = None
    max_concurrent_invocations_per_instance: int | None = None

    def validate(self, problems: Problems, prop: str) -> None:
        if self.output_bucket is None:
            problems.add(
                f"{prop}.output_bucket", None, "asynchronous inference needs an S3 output location"
            )
        check_range(
            problems,
            f"{prop}.max_concurrent_invocations_per_instance",
            self.max_concurrent_invocations_per_instance,
            limits("AsyncInferenceClientConfig", "MaxConcurrentInvocationsPerInstance"),
        )

    @property
    def key(self) -> kms.IKey | None:
        if self.encryption_key is not None:
            return self.encryption_key
        return self.output_bucket.encryption_key if self.output_bucket is not None else None

    def grant_write_results(self, grantee: iam.IGrantable) -> iam.Grant:
        """What a model role needs to write results and publish notifications.

        Writes and key use require the bucket's and key's own account (``aws:ResourceAccount``),
        so results never land in a same-named bucket elsewhere.
        """
        bucket = self.output_bucket
        assert bucket is not None
        grant = iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:PutObject", "s3:AbortMultipartUpload"],
            resource_arns=[
                bucket.arn_for_objects(f"{prefix.strip('/')}/*")
                for prefix in (self.output_prefix, self.failure_prefix)
            ],
            conditions=resource_account_condition(bucket.env.account),
        )
        key = self.key
        if key is not None:
            grant = grant.combine(
                iam.Grant.add_to_principal(
                    grantee=grantee,
                    actions=["kms:Encrypt", "kms:GenerateDataKey*", "kms:Decrypt"],
                    resource_arns=[key.key_arn],
                    conditions=resource_account_condition(key.env.account),
                )
            )
        for topic in (self.success_topic, self.error_topic):
            if topic is not None:
                grant = grant.combine(topic.grant_publish(grantee))
        return grant

    def to_cfn(self) -> sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty:
        assert self.output_bucket is not None
        bucket = self.output_bucket.bucket_name
        notification = None
        if self.success_topic is not None or self.error_topic is not None:
            notification = sagemaker.CfnEndpointConfig.AsyncInferenceNotificationConfigProperty(
                success_topic=self.success_topic.topic_arn if self.success_topic else None,
                error_topic=self.error_topic.topic_arn if self.error_topic else None,
            )
        return sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty(
            output_config=sagemaker.CfnEndpointConfig.AsyncInferenceOutputConfigProperty(
                s3_output_path=f"s3://{bucket}/{self.output_prefix.strip('/')}/",
                s3_failure_path=f"s3://{bucket}/{self.failure_prefix.strip('/')}/",
                kms_key_id=self.key.key_arn if self.key is not None else None,
                notification_config=notification,
            ),
            client_config=(
                sagemaker.CfnEndpointConfig.AsyncInferenceClientConfigProperty(
                    max_concurrent_invocations_per_instance=self.max_concurrent_invocations_per_instance
                )
                if self.max_concurrent_invocations_per_instance is not None
                else None
            ),
        )

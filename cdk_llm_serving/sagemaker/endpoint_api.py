"""What clients and operators use of an endpoint, created here or imported."""

from __future__ import annotations

from typing import Protocol, Unpack

from aws_cdk import Aws
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam

from .async_inference import AsyncInference
from .endpoint_metrics import EndpointMetrics, MetricOptions


class IPoolEndpoint(Protocol):
    """An endpoint to invoke and watch: ``InstancePoolEndpoint`` or one of its imports."""

    @property
    def endpoint_name(self) -> str: ...

    @property
    def endpoint_arn(self) -> str: ...

    @property
    def variant_name(self) -> str: ...

    @property
    def openai_base_url(self) -> str: ...

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant: ...

    def metric(
        self,
        metric_name: str,
        *,
        instance_type: str | None = None,
        namespace: str | None = None,
        **options: Unpack[MetricOptions],
    ) -> cloudwatch.Metric: ...

    def metric_invocations(
        self, *, instance_type: str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric: ...


class EndpointApi(EndpointMetrics):
    """Invoke permissions, the OpenAI-compatible URL and the metrics of one endpoint."""

    endpoint_arn: str
    async_inference: AsyncInference | None

    @property
    def openai_base_url(self) -> str:
        """Base URL of the OpenAI-compatible API (``…/chat/completions`` beneath it).

        The path and its bearer-token auth: docs.aws.amazon.com/sagemaker/latest/dg/
        realtime-endpoints-openai-compatible.html.
        """
        host = f"runtime.sagemaker.{Aws.REGION}.{Aws.URL_SUFFIX}"
        return f"https://{host}/endpoints/{self.endpoint_name}/openai/v1"

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Invoke the endpoint (plain, streaming, async) and call its ``/openai/v1`` path.

        The OpenAI-compatible path authenticates with a bearer token that needs
        ``sagemaker:CallWithBearerToken`` and ``sagemaker:InvokeEndpoint``
        (realtime-endpoints-openai-compatible.html); the Service Authorization Reference
        lists no resource type for ``CallWithBearerToken``, so it is granted on ``*``.
        """
        actions = ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"]
        if self.async_inference is not None:
            actions.append("sagemaker:InvokeEndpointAsync")
        invoke = iam.Grant.add_to_principal(
            grantee=grantee, actions=actions, resource_arns=[self.endpoint_arn]
        )
        bearer = iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:CallWithBearerToken"], resource_arns=["*"]
        )
        return invoke.combine(bearer)

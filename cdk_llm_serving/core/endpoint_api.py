"""What clients and operators use of an endpoint, created here or imported."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Unpack

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam

from .._cdk.role_grants import BEARER_TOKEN_REASON, acknowledge_bearer_token, grant_bearer_token
from ..planning.catalog import Catalog
from ..planning.instance_types import InstanceType
from .async_inference import AsyncInference
from .endpoint_metrics import EndpointMetrics, MetricOptions
from .fleet_utilization import MetricQuery


class IEndpointScaling(Protocol):
    """What alarms and dashboards read of an endpoint's instance-count scaling
    (``EndpointAutoScaling``): the weighted utilization it tracks, if it tracks one."""

    @property
    def target_utilization(self) -> float: ...

    @property
    def fleet_queries(self) -> list[MetricQuery] | None:
        """The utilization's metric-math queries (``None``: it scales on something else)."""
        ...

    @property
    def fleet_utilization(self) -> cloudwatch.IMetric | None:
        """The same utilization as one metric (``None`` as above)."""
        ...


class IPoolEndpoint(Protocol):
    """An endpoint to invoke and watch: ``InstancePoolEndpoint``, ``InferenceComponentEndpoint``,
    ``VllmPoolEndpoint`` or an import (``InstancePoolEndpoint.from_endpoint_name``).

    What ``PoolEndpointAlarms`` and ``PoolEndpointDashboard`` read: the names, the pools'
    instance types (most preferred first; an import states them), whether the endpoint
    publishes detailed observability, its auto scaling and rollback alarms, and its metrics.
    """

    @property
    def endpoint_name(self) -> str: ...

    @property
    def endpoint_arn(self) -> str: ...

    @property
    def variant_name(self) -> str: ...

    @property
    def openai_base_url(self) -> str: ...

    @property
    def instance_types(self) -> Sequence[InstanceType | str]:
        """The pools' instance types, most preferred first (empty: not known)."""
        ...

    @property
    def detailed_observability(self) -> bool:
        """Whether the endpoint publishes detailed observability (token metrics in PromQL)."""
        ...

    @property
    def auto_scaling(self) -> IEndpointScaling | None:
        """The instance-count scaling made here (``None``: none, or not made here)."""
        ...

    @property
    def rollback_alarms(self) -> Sequence[cloudwatch.IAlarm]:
        """The alarms that roll an update back (empty: none known)."""
        ...

    @property
    def catalog(self) -> Catalog:
        """The planner's catalog (prices in alarm descriptions)."""
        ...

    def served_model_name_on(self, instance_type: InstanceType | str) -> str | None:
        """The name the copy on that pool serves (``None``: not known)."""
        ...

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant: ...

    def acknowledge_invoke_grant(self, grantee: iam.IGrantable, reason: str = ...) -> None: ...

    def metric(
        self,
        metric_name: str,
        *,
        instance_type: InstanceType | str | None = None,
        namespace: str | None = None,
        **options: Unpack[MetricOptions],
    ) -> cloudwatch.Metric: ...

    def metric_invocations(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric: ...

    def metric_invocation_4xx_errors(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric: ...

    def metric_invocation_5xx_errors(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric: ...

    def metric_model_latency(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric: ...

    def metric_concurrent_requests(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric: ...

    def metric_gpu_utilization(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric: ...

    def metric_gpu_memory_utilization(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric: ...

    def metric_pool_instances(
        self, *, instance_type: InstanceType | str, period: Duration = ...
    ) -> cloudwatch.MathExpression: ...

    def metric_variant_total(
        self, metric_name: str, instance_types: Sequence[InstanceType | str], *, label: str
    ) -> cloudwatch.IMetric: ...

    def metric_variant_worst(
        self,
        metric_name: str,
        instance_types: Sequence[InstanceType | str],
        *,
        statistic: str,
        label: str,
    ) -> cloudwatch.IMetric: ...


class EndpointApi(EndpointMetrics):
    """Invoke permissions, the OpenAI-compatible URL and the metrics of one endpoint."""

    endpoint_arn: str
    async_inference: AsyncInference | None
    #: The region of the endpoint's stack when the construct holds it already (its model's,
    #: read once there); ``None``: ask the stack (``core.dashboard.region_of``).
    stack_region: str | None = None

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
        lists no resource type for ``CallWithBearerToken``, so it is granted on ``*`` with
        the ``aws:ResourceAccount`` condition AWS's managed policy uses for that action. For
        a role, that statement sits in a policy of its own (``acknowledge_invoke_grant``).
        """
        actions = ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"]
        if self.async_inference is not None:
            actions.append("sagemaker:InvokeEndpointAsync")
        invoke = iam.Grant.add_to_principal(
            grantee=grantee, actions=actions, resource_arns=[self.endpoint_arn]
        )
        bearer = grant_bearer_token(grantee)
        return invoke if bearer is None else invoke.combine(bearer)

    def acknowledge_invoke_grant(
        self, grantee: iam.IGrantable, reason: str = BEARER_TOKEN_REASON
    ) -> None:
        """Acknowledge cdk-nag's ``AwsSolutions-IAM5[Resource::*]`` of ``grant_invoke``, nothing more.

        For a role, ``grant_invoke`` puts ``CallWithBearerToken`` on ``*`` in a customer
        managed policy of its own under the role; this acknowledges the finding on that
        policy only, so a wildcard added anywhere else on the role is still reported.
        """
        acknowledge_bearer_token(grantee, reason)

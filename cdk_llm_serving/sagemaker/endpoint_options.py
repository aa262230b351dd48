"""``PoolEndpointOptions``: everything about a pool endpoint except its model and pools."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_kms as kms

from .._cdk.service_limits import limits
from .._cdk.validation import check_at_least, check_name, check_one_of, check_range, seconds_of
from ..errors import Problems
from ..planning.catalog import Catalog
from .async_inference import AsyncInference
from .deployment import EndpointDeployment

#: What both the API and CloudFormation accept (the API's KV_AWARE is not in CloudFormation's
#: schema; see ``_cdk.service_limits.CLOUDFORMATION_NARROWER``).
#: The check reads this type (``errors.check_literal``).
RoutingStrategy = Literal["LEAST_OUTSTANDING_REQUESTS", "RANDOM", "PREFIX_AWARE"]

#: Values MetricPublishFrequencyInSeconds accepts: the API reference lists them
#: (sagemaker/latest/APIReference/API_MetricsConfig.html) and CloudFormation's schema enforces
#: them; botocore's model has no enum for it (``CLOUDFORMATION_NARROWER``).
METRIC_PUBLISH_FREQUENCIES = tuple(
    int(value) for value in limits("MetricsConfig", "MetricPublishFrequencyInSeconds").enum
)


@dataclass(frozen=True)
class PoolEndpointOptions:
    """The options of ``InstancePoolEndpoint`` (documented there), as one value.

    ``VllmPoolEndpoint`` and ``InstancePoolEndpoint.build_from_recommendation`` take this
    instead of loose keyword arguments, so a misspelled option fails where it is written.
    """

    endpoint_name: str | None = None
    variant_name: str = "AllTraffic"
    initial_instance_count: int = 1
    provision_timeout: Duration | None = Duration.minutes(30)
    container_startup_timeout: Duration | None = None
    model_data_download_timeout: Duration | None = None
    routing_strategy: RoutingStrategy = "LEAST_OUTSTANDING_REQUESTS"
    volume_size_gb: int | None = None
    volume_kms_key: kms.IKey | None = None
    enhanced_metrics: bool = True
    detailed_observability: bool = True
    metric_publish_frequency: int = 60
    async_inference: AsyncInference | None = None
    capacity_reservation_arn: str | None = None
    deployment: EndpointDeployment | None = None
    rollback_alarms: Sequence[cloudwatch.IAlarm] | None = None
    rollback_error_threshold: int = 5
    rollback_latency_threshold: Duration = Duration.seconds(120)
    managed_instance_count: tuple[int, int] | None = None
    catalog: Catalog | None = None

    def as_kwargs(self) -> dict[str, Any]:
        """The options as ``InstancePoolEndpoint`` keyword arguments."""
        return {field.name: getattr(self, field.name) for field in fields(self)}

    def validate(self, problems: Problems, prop: str = "") -> None:
        """Checks that need no pool: names, ranges and enums from botocore's model."""
        at = f"{prop}." if prop else ""  # property names under the given prefix
        self._validate_names(problems, at)
        self._validate_timeouts(problems, at)
        check_range(
            problems,
            f"{at}volume_size_gb",
            self.volume_size_gb,
            limits("ProductionVariant", "VolumeSizeInGB"),
            "GB",
        )
        check_one_of(
            problems,
            f"{at}routing_strategy",
            self.routing_strategy,
            limits("ProductionVariantRoutingConfig", "RoutingStrategy"),
            "routing strategy",
        )
        if self.metric_publish_frequency not in METRIC_PUBLISH_FREQUENCIES:
            allowed = ", ".join(map(str, METRIC_PUBLISH_FREQUENCIES))
            problems.add(
                f"{at}metric_publish_frequency",
                self.metric_publish_frequency,
                f"must be one of {allowed} seconds",
            )
        if self.async_inference is not None:
            self.async_inference.validate(problems, f"{at}async_inference")
        if self.deployment is not None:
            self.deployment.validate(problems, f"{at}deployment")
        self._validate_rollback(problems, at)

    def _validate_names(self, problems: Problems, at: str) -> None:
        check_name(
            problems,
            f"{at}endpoint_name",
            self.endpoint_name,
            limits("CreateEndpointInput", "EndpointName"),
            "an endpoint name",
        )
        check_name(
            problems,
            f"{at}variant_name",
            self.variant_name,
            limits("ProductionVariant", "VariantName"),
            "a variant name",
        )
        check_at_least(
            problems,
            f"{at}initial_instance_count",
            self.initial_instance_count,
            limits("ProductionVariant", "InitialInstanceCount").minimum or 1,
        )

    def _validate_timeouts(self, problems: Problems, at: str) -> None:
        for name, value, shape_member in (
            ("provision_timeout", self.provision_timeout, "VariantInstanceProvisionTimeout"),
            (
                "container_startup_timeout",
                self.container_startup_timeout,
                "ContainerStartupHealthCheckTimeout",
            ),
            (
                "model_data_download_timeout",
                self.model_data_download_timeout,
                "ModelDataDownloadTimeout",
            ),
        ):
            bounds = limits("ProductionVariant", f"{shape_member}InSeconds")
            check_range(problems, f"{at}{name}", seconds_of(value), bounds, "seconds")

    def _validate_rollback(self, problems: Problems, at: str) -> None:
        most = limits("AutoRollbackConfig", "Alarms").maximum or 10
        if self.rollback_alarms is not None and len(self.rollback_alarms) > most:
            given = f"{len(self.rollback_alarms)} alarms"
            problems.add(f"{at}rollback_alarms", given, f"at most {most} alarms")
        check_at_least(problems, f"{at}rollback_error_threshold", self.rollback_error_threshold, 1)
        latency = seconds_of(self.rollback_latency_threshold)
        if latency is not None and latency <= 0:
            problems.add(
                f"{at}rollback_latency_threshold",
                self.rollback_latency_threshold.to_human_string(),
                "must be positive",
            )

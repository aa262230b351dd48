"""``PoolEndpointOptions``: everything about a pool endpoint except its model and pools."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal, TypedDict, cast, get_type_hints

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_kms as kms

from .._cdk.durations import Span
from .._cdk.service_limits import limits
from .._cdk.validation import check_at_least, check_name, check_one_of, check_range, seconds_of
from ..errors import Problems, check_keywords, check_types, typed_dict_keys
from ..planning.catalog import Catalog
from ..core.async_inference import AsyncInference
from .deployment import EndpointDeployment

#: The two ``Duration`` defaults, in plain seconds (``Span.of_seconds``: read without the kernel).
PROVISION_TIMEOUT_DEFAULT = Span.of_seconds(1800)
ROLLBACK_LATENCY_THRESHOLD_DEFAULT = Span.of_seconds(120)

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


class _HostKeywords(TypedDict, total=False):
    """The options every pool endpoint takes (``PoolEndpointOptions`` documents them)."""

    endpoint_name: str | None
    variant_name: str
    initial_instance_count: int
    provision_timeout: Duration | None
    routing_strategy: RoutingStrategy
    volume_size_gb: int | None
    volume_kms_key: kms.IKey | None
    enhanced_metrics: bool
    detailed_observability: bool
    metric_publish_frequency: int
    async_inference: AsyncInference | None
    capacity_reservation_arn: str | None
    deployment: EndpointDeployment | None
    rollback_alarms: Sequence[cloudwatch.IAlarm] | None
    rollback_error_threshold: int
    rollback_latency_threshold: Duration
    catalog: Catalog | None


class PoolEndpointKeywords(_HostKeywords, total=False):
    """``InstancePoolEndpoint``'s options as keywords (``**options``): names and types only.

    ``PoolEndpointOptions`` holds the defaults and the documentation; a test checks that the
    two declare the same names with the same types.
    """

    container_startup_timeout: Duration | None
    model_data_download_timeout: Duration | None
    #: Deprecated here: only the ``InstancePoolEndpoint(model=None)`` form takes it; use
    #: ``InferenceComponentEndpoint``.
    managed_instance_count: tuple[int, int] | None


class InferenceComponentEndpointKeywords(_HostKeywords, total=False):
    """``InferenceComponentEndpoint``'s options as keywords: ``PoolEndpointOptions`` without the
    start-up timeouts (each component sets its own), with ``managed_instance_count``."""

    managed_instance_count: tuple[int, int] | None


@dataclass(frozen=True)
class PoolEndpointOptions:
    """The options of an instance-pool endpoint, as one value: the one place their defaults live.

    ``InstancePoolEndpoint`` and ``InferenceComponentEndpoint`` take them as keywords
    (``PoolEndpointKeywords``, ``InferenceComponentEndpointKeywords``); ``VllmPoolEndpoint``
    (``endpoint_options``) and ``InstancePoolEndpoint.build_from_recommendation`` (``options``)
    take this value or the same keywords as a dict, so a misspelled option fails where it is
    written.

    :param endpoint_name: the endpoint's name. Default: derived from the construct path
        (stable across updates, unique per stack).
    :param variant_name: the production variant's name. Default: ``AllTraffic``.
    :param initial_instance_count: instances at creation. Default: 1.
    :param provision_timeout: how long SageMaker keeps trying pools for capacity (300-3600 s).
        Default: 30 minutes.
    :param container_startup_timeout: time for the container to pass its health check
        (60-3600 s); model endpoints only (components set their own). Default: the planner's
        cold-start estimate (load + engine start, x2) for the slowest pool when the models
        declare ``sizing``, else 30 minutes.
    :param model_data_download_timeout: time to download the weights (60-3600 s); model
        endpoints only. Default: the planner's download estimate (x2) when the models declare
        ``sizing``, else 30 minutes.
    :param routing_strategy: how requests are spread. Default: ``LEAST_OUTSTANDING_REQUESTS``,
        AWS's advice for fleets of mixed instance types.
    :param volume_size_gb: EBS volume per instance (1-512), EBS-only types only. Default:
        ``None`` (SageMaker's).
    :param volume_kms_key: KMS key for the instances' EBS volumes, EBS-only types only.
        Default: ``None``.
    :param enhanced_metrics: per-instance and per-container metrics. Default: ``True``.
    :param detailed_observability: OpenTelemetry metrics incl. the inference framework's token
        metrics. Default: ``True``.
    :param metric_publish_frequency: seconds between metric publications (10, 30, 60, 120,
        180, 240, 300). Default: 60.
    :param async_inference: make this an asynchronous endpoint. Default: ``None`` (real-time).
    :param capacity_reservation_arn: an ML capacity reservation to run on (single pool only).
        Default: ``None``.
    :param deployment: how updates roll out. Default: blue/green, all at once, 10-minute bake
        (``None`` on an inference-component endpoint: no deployment policy unless given).
    :param rollback_alarms: alarms that roll an update back (at most 10). Default: alarms on
        5xx errors and p99 model latency, created here (with a deployment policy).
    :param rollback_error_threshold: 5xx errors per minute that trip the default error alarm
        (two minutes in a row). Default: 5.
    :param rollback_latency_threshold: p99 model latency that trips the default latency alarm
        (three minutes in a row). Default: 2 minutes.
    :param managed_instance_count: ``(min, max)`` instances for SageMaker's managed instance
        scaling, which follows the components' copy counts (``InferenceComponentEndpoint``
        only). Default: ``None`` (off).
    :param catalog: the planner's instance catalog (your prices, extra types). Default:
        ``None`` (``default_catalog()``).
    """

    endpoint_name: str | None = None
    variant_name: str = "AllTraffic"
    initial_instance_count: int = 1
    provision_timeout: Duration | None = PROVISION_TIMEOUT_DEFAULT.duration
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
    rollback_latency_threshold: Duration = ROLLBACK_LATENCY_THRESHOLD_DEFAULT.duration
    managed_instance_count: tuple[int, int] | None = None
    catalog: Catalog | None = None

    @classmethod
    def from_keywords(
        cls,
        subject: str | Callable[[], str],
        given: Mapping[str, Any],
        *,
        prop: str = "",
        accepted: Any = PoolEndpointKeywords,
    ) -> PoolEndpointOptions:
        """The options from keywords (``**options`` or a dict): a misspelled name or a value of
        the wrong type is a ``ConfigurationError`` naming it (under ``prop.`` when given).

        ``accepted`` is the ``TypedDict`` whose keys the receiver takes.
        """
        problems = Problems(subject)
        keys = typed_dict_keys(accepted)
        found = Problems("")
        check_keywords(found, "", given, keys)
        known = {name: value for name, value in given.items() if name in keys}
        check_types(found, _field_hints(), known, literals=False)
        problems.extend(found, prop)
        problems.raise_if_any()
        return cls(**known)

    @classmethod
    def coerce(
        cls,
        subject: str | Callable[[], str],
        prop: str,
        value: PoolEndpointOptions | Mapping[str, Any] | None,
    ) -> PoolEndpointOptions:
        """An options prop given as this value, as a dict of keywords, or not at all."""
        if value is None:
            return cls()
        if isinstance(value, PoolEndpointOptions):
            return value
        if isinstance(value, Mapping):
            return cls.from_keywords(subject, value, prop=prop)
        problems = Problems(subject)
        problems.add(prop, value, "must be a PoolEndpointOptions or a dict of its keywords")
        problems.raise_if_any()
        raise AssertionError("unreachable")

    def as_keywords(self) -> PoolEndpointKeywords:
        """The options as ``InstancePoolEndpoint`` keyword arguments."""
        return cast(PoolEndpointKeywords, self.as_kwargs())

    def as_kwargs(self) -> dict[str, Any]:
        """The options as a plain dict of keyword arguments."""
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
            (
                "provision_timeout",
                seconds_of(self.provision_timeout, PROVISION_TIMEOUT_DEFAULT),
                "VariantInstanceProvisionTimeout",
            ),
            (
                "container_startup_timeout",
                seconds_of(self.container_startup_timeout),
                "ContainerStartupHealthCheckTimeout",
            ),
            (
                "model_data_download_timeout",
                seconds_of(self.model_data_download_timeout),
                "ModelDataDownloadTimeout",
            ),
        ):
            bounds = limits("ProductionVariant", f"{shape_member}InSeconds")
            check_range(problems, f"{at}{name}", value, bounds, "seconds")

    def _validate_rollback(self, problems: Problems, at: str) -> None:
        most = limits("AutoRollbackConfig", "Alarms").maximum or 10
        if self.rollback_alarms is not None and len(self.rollback_alarms) > most:
            given = f"{len(self.rollback_alarms)} alarms"
            problems.add(f"{at}rollback_alarms", given, f"at most {most} alarms")
        check_at_least(problems, f"{at}rollback_error_threshold", self.rollback_error_threshold, 1)
        latency = ROLLBACK_LATENCY_THRESHOLD_DEFAULT.given(self.rollback_latency_threshold)
        if latency.seconds <= 0:
            problems.add(f"{at}rollback_latency_threshold", latency.human(), "must be positive")


@functools.cache
def _field_hints() -> dict[str, Any]:
    """``PoolEndpointOptions``'s field types, resolved once."""
    return get_type_hints(PoolEndpointOptions)

"""``PoolEndpointProps``: a pool endpoint's options, declared once, taken as keyword arguments."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypedDict, cast, get_type_hints

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_kms as kms

from .._cdk.service_limits import limits
from .._cdk.validation import check_at_least, check_name, check_one_of, check_range, seconds_of
from ..core.async_inference import AsyncInference
from ..errors import Problems, check_keywords, check_types
from ..planning.catalog import Catalog
from .deployment import EndpointDeployment

#: What both the API and CloudFormation accept (the API's KV_AWARE is not in CloudFormation's
#: schema; see ``_cdk.service_limits.CLOUDFORMATION_NARROWER``).
RoutingStrategy = Literal["LEAST_OUTSTANDING_REQUESTS", "RANDOM", "PREFIX_AWARE"]

#: Values MetricPublishFrequencyInSeconds accepts: the API reference lists them
#: (sagemaker/latest/APIReference/API_MetricsConfig.html); botocore's model has no enum for it.
METRIC_PUBLISH_FREQUENCIES = tuple(
    int(value) for value in limits("MetricsConfig", "MetricPublishFrequencyInSeconds").enum
)


class PoolEndpointProps(TypedDict, total=False):
    """A pool endpoint's options: the keyword arguments ``InstancePoolEndpoint``,
    ``InferenceComponentEndpoint``, ``VllmPoolEndpoint``, ``StagingEndpoints`` and
    ``InstancePoolEndpoint.build_from_recommendation`` take besides their own.

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
        SageMaker's.
    :param volume_kms_key: KMS key for the instances' EBS volumes, EBS-only types only.
        Default: none.
    :param enhanced_metrics: per-instance and per-container metrics. Default: ``True``.
    :param detailed_observability: OpenTelemetry metrics incl. the inference framework's token
        metrics. Default: ``True``.
    :param metric_publish_frequency: seconds between metric publications (10, 30, 60, 120,
        180, 240, 300). Default: 60.
    :param async_inference: make this an asynchronous endpoint. Default: none (real-time).
    :param capacity_reservation_arn: an ML capacity reservation to run on (single pool only).
        Default: none.
    :param deployment: how updates roll out. Default: rolling on GPU pools with 2+ instances,
        else blue/green, all at once, 10-minute bake (none on an inference-component endpoint).
    :param rollback_alarms: alarms that roll an update back (at most 10). Default: alarms on
        5xx errors and p99 model latency, created here (with a deployment policy).
    :param rollback_error_threshold: 5xx errors per minute that trip the default error alarm
        (two minutes in a row). Default: 5.
    :param rollback_latency_threshold: p99 model latency that trips the default latency alarm
        (three minutes in a row). Default: 2 minutes.
    :param managed_instance_count: ``(min, max)`` instances for SageMaker's managed instance
        scaling, which follows the components' copy counts (``InferenceComponentEndpoint``
        only). Default: off.
    :param catalog: the planner's instance catalog (your prices, extra types). Default:
        ``default_catalog()``.
    """

    endpoint_name: str | None
    variant_name: str
    initial_instance_count: int
    provision_timeout: Duration | None
    container_startup_timeout: Duration | None
    model_data_download_timeout: Duration | None
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
    managed_instance_count: tuple[int, int] | None
    catalog: Catalog | None


#: The defaults documented on ``PoolEndpointProps`` that are values; the others are worked out
#: by the endpoint or left to SageMaker.
DEFAULTS: PoolEndpointProps = {
    "variant_name": "AllTraffic",
    "initial_instance_count": 1,
    "provision_timeout": Duration.minutes(30),
    "routing_strategy": "LEAST_OUTSTANDING_REQUESTS",
    "enhanced_metrics": True,
    "detailed_observability": True,
    "metric_publish_frequency": 60,
    "rollback_error_threshold": 5,
    "rollback_latency_threshold": Duration.minutes(2),
}

_NAMES = frozenset(PoolEndpointProps.__optional_keys__)


def with_defaults(
    subject: str | Callable[[], str], props: Mapping[str, Any], own: Iterable[str] = ()
) -> PoolEndpointProps:
    """``props`` with ``DEFAULTS`` for what is not given, or one ``ConfigurationError``: each
    name that is not an option (with the closest of the options and ``own``, the construct's
    other keywords), each value of the wrong type."""
    problems = Problems(subject)
    check_keywords(problems, "", props, _NAMES | set(own))
    known = {name: value for name, value in props.items() if name in _NAMES}
    check_types(problems, _hints(), known, literals=False)
    problems.raise_if_any()
    return cast(PoolEndpointProps, {**DEFAULTS, **known})


@functools.cache
def _hints() -> dict[str, Any]:
    return get_type_hints(PoolEndpointProps)


def validate(problems: Problems, props: PoolEndpointProps) -> None:
    """The checks that need no pool: names, ranges and enums from botocore's model."""
    check_name(
        problems,
        "endpoint_name",
        props.get("endpoint_name"),
        limits("CreateEndpointInput", "EndpointName"),
        "an endpoint name",
    )
    check_name(
        problems,
        "variant_name",
        props["variant_name"],
        limits("ProductionVariant", "VariantName"),
        "a variant name",
    )
    check_at_least(
        problems,
        "initial_instance_count",
        props["initial_instance_count"],
        limits("ProductionVariant", "InitialInstanceCount").minimum or 1,
    )
    _validate_timeouts(problems, props)
    check_range(
        problems,
        "volume_size_gb",
        props.get("volume_size_gb"),
        limits("ProductionVariant", "VolumeSizeInGB"),
        "GB",
    )
    check_one_of(
        problems,
        "routing_strategy",
        props["routing_strategy"],
        limits("ProductionVariantRoutingConfig", "RoutingStrategy"),
        "routing strategy",
    )
    if props["metric_publish_frequency"] not in METRIC_PUBLISH_FREQUENCIES:
        allowed = ", ".join(map(str, METRIC_PUBLISH_FREQUENCIES))
        given = props["metric_publish_frequency"]
        problems.add("metric_publish_frequency", given, f"must be one of {allowed} seconds")
    if (async_inference := props.get("async_inference")) is not None:
        async_inference.validate(problems, "async_inference")
    if (deployment := props.get("deployment")) is not None:
        deployment.validate(problems, "deployment")
    _validate_rollback(problems, props)


def _validate_timeouts(problems: Problems, props: PoolEndpointProps) -> None:
    for name, value, shape_member in (
        ("provision_timeout", props["provision_timeout"], "VariantInstanceProvisionTimeout"),
        (
            "container_startup_timeout",
            props.get("container_startup_timeout"),
            "ContainerStartupHealthCheckTimeout",
        ),
        (
            "model_data_download_timeout",
            props.get("model_data_download_timeout"),
            "ModelDataDownloadTimeout",
        ),
    ):
        bounds = limits("ProductionVariant", f"{shape_member}InSeconds")
        check_range(problems, name, seconds_of(value), bounds, "seconds")


def _validate_rollback(problems: Problems, props: PoolEndpointProps) -> None:
    alarms = props.get("rollback_alarms")
    most = limits("AutoRollbackConfig", "Alarms").maximum or 10
    if alarms is not None and len(alarms) > most:
        problems.add("rollback_alarms", f"{len(alarms)} alarms", f"at most {most} alarms")
    check_at_least(problems, "rollback_error_threshold", props["rollback_error_threshold"], 1)
    latency = props["rollback_latency_threshold"]
    if (seconds_of(latency) or 0) <= 0:
        problems.add("rollback_latency_threshold", latency.to_human_string(), "must be positive")

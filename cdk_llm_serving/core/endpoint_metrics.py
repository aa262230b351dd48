"""CloudWatch metrics of one endpoint variant, per pool with ``instance_type``.

With instance pools SageMaker adds an ``InstanceType`` dimension to the variant's metrics
(sagemaker/latest/dg/realtime-endpoints-heterogeneous.html); invocation metrics live in
``AWS/SageMaker``, instance utilization in ``/aws/sagemaker/Endpoints``
(sagemaker/latest/dg/monitoring-cloudwatch.html).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypedDict, Unpack

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from ..errors import ConfigurationError, Problem, refuse_unknown_options
from ..planning.instance_types import InstanceType
from .fleet_utilization import (
    CONCURRENCY_METRIC,
    CONCURRENCY_SAMPLE_SECONDS,
    instance_count_expression,
)

INVOCATION_NAMESPACE = "AWS/SageMaker"
UTILIZATION_NAMESPACE = "/aws/sagemaker/Endpoints"
UTILIZATION_METRICS = frozenset(
    {
        "CPUUtilization",
        "MemoryUtilization",
        "DiskUtilization",
        "GPUUtilization",
        "GPUMemoryUtilization",
        "CPUReservation",
        "MemoryReservation",
        "GPUReservation",
    }
)

#: Endpoint metrics AWS publishes in ``AWS/SageMaker`` (sagemaker/latest/dg/monitoring-cloudwatch.html,
#: "SageMaker AI endpoint invocation metrics"; async-inference-monitor.html for the backlog).
INVOCATION_METRICS = frozenset(
    {
        "Invocations",
        "Invocation4XXErrors",
        "Invocation5XXErrors",
        "InvocationModelErrors",
        "InvocationsPerInstance",
        "InvocationsPerCopy",
        "ModelLatency",
        "OverheadLatency",
        "ModelSetupTime",
        "ConcurrentRequestsPerModel",
        "ConcurrentRequestsPerCopy",
        "ApproximateBacklogSize",
        "ApproximateBacklogSizePerInstance",
        "ApproximateAgeOfOldestRequest",
        "HasBacklogWithoutCapacity",
        "TimeInBacklog",
        "TotalProcessingTime",
    }
)
_BY_LOWER_CASE = {name.lower(): name for name in INVOCATION_METRICS | UTILIZATION_METRICS}


def metric_name_problem(metric_name: str) -> str | None:
    """A metric is identified by its exact name, namespace and dimensions
    (AmazonCloudWatch/latest/monitoring/cloudwatch_concepts.html, "Metrics"), and names are
    compared as written: ``invocations`` is another metric, one nobody publishes, and an alarm
    on it never fires. A name that is an endpoint metric's in another case is refused, naming it."""
    known = _BY_LOWER_CASE.get(metric_name.lower())
    if known is None or known == metric_name:
        return None
    return f"CloudWatch metric names are case-sensitive: SageMaker publishes {known!r}"


class MetricOptions(TypedDict, total=False):
    """CloudWatch's metric options (``aws_cloudwatch.MetricOptions``), as keywords."""

    statistic: str
    period: Duration
    label: str
    color: str
    unit: cloudwatch.Unit
    account: str
    region: str


#: The period of every metric here unless asked otherwise.
ONE_MINUTE = Duration.minutes(1)


class EndpointMetrics:
    """SageMaker's metric source: ``metric*`` methods for anything with an ``endpoint_name`` and
    a ``variant_name``, each returning a ``cloudwatch.Metric`` or ``MathExpression``.

    Every method takes ``instance_type`` (one pool alone) and CloudWatch's metric options
    as keywords, in the same order, as aws-cdk-lib's ``metric*`` methods do.
    """

    endpoint_name: str
    variant_name: str
    #: Seconds between two ``ConcurrentRequestsPerModel`` samples of one instance
    #: (``fleet_utilization.concurrency_sample_seconds``). Default: AWS's 10-second interval.
    concurrency_sample_seconds: int = CONCURRENCY_SAMPLE_SECONDS
    #: Whether the variant's series carry ``InstanceType`` (it runs on instance pools); without
    #: pools (a capacity reservation) ``instance_type=`` reads the variant's own series.
    per_pool_dimension: bool = True

    def metric(
        self,
        metric_name: str,
        *,
        instance_type: InstanceType | str | None = None,
        namespace: str | None = None,
        **options: Unpack[MetricOptions],
    ) -> cloudwatch.Metric:
        """A metric of this variant; the namespace follows the metric unless given."""
        dimensions = {"EndpointName": self.endpoint_name, "VariantName": self.variant_name}
        if not self.per_pool_dimension:
            instance_type = None
        return build_metric(
            namespace or namespace_of(metric_name), metric_name, dimensions, instance_type, options
        )

    def metric_invocations(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric:
        """Requests sent to the variant (sum by default)."""
        return self.metric("Invocations", instance_type=instance_type, **_sum(options))

    def metric_invocation_4xx_errors(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric:
        """Requests the model answered with 4xx (sum by default)."""
        return self.metric("Invocation4XXErrors", instance_type=instance_type, **_sum(options))

    def metric_invocation_5xx_errors(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric:
        """Requests the model answered with 5xx (sum by default)."""
        return self.metric("Invocation5XXErrors", instance_type=instance_type, **_sum(options))

    def metric_model_latency(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric:
        """Model latency in microseconds, SageMaker's unit (p99 by default)."""
        settings: MetricOptions = {"statistic": "p99"}
        settings.update(options)
        return self.metric("ModelLatency", instance_type=instance_type, **settings)

    def metric_concurrent_requests(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric:
        """Concurrent requests per instance (``ConcurrentRequestsPerModel``, average)."""
        return self.metric(CONCURRENCY_METRIC, instance_type=instance_type, **options)

    def metric_gpu_utilization(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric:
        """GPU utilization in percent, summed over an instance's GPUs."""
        return self.metric("GPUUtilization", instance_type=instance_type, **options)

    def metric_gpu_memory_utilization(
        self, *, instance_type: InstanceType | str | None = None, **options: Unpack[MetricOptions]
    ) -> cloudwatch.Metric:
        """GPU memory utilization in percent, summed over an instance's GPUs."""
        return self.metric("GPUMemoryUtilization", instance_type=instance_type, **options)

    def metric_pool_instances(
        self, *, instance_type: InstanceType | str, period: Duration = ONE_MINUTE
    ) -> cloudwatch.MathExpression:
        """Instances of one pool, idle ones included: each reports its concurrency every
        ``concurrency_sample_seconds``, so samples x interval / period (see ``fleet_utilization``)."""
        samples = pool_samples_id(instance_type)
        return cloudwatch.MathExpression(
            expression=instance_count_expression(
                samples, self.concurrency_sample_seconds, int(period.to_seconds())
            ),
            using_metrics={
                samples: self.metric(
                    CONCURRENCY_METRIC,
                    instance_type=instance_type,
                    statistic="SampleCount",
                    period=period,
                )
            },
            label=f"{instance_type} instances",
            period=period,
        )

    def metric_variant_total(
        self, metric_name: str, instance_types: Sequence[InstanceType | str], *, label: str
    ) -> cloudwatch.IMetric:
        """The variant's Sum of ``metric_name``: ``FILL(…, 0)`` summed over the pools' series
        (UNCONFIRMED[variant-series-with-pools] that the variant's own series exists beside
        them; docs/design/observability.md). Without pools, the variant's own series."""
        if not instance_types or not self.per_pool_dimension:
            return self.metric(metric_name, statistic="Sum")
        ids = _pool_ids(metric_name, instance_types)
        return cloudwatch.MathExpression(
            expression="+".join(f"FILL({i},0)" for i in ids),
            using_metrics={
                i: self.metric(metric_name, instance_type=t, statistic="Sum")
                for i, t in ids.items()
            },
            label=label,
            period=ONE_MINUTE,
        )

    def metric_variant_worst(
        self,
        metric_name: str,
        instance_types: Sequence[InstanceType | str],
        *,
        statistic: str,
        label: str,
    ) -> cloudwatch.IMetric:
        """The worst pool's ``statistic`` (e.g. p99) of ``metric_name``: ``MAX`` over the pools'
        series (an upper bound of the fleet's percentile; percentiles do not add). Without
        pools, the variant's own series."""
        if not instance_types or not self.per_pool_dimension:
            return self.metric(metric_name, statistic=statistic)
        ids = _pool_ids(metric_name, instance_types)
        return cloudwatch.MathExpression(
            expression=f"MAX([{','.join(ids)}])",
            using_metrics={
                i: self.metric(metric_name, instance_type=t, statistic=statistic)
                for i, t in ids.items()
            },
            label=label,
            period=ONE_MINUTE,
        )


def _pool_ids(
    metric_name: str, instance_types: Sequence[InstanceType | str]
) -> dict[str, InstanceType | str]:
    """Metric-math ids of one metric's per-pool series, unique within any nesting
    (``invocations1``, ``invocation5xxerrors1``...): nested expressions share one id space."""
    stem = re.sub(r"[^a-z0-9]", "", metric_name.lower())
    return {f"{stem}{index}": t for index, t in enumerate(instance_types, start=1)}


def namespace_of(metric_name: str) -> str:
    """Instance utilization metrics live in their own namespace, the rest in ``AWS/SageMaker``."""
    return UTILIZATION_NAMESPACE if metric_name in UTILIZATION_METRICS else INVOCATION_NAMESPACE


def pool_samples_id(instance_type: InstanceType | str) -> str:
    """The metric-math id of one pool's concurrency samples: one id per type, so a graph can
    show every pool's count side by side."""
    return "samples_" + re.sub(r"[^a-z0-9]", "_", instance_type.lower())


def build_metric(
    namespace: str,
    metric_name: str,
    dimensions: dict[str, str],
    instance_type: InstanceType | str | None,
    options: MetricOptions,
) -> cloudwatch.Metric:
    """One metric, per pool when ``instance_type`` is given; average over a minute unless
    the options say otherwise."""
    refuse_unknown_options(f"metric {metric_name}", "options", options, MetricOptions)
    if (wrong_case := metric_name_problem(metric_name)) is not None:
        raise ConfigurationError(
            f"metric {metric_name}", [Problem("metric_name", metric_name, wrong_case)]
        )
    if instance_type is not None:
        dimensions = {**dimensions, "InstanceType": instance_type}
    settings: MetricOptions = {"statistic": "Average", "period": ONE_MINUTE}
    settings.update(options)
    return cloudwatch.Metric(
        namespace=namespace, metric_name=metric_name, dimensions_map=dimensions, **settings
    )


def _sum(options: MetricOptions) -> MetricOptions:
    settings: MetricOptions = {"statistic": "Sum"}
    settings.update(options)
    return settings

"""``PoolEndpointAlarms``: the alarms an operator of a pool endpoint wants, each optional."""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from ..core.endpoint_api import IPoolEndpoint
from ..core.endpoint_metrics import ONE_MINUTE
from ..core.fleet_utilization import NAMESPACE
from ..core.token_metrics import TokenMetricNames, TokenQueries
from ..errors import Problems, checked_props
from ..planning.catalog import Catalog
from ..planning.instance_types import InstanceType

#: Period of the fallback alarm's datapoints (and the token alarms' pending period).
_FIVE_MINUTES = Duration.minutes(5)
#: Default p99 inter-token latency that alarms (200 ms: 5 tokens/s per stream).
_INTER_TOKEN_P99 = Duration.millis(200)


class PoolEndpointAlarms(Construct):
    """Error rate, p99 latency, a blind scaling metric, and fleets drifted onto fallback pools.

    :param endpoint: the endpoint to watch: an ``InstancePoolEndpoint``, a ``VllmPoolEndpoint``,
        an ``InferenceComponentEndpoint`` or an import (``InstancePoolEndpoint.from_endpoint_name``
        with ``instance_types=`` for the per-pool alarms) — any ``IPoolEndpoint``.
    :param error_rate_threshold: share of invocations answered with 5xx that alarms (3 of 5
        minutes). ``None`` disables. Default: 0.05.
    :param latency_p99_threshold: p99 model latency that alarms (3 of 5 minutes). ``None``
        disables. Default: 60 seconds.
    :param scaling_metric_missing: alarm when the autoscaling metric has no data (the policy
        is blind). Only when the endpoint autoscales on utilization. Default: ``True``.
    :param fallback_after: alarm when a non-primary pool has held instances this long, so
        operators know the fleet drifted off the preferred hardware. Instances are counted
        from their concurrency samples, so idle ones count (``fleet_utilization``). ``None``
        disables. Default: 1 hour.
    :param ttft_p99_threshold: p99 time to first token that alarms, per pool (PromQL alarm on
        detailed observability's vLLM metrics, see ``token_metrics``; pending 5 minutes). Only
        when the endpoint has detailed observability. ``None`` disables. Default: 2 seconds.
    :param inter_token_p99_threshold: p99 inter-token latency that alarms, per pool (as
        above). ``None`` disables. Default: 200 milliseconds.
    :param token_metric_names: the PromQL names of vLLM's token metrics. Default:
        ``TokenMetricNames()`` (vLLM's own names; see ``token_metrics``).
    :param actions: alarm actions (e.g. an SNS topic) added to every alarm. Default: none.
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint: IPoolEndpoint,
        error_rate_threshold: float | None = 0.05,
        latency_p99_threshold: Duration | None = Duration.minutes(1),
        scaling_metric_missing: bool = True,
        fallback_after: Duration | None = Duration.hours(1),
        ttft_p99_threshold: Duration | None = Duration.seconds(2),
        inter_token_p99_threshold: Duration | None = _INTER_TOKEN_P99,
        token_metric_names: TokenMetricNames | None = None,
        actions: Sequence[cloudwatch.IAlarmAction] = (),
    ) -> None:
        super().__init__(scope, id)
        self.endpoint = endpoint
        self._validate(
            error_rate_threshold,
            fallback_after,
            latency_p99_threshold=latency_p99_threshold,
            ttft_p99_threshold=ttft_p99_threshold,
            inter_token_p99_threshold=inter_token_p99_threshold,
        )
        self.error_rate = (
            self._error_rate(error_rate_threshold) if error_rate_threshold is not None else None
        )
        self.latency_p99 = (
            self._latency_p99(latency_p99_threshold) if latency_p99_threshold is not None else None
        )
        self.scaling_metric_missing = (
            self._scaling_metric_missing() if scaling_metric_missing else None
        )
        self.running_on_fallback: dict[str, cloudwatch.Alarm] = {}
        if fallback_after is not None:
            self._fallback_alarms(fallback_after)
        self.token_latency: dict[str, cloudwatch.PromQLAlarm] = {}
        if endpoint.detailed_observability:
            names = token_metric_names or TokenMetricNames()
            self._token_alarms(names, ttft_p99_threshold, inter_token_p99_threshold)
        for alarm in self.alarms:
            for action in actions:
                alarm.add_alarm_action(action)
        _register(endpoint, self)

    def _validate(
        self,
        error_rate_threshold: float | None,
        fallback_after: Duration | None,
        **thresholds: Duration | None,
    ) -> None:
        """Every problem at once; ``thresholds`` are latencies that must be positive."""
        problems = Problems(lambda: f"PoolEndpointAlarms '{self.node.path}'")
        if error_rate_threshold is not None and not (0 < error_rate_threshold <= 1):
            problems.add("error_rate_threshold", error_rate_threshold, "must be in (0, 1]")
        for prop, value in thresholds.items():
            if value is not None and value.to_seconds(integral=False) <= 0:
                problems.add(prop, value.to_human_string(), "must be positive")
        if fallback_after is not None and fallback_after.to_seconds() < _FIVE_MINUTES.to_seconds():
            problems.add(
                "fallback_after",
                fallback_after.to_human_string(),
                f"must be at least {_FIVE_MINUTES.to_human_string()} (the alarm's period)",
            )
        problems.raise_if_any()

    def _error_rate(self, threshold: float) -> cloudwatch.Alarm:
        endpoint = self.endpoint
        return cloudwatch.Alarm(
            self,
            "ErrorRate",
            metric=cloudwatch.MathExpression(
                expression="IF(FILL(invocations, 0) > 0, FILL(errors, 0) / invocations, 0)",
                using_metrics={
                    "invocations": variant_total(endpoint, "Invocations", "invocations"),
                    "errors": variant_total(endpoint, "Invocation5XXErrors", "5xx errors"),
                },
                label="5xx error rate",
                period=ONE_MINUTE,
            ),
            threshold=threshold,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{endpoint.endpoint_name}: more than {threshold:.0%} of invocations fail with 5xx",
        )

    def _latency_p99(self, threshold: Duration) -> cloudwatch.Alarm:
        # Whole seconds: aws-cdk-lib refuses a fraction (``to_seconds``).
        return cloudwatch.Alarm(
            self,
            "LatencyP99",
            metric=variant_worst_p99(self.endpoint, "ModelLatency"),
            threshold=threshold.to_seconds() * 1_000_000,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{self.endpoint.endpoint_name}: p99 model latency above {threshold.to_human_string()}",
        )

    def _scaling_metric_missing(self) -> cloudwatch.Alarm | None:
        """Only for endpoints that scale on the weighted utilization.

        Watches the series the policy reads: its own ``SampleCount`` queries (taken from
        ``EndpointAutoScaling.fleet_queries``, the same metric, dimensions and statistic), the
        denominator of the utilization. The policy's utilization has no data exactly when
        their filled sum is 0 or absent (``fleet_utilization``): then target tracking has
        "insufficient data" and holds the instance count, and this alarms.
        """
        scaling = self.endpoint.auto_scaling
        queries = scaling.fleet_queries if scaling is not None else None
        if not queries:
            return None
        samples = {
            query.id: cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name=query.metric_name or "",
                dimensions_map=dict(query.dimensions),
                statistic=query.statistic,
                period=ONE_MINUTE,
            )
            for query in queries
            if query.statistic == "SampleCount"
        }
        return cloudwatch.Alarm(
            self,
            "ScalingMetricMissing",
            metric=cloudwatch.MathExpression(
                expression="+".join(f"FILL({id},0)" for id in samples),
                using_metrics=samples,
                label="concurrency samples the scaling policy reads",
                period=ONE_MINUTE,
            ),
            threshold=0,
            evaluation_periods=5,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
            alarm_description=f"{self.endpoint.endpoint_name}: none of the concurrency samples the scaling policy reads for 5 minutes: the policy is blind and holds the instance count",
        )

    def _token_alarms(
        self, names: TokenMetricNames, ttft: Duration | None, inter_token: Duration | None
    ) -> None:
        """p99 TTFT and inter-token latency per pool; each breaching pool is a contributor."""
        queries = TokenQueries(self.endpoint.endpoint_name, self.endpoint.variant_name, names)
        for key, threshold, query, what in (
            ("TtftP99", ttft, queries.ttft(0.99), "time to first token"),
            ("InterTokenP99", inter_token, queries.inter_token(0.99), "inter-token latency"),
        ):
            if threshold is None:
                continue
            limit = threshold.to_seconds(integral=False)
            self.token_latency[key] = cloudwatch.PromQLAlarm(
                self,
                key,
                query=f"{query} > {limit:g}",
                evaluation_interval=ONE_MINUTE,
                pending_period=_FIVE_MINUTES,
                alarm_description=f"{self.endpoint.endpoint_name}: p99 {what} above {threshold.to_human_string()} on a pool for 5 minutes",
            )

    @property
    def alarms(self) -> list[cloudwatch.AlarmBase]:
        found: list[cloudwatch.AlarmBase | None] = [
            self.error_rate,
            self.latency_p99,
            self.scaling_metric_missing,
            *self.running_on_fallback.values(),
            *self.token_latency.values(),
        ]
        return [alarm for alarm in found if alarm is not None]

    def _fallback_alarms(self, after: Duration) -> None:
        types = list(self.endpoint.instance_types)
        if not types:
            return
        primary = types[0]
        periods = max(1, math.ceil(after.to_seconds() / _FIVE_MINUTES.to_seconds()))
        for priority, instance_type in enumerate(types[1:], start=2):
            served = self.endpoint.served_model_name_on(instance_type)
            copy = f", serving {served}" if served else ""
            self.running_on_fallback[instance_type] = cloudwatch.Alarm(
                self,
                f"RunningOnFallback{priority}",
                metric=self.endpoint.metric_pool_instances(
                    instance_type=instance_type, period=_FIVE_MINUTES
                ),
                threshold=0,
                evaluation_periods=periods,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=(
                    f"{self.endpoint.endpoint_name}: fallback pool {priority} ({instance_type}{copy}) "
                    f"has held instances for {after.to_human_string()} instead of {primary}."
                    f"{_price_note(instance_type, primary, self.endpoint.catalog)}"
                ),
            )


#: The ``PoolEndpointAlarms`` made for each endpoint object, in order (``alarms_made_for``).
_MADE: weakref.WeakKeyDictionary[object, list[PoolEndpointAlarms]] = weakref.WeakKeyDictionary()


def _register(endpoint: object, alarms: PoolEndpointAlarms) -> None:
    try:
        _MADE.setdefault(endpoint, []).append(alarms)
    except TypeError:  # an endpoint object that cannot be weakly referenced: not remembered
        pass


def alarms_made_for(endpoint: object) -> list[PoolEndpointAlarms]:
    """Every ``PoolEndpointAlarms`` made so far for ``endpoint`` (``PoolEndpointDashboard``
    shows them without being passed them)."""
    try:
        return list(_MADE.get(endpoint, ()))
    except TypeError:
        return []


def variant_total(endpoint: IPoolEndpoint, metric_name: str, what: str) -> cloudwatch.IMetric:
    """The variant's Sum of ``metric_name`` over its pools' series (``EndpointMetrics``)."""
    return endpoint.metric_variant_total(metric_name, endpoint.instance_types, label=what)


def variant_worst_p99(endpoint: IPoolEndpoint, metric_name: str) -> cloudwatch.IMetric:
    """The worst pool's p99 of ``metric_name`` (``EndpointMetrics.metric_variant_worst``)."""
    return endpoint.metric_variant_worst(
        metric_name, endpoint.instance_types, statistic="p99", label=f"{metric_name} p99"
    )


def _price_note(fallback: InstanceType | str, primary: InstanceType | str, catalog: Catalog) -> str:
    if fallback not in catalog or primary not in catalog:
        return ""
    return (
        f" On-demand ${catalog.get(fallback).price_per_hour:,.2f}/h per {fallback} vs "
        f"${catalog.get(primary).price_per_hour:,.2f}/h per {primary} ({catalog.price_source})."
    )

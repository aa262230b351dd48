"""``EndpointAutoScaling``: instance-count scaling of a pool endpoint's variant.

Real-time endpoints track the fleet's true utilization (``fleet_utilization``): each
pool's concurrency weighed by what its instance type carries. Scale-out is fast and
scale-in slow by default: SageMaker removes fallback instances first when it scales
in, so slow scale-in is what walks the fleet back to the preferred hardware.

Asynchronous endpoints track the request backlog per instance instead, and may scale
to zero: a step policy on ``HasBacklogWithoutCapacity`` brings the first instance back. On
several instance pools the backlog is weighed by each pool's capacity
(``fleet_utilization.weighted_backlog_queries``): an instance of a smaller fallback type
counts as the share of a first-pool instance it sustains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, Required, TypedDict

from aws_cdk import CfnResource, Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from ..core.async_inference import AsyncInference
from ..core.fleet_utilization import (
    MAX_ALARM_METRICS,
    MAX_WEIGHTED_POOLS,
    METRICS_PER_POOL,
    NAMESPACE,
    MetricQuery,
    PoolCapacity,
    as_math_expression,
    weighted_backlog_queries,
)
from ..errors import Problems, checked_props
from .instance_pool import InstancePool


class ScalableEndpoint(Protocol):
    """What auto scaling reads of an endpoint (``InstancePoolEndpoint`` provides it)."""

    @property
    def endpoint_name(self) -> str: ...

    @property
    def variant_name(self) -> str: ...

    @property
    def async_inference(self) -> AsyncInference | None: ...

    @property
    def pools(self) -> Sequence[InstancePool]: ...

    @property
    def cfn_endpoint(self) -> CfnResource: ...

    @property
    def per_pool_dimension(self) -> bool: ...

    def pool_capacities(self) -> list[float | None]: ...

    def fleet_utilization_queries(self) -> list[MetricQuery]: ...


SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"


class AutoScalingOptions(TypedDict, total=False):
    """``EndpointAutoScaling``'s options as ``auto_scale`` keywords (documented there)."""

    min_capacity: int
    max_capacity: Required[int]
    target_utilization: float
    target_backlog_per_instance: float
    scale_out_cooldown: Duration
    scale_in_cooldown: Duration


class EndpointAutoScaling(Construct):
    """Scalable target plus the scaling policies for one ``InstancePoolEndpoint``.

    :param endpoint: the endpoint whose variant scales.
    :param min_capacity: fewest instances; at least 1 for real-time endpoints, 0 allowed for
        asynchronous ones. Default: 1.
    :param max_capacity: most instances.
    :param target_utilization: fleet utilization to hold, in (0, 1]. Default: 0.7.
    :param target_backlog_per_instance: queued requests per instance to hold (asynchronous
        endpoints). Default: 5.
    :param scale_out_cooldown: wait after a scale-out. Default: 1 minute.
    :param scale_in_cooldown: wait after a scale-in. Default: 15 minutes.
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint: ScalableEndpoint,
        min_capacity: int = 1,
        max_capacity: int,
        target_utilization: float = 0.7,
        target_backlog_per_instance: float = 5.0,
        scale_out_cooldown: Duration = Duration.minutes(1),
        scale_in_cooldown: Duration = Duration.minutes(15),
    ) -> None:
        super().__init__(scope, id)
        self.endpoint = endpoint
        self.target_utilization = target_utilization
        is_async = endpoint.async_inference is not None
        capacities = endpoint.pool_capacities()
        problems = Problems(lambda: f"EndpointAutoScaling '{self.node.path}'")
        _check_capacity(problems, min_capacity, max_capacity, is_async)
        _check_targets(problems, target_utilization, target_backlog_per_instance)
        self._check_pools(problems, is_async, capacities)
        problems.raise_if_any()
        # Whole seconds, what the policy is written with.
        self._cooldowns = (
            int(scale_out_cooldown.to_seconds()),
            int(scale_in_cooldown.to_seconds()),
        )
        self.scalable_target = self._scalable_target(min_capacity, max_capacity)
        #: The weighted utilization's queries (real-time endpoints), else None.
        self.fleet_queries: list[MetricQuery] | None = None
        #: The weighted backlog's queries (asynchronous endpoints on several pools), else None.
        self.backlog_queries: list[MetricQuery] | None = None
        if is_async:
            self.cfn_policy = self._backlog_policy(target_backlog_per_instance, capacities)
            if min_capacity == 0:
                self._scale_out_from_zero()
        else:
            self.fleet_queries = endpoint.fleet_utilization_queries()
            self.cfn_policy = self._target_tracking(
                "WeightedUtilization",
                "weighted-utilization",
                target_utilization,
                self.fleet_queries,
            )

    @property
    def fleet_utilization(self) -> cloudwatch.IMetric | None:
        """The tracked utilization as a CloudWatch metric (for alarms and graphs); ``None``
        when the endpoint scales on its backlog."""
        return as_math_expression(self.fleet_queries) if self.fleet_queries else None

    def _scalable_target(
        self, min_capacity: int, max_capacity: int
    ) -> appscaling.CfnScalableTarget:
        """The L1 without ``RoleARN``: Application Auto Scaling uses its SageMaker service-linked
        role; the L2 would add a role of its own."""
        endpoint = self.endpoint
        target = appscaling.CfnScalableTarget(
            self,
            "Target",
            service_namespace="sagemaker",
            resource_id=f"endpoint/{endpoint.endpoint_name}/variant/{endpoint.variant_name}",
            scalable_dimension=SCALABLE_DIMENSION,
            min_capacity=min_capacity,
            max_capacity=max_capacity,
        )
        target.add_resource_dependency(endpoint.cfn_endpoint)
        return target

    def _check_pools(
        self, problems: Problems, is_async: bool, capacities: list[float | None]
    ) -> None:
        """At most five weighted pools, and what one instance of each sustains where weighed."""
        pools = self.endpoint.pools
        if not is_async and len(pools) > MAX_WEIGHTED_POOLS:
            problems.add(
                "endpoint.pools",
                [pool.instance_type for pool in pools],
                f"weighted auto scaling reads {METRICS_PER_POOL} metrics per pool and a CloudWatch alarm at most {MAX_ALARM_METRICS}: at most {MAX_WEIGHTED_POOLS} pools",
            )
        if is_async and not self._weighs_backlog():
            return
        why = (
            "the backlog of several pools is weighed by what one instance of each sustains"
            if is_async
            else "auto scaling needs what one instance sustains"
        )
        for index, (pool, capacity) in enumerate(zip(pools, capacities, strict=True)):
            if capacity is None:
                problems.add(
                    f"pools[{index}].max_concurrency",
                    None,
                    f"{pool.instance_type}: {why}; set max_concurrency or give the pool's model a sizing",
                )

    def _target_tracking(
        self,
        id: str,
        suffix: str,
        target: float,
        queries: list[MetricQuery] | None,
        metric: appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty | None = None,
    ) -> appscaling.CfnScalingPolicy:
        """Target tracking on ``queries`` (metric math), or on ``metric`` as given."""
        if queries is not None:
            metric = appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty(
                metrics=[_to_cfn(query) for query in queries]
            )
        out_cooldown, in_cooldown = self._cooldowns
        return appscaling.CfnScalingPolicy(
            self,
            id,
            policy_name=f"{self.endpoint.endpoint_name}-{suffix}",
            policy_type="TargetTrackingScaling",
            scaling_target_id=self.scalable_target.ref,
            target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=target,
                scale_out_cooldown=out_cooldown,
                scale_in_cooldown=in_cooldown,
                customized_metric_specification=metric,
            ),
        )

    def _weighs_backlog(self) -> bool:
        """Several pools whose series carry ``InstanceType``: the backlog is weighed."""
        return self.endpoint.per_pool_dimension and len(self.endpoint.pools) > 1

    def _backlog_policy(
        self, backlog: float, capacities: list[float | None]
    ) -> appscaling.CfnScalingPolicy:
        """Target tracking on the backlog per instance; on several pools, per instance of the
        first pool's size (``weighted_backlog_queries``); on one, AWS's metric as it is."""
        endpoint = self.endpoint
        if self._weighs_backlog():
            self.backlog_queries = weighted_backlog_queries(
                endpoint.endpoint_name,
                endpoint.variant_name,
                [
                    PoolCapacity(pool.instance_type, float(capacity or 0))
                    for pool, capacity in zip(endpoint.pools, capacities, strict=True)
                ],
            )
        own = appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty(
            metric_name="ApproximateBacklogSizePerInstance",
            namespace=NAMESPACE,
            statistic="Average",
            dimensions=[
                appscaling.CfnScalingPolicy.MetricDimensionProperty(
                    name="EndpointName", value=endpoint.endpoint_name
                )
            ],
        )
        return self._target_tracking(
            "BacklogPerInstance", "backlog-per-instance", backlog, self.backlog_queries, own
        )

    def _scale_out_from_zero(self) -> None:
        """At zero instances the backlog-per-instance metric is empty; this brings the first back."""
        name = self.endpoint.endpoint_name
        policy = appscaling.CfnScalingPolicy(
            self,
            "ScaleOutFromZero",
            policy_name=f"{name}-scale-out-from-zero",
            policy_type="StepScaling",
            scaling_target_id=self.scalable_target.ref,
            step_scaling_policy_configuration=appscaling.CfnScalingPolicy.StepScalingPolicyConfigurationProperty(
                adjustment_type="ChangeInCapacity",
                cooldown=300,
                metric_aggregation_type="Average",
                step_adjustments=[
                    appscaling.CfnScalingPolicy.StepAdjustmentProperty(
                        metric_interval_lower_bound=0, scaling_adjustment=1
                    )
                ],
            ),
        )
        alarm = cloudwatch.Alarm(
            self,
            "BacklogWithoutCapacity",
            metric=cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name="HasBacklogWithoutCapacity",
                dimensions_map={"EndpointName": name},
                statistic="Average",
                period=Duration.minutes(1),
            ),
            threshold=0.5,
            evaluation_periods=2,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{name}: requests wait while no instance runs; adds the first instance",
        )
        cfn_alarm = alarm.node.default_child
        cfn_alarm.alarm_actions = [policy.ref]  # type: ignore[union-attr]
        self.scale_out_from_zero = policy


def _check_capacity(problems: Problems, low: int, high: int, is_async: bool) -> None:
    lowest = 0 if is_async else 1
    if low < lowest:
        kind = "asynchronous" if is_async else "real-time"
        problems.add("min_capacity", low, f"must be at least {lowest} for a {kind} endpoint")
    if high < max(low, 1):
        problems.add("max_capacity", high, f"must be at least 1 and at least min_capacity ({low})")


def _check_targets(problems: Problems, target: float, backlog: float) -> None:
    if not (isinstance(target, (int, float)) and math.isfinite(target) and 0 < target <= 1):
        problems.add("target_utilization", target, "must be in (0, 1]")
    if not (math.isfinite(backlog) and backlog > 0):
        problems.add("target_backlog_per_instance", backlog, "must be a positive number")


def _to_cfn(
    query: MetricQuery,
) -> appscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty:
    if query.expression is not None:
        # No label: it names the series on a graph (the dashboard's), nothing in a policy.
        return appscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty(
            id=query.id, expression=query.expression, return_data=query.return_data
        )
    return appscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty(
        id=query.id,
        return_data=False,
        metric_stat=appscaling.CfnScalingPolicy.TargetTrackingMetricStatProperty(
            stat=query.statistic,
            metric=appscaling.CfnScalingPolicy.TargetTrackingMetricProperty(
                metric_name=query.metric_name,
                namespace=query.namespace,
                dimensions=[
                    appscaling.CfnScalingPolicy.TargetTrackingMetricDimensionProperty(
                        name=n, value=v
                    )
                    for n, v in query.dimensions
                ],
            ),
        ),
    )

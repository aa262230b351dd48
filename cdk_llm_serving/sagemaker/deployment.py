"""How an endpoint rolls out a new configuration: blue/green or rolling, with alarm rollback."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from aws_cdk import Duration
from aws_cdk import aws_sagemaker as sagemaker

from .._cdk.durations import Span
from .._cdk.service_limits import limits
from .._cdk.validation import check_at_least, check_range, whole_seconds
from ..errors import Problems, check_literal

CapacityType = Literal["INSTANCE_COUNT", "CAPACITY_PERCENT"]
ShiftType = Literal["ALL_AT_ONCE", "CANARY", "LINEAR"]


#: This module's ``Duration`` defaults, in plain seconds (``Span.of_seconds``).
_FIVE_MINUTES = Span.of_seconds(300)
_TEN_MINUTES = Span.of_seconds(600)
_TWO_HOURS = Span.of_seconds(7200)
_THREE_HOURS = Span.of_seconds(10800)


def _seconds(value: Duration) -> int:
    """Whole seconds: a default of this module's without the kernel, else aws-cdk-lib's."""
    if not isinstance(value, Duration):  # an int passes through, as ``seconds_of`` lets it
        return value
    return whole_seconds(value, _FIVE_MINUTES, _TEN_MINUTES, _TWO_HOURS, _THREE_HOURS)


@dataclass(frozen=True)
class CapacitySize:
    """A share of the fleet: a number of instances or a percentage."""

    type: CapacityType
    value: int

    @classmethod
    def instances(cls, count: int) -> CapacitySize:
        return cls("INSTANCE_COUNT", count)

    @classmethod
    def percent(cls, percent: int) -> CapacitySize:
        return cls("CAPACITY_PERCENT", percent)

    def validate(self, problems: Problems, prop: str) -> None:
        check_literal(problems, f"{prop}.type", self.type, CapacityType, "capacity types")
        check_at_least(problems, prop, self.value, limits("CapacitySize", "Value").minimum or 1)
        if self.type == "CAPACITY_PERCENT" and self.value > 100:
            problems.add(prop, self.value, "a percentage must be at most 100")

    def to_cfn(self) -> sagemaker.CfnEndpoint.CapacitySizeProperty:
        return sagemaker.CfnEndpoint.CapacitySizeProperty(type=self.type, value=self.value)


@dataclass(frozen=True)
class TrafficShift:
    """How blue/green traffic moves to the new fleet; ``wait`` is the bake time between steps."""

    type: ShiftType
    wait: Duration
    step: CapacitySize | None = None

    @classmethod
    def all_at_once(cls, bake: Duration = _TEN_MINUTES.duration) -> TrafficShift:
        return cls("ALL_AT_ONCE", bake)

    @classmethod
    def canary(cls, size: CapacitySize, wait: Duration = _TEN_MINUTES.duration) -> TrafficShift:
        return cls("CANARY", wait, size)

    @classmethod
    def linear(cls, step: CapacitySize, wait: Duration = _FIVE_MINUTES.duration) -> TrafficShift:
        return cls("LINEAR", wait, step)

    def validate(self, problems: Problems, prop: str) -> None:
        check_literal(problems, f"{prop}.type", self.type, ShiftType, "traffic shifts")
        check_range(
            problems,
            f"{prop}.wait",
            _seconds(self.wait),
            limits("TrafficRoutingConfig", "WaitIntervalInSeconds"),
            "seconds",
        )
        if self.step is not None:
            self.step.validate(problems, f"{prop}.step")

    def to_cfn(self) -> sagemaker.CfnEndpoint.TrafficRoutingConfigProperty:
        step = self.step.to_cfn() if self.step else None
        return sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
            type=self.type,
            wait_interval_in_seconds=_seconds(self.wait),
            canary_size=step if self.type == "CANARY" else None,
            linear_step_size=step if self.type == "LINEAR" else None,
        )


@dataclass(frozen=True)
class BlueGreenDeployment:
    """Provision a whole new fleet, shift traffic, bake, then retire the old one.

    Needs capacity for both fleets during the update; rolls back when any rollback
    alarm fires while traffic shifts or bakes.

    :param traffic: how traffic shifts. Default: all at once, then a 10-minute bake.
    :param termination_wait: how long the old fleet stays after the shift. Default: 5 minutes.
    :param maximum_execution_timeout: the longest the whole update may take. Default: 2 hours
        (GPU capacity and multi-GB weights make updates slow).
    """

    traffic: TrafficShift = field(default_factory=TrafficShift.all_at_once)
    termination_wait: Duration = _FIVE_MINUTES.duration
    maximum_execution_timeout: Duration = _TWO_HOURS.duration

    def validate(self, problems: Problems, prop: str) -> None:
        self.traffic.validate(problems, f"{prop}.traffic")
        check_range(
            problems,
            f"{prop}.termination_wait",
            _seconds(self.termination_wait),
            limits("BlueGreenUpdatePolicy", "TerminationWaitInSeconds"),
            "seconds",
        )
        check_range(
            problems,
            f"{prop}.maximum_execution_timeout",
            _seconds(self.maximum_execution_timeout),
            limits("BlueGreenUpdatePolicy", "MaximumExecutionTimeoutInSeconds"),
            "seconds",
        )

    def to_cfn(self, alarm_names: list[str]) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                traffic_routing_configuration=self.traffic.to_cfn(),
                termination_wait_in_seconds=_seconds(self.termination_wait),
                maximum_execution_timeout_in_seconds=_seconds(self.maximum_execution_timeout),
            ),
            auto_rollback_configuration=_rollback(alarm_names),
        )


@dataclass(frozen=True)
class RollingDeployment:
    """Replace the fleet batch by batch: needs only one batch of spare capacity.

    :param maximum_batch_size: instances replaced per batch. Default: 1 instance.
    :param wait: bake time after each batch. Default: 5 minutes.
    :param maximum_execution_timeout: the longest the whole update may take. Default: 3 hours.
    :param rollback_maximum_batch_size: batch size when rolling back. Default: SageMaker's
        (the whole fleet at once).
    """

    maximum_batch_size: CapacitySize = field(default_factory=lambda: CapacitySize.instances(1))
    wait: Duration = _FIVE_MINUTES.duration
    maximum_execution_timeout: Duration = _THREE_HOURS.duration
    rollback_maximum_batch_size: CapacitySize | None = None

    def validate(self, problems: Problems, prop: str) -> None:
        self.maximum_batch_size.validate(problems, f"{prop}.maximum_batch_size")
        batch = self.maximum_batch_size
        # "Value must be between 5% to 50% of the variant's total instance count" (botocore
        # ``sagemaker`` ``RollingUpdatePolicy.MaximumBatchSize``); a count is checked against
        # the fleet by the endpoint (``batch_outside_fleet_share``), autoscaling may move it.
        if batch.type == "CAPACITY_PERCENT" and not (
            ROLLING_BATCH_PERCENT[0] <= batch.value <= ROLLING_BATCH_PERCENT[1]
        ):
            problems.add(
                f"{prop}.maximum_batch_size",
                batch.value,
                f"a rolling batch must be {ROLLING_BATCH_PERCENT[0]}-{ROLLING_BATCH_PERCENT[1]}% of the variant's instances",
            )
        if self.rollback_maximum_batch_size is not None:
            self.rollback_maximum_batch_size.validate(
                problems, f"{prop}.rollback_maximum_batch_size"
            )
        check_range(
            problems,
            f"{prop}.wait",
            _seconds(self.wait),
            limits("RollingUpdatePolicy", "WaitIntervalInSeconds"),
            "seconds",
        )
        check_range(
            problems,
            f"{prop}.maximum_execution_timeout",
            _seconds(self.maximum_execution_timeout),
            limits("RollingUpdatePolicy", "MaximumExecutionTimeoutInSeconds"),
            "seconds",
        )

    def to_cfn(self, alarm_names: list[str]) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            rolling_update_policy=sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
                maximum_batch_size=self.maximum_batch_size.to_cfn(),
                wait_interval_in_seconds=_seconds(self.wait),
                maximum_execution_timeout_in_seconds=_seconds(self.maximum_execution_timeout),
                rollback_maximum_batch_size=(
                    self.rollback_maximum_batch_size.to_cfn()
                    if self.rollback_maximum_batch_size
                    else None
                ),
            ),
            auto_rollback_configuration=_rollback(alarm_names),
        )


EndpointDeployment = BlueGreenDeployment | RollingDeployment

#: A rolling batch's share of the variant's instances, in percent (botocore, above).
ROLLING_BATCH_PERCENT = (5, 50)


def batch_outside_fleet_share(deployment: EndpointDeployment, instances: int) -> bool:
    """Whether a rolling batch of a count of instances is outside 5-50 % of ``instances``."""
    if not isinstance(deployment, RollingDeployment):
        return False
    batch = deployment.maximum_batch_size
    if batch.type != "INSTANCE_COUNT":
        return False
    low, high = ROLLING_BATCH_PERCENT
    return not (low * instances <= 100 * batch.value <= high * instances)


def rolling_for_scarce_gpus(instances: int) -> RollingDeployment | None:
    """The default update of a GPU pool endpoint: rolling, one small batch at a time.

    AWS: rolling deployments clean up old instances after each shift, "reducing the amount of
    additional instances needed to update your endpoint. This is useful especially for
    accelerated instances that are in high demand"; blue/green provisions a whole second
    fleet (https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-rolling.html).
    The batch is the fewest instances within AWS's 5-50 % of the fleet, and a rollback moves
    as few (not the whole old fleet at once, which needs the capacity blue/green needs).
    ``None`` for a single instance: no batch is within 5-50 % of one, so it stays blue/green.
    """
    if instances < 2:
        return None
    batch = CapacitySize.instances(max(1, -(-instances * ROLLING_BATCH_PERCENT[0] // 100)))
    return RollingDeployment(maximum_batch_size=batch, rollback_maximum_batch_size=batch)


def _rollback(alarm_names: list[str]) -> sagemaker.CfnEndpoint.AutoRollbackConfigProperty | None:
    if not alarm_names:
        return None
    return sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
        alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=name) for name in alarm_names]
    )

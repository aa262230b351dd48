"""How an endpoint rolls out a new configuration: blue/green or rolling, with alarm rollback."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from aws_cdk import Duration
from aws_cdk import aws_sagemaker as sagemaker

from .._cdk.service_limits import limits
from .._cdk.validation import check_at_least, check_range, is_unresolved, seconds_of
from ..errors import Problems, check_literal

CapacityType = Literal["INSTANCE_COUNT", "CAPACITY_PERCENT"]
ShiftType = Literal["ALL_AT_ONCE", "CANARY", "LINEAR"]


_FIVE_MINUTES = Duration.minutes(5)
_TEN_MINUTES = Duration.minutes(10)
_TWO_HOURS = Duration.hours(2)
_THREE_HOURS = Duration.hours(3)


def _seconds(value: Duration) -> int:
    """Whole seconds, as the API takes them (``seconds_of``; an int passes through)."""
    return seconds_of(value) or 0


#: The API member of each duration field (botocore's bounds, in whole seconds).
_MEMBERS = {
    "wait": "WaitIntervalInSeconds",
    "termination_wait": "TerminationWaitInSeconds",
    "maximum_execution_timeout": "MaximumExecutionTimeoutInSeconds",
}


def _check_durations(
    problems: Problems, prop: str, value: object, shape: str, *fields: str
) -> None:
    """Each of ``value``'s duration ``fields`` within the bounds of ``shape``'s member."""
    for name in fields:
        seconds = _seconds(getattr(value, name))
        check_range(problems, f"{prop}.{name}", seconds, limits(shape, _MEMBERS[name]), "seconds")


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
    def all_at_once(cls, bake: Duration = _TEN_MINUTES) -> TrafficShift:
        return cls("ALL_AT_ONCE", bake)

    @classmethod
    def canary(cls, size: CapacitySize, wait: Duration = _TEN_MINUTES) -> TrafficShift:
        return cls("CANARY", wait, size)

    @classmethod
    def linear(cls, step: CapacitySize, wait: Duration = _FIVE_MINUTES) -> TrafficShift:
        return cls("LINEAR", wait, step)

    def validate(self, problems: Problems, prop: str) -> None:
        check_literal(problems, f"{prop}.type", self.type, ShiftType, "traffic shifts")
        _check_durations(problems, prop, self, "TrafficRoutingConfig", "wait")
        if self.type in _SHIFT_SHARE and self.step is None:
            problems.add(
                f"{prop}.step",
                None,
                f"a {self.type} shift needs its step size (TrafficShift.{self.type.lower()}(...))",
            )
        elif self.type not in _SHIFT_SHARE and self.step is not None:
            problems.add(f"{prop}.step", self.step.value, "an ALL_AT_ONCE shift has no step size")
        if self.step is not None:
            self.step.validate(problems, f"{prop}.step")
            share = _SHIFT_SHARE.get(self.type)
            if share is not None:
                _check_percent_share(problems, f"{prop}.step", self.step, share, self.type)

    def steps(self, instances: int) -> int:
        """How many times traffic moves, each followed by ``wait`` (docs/design/pool-endpoints.md,
        "Deployments")."""
        if self.step is None or self.type == "ALL_AT_ONCE":
            return 1
        if self.type == "CANARY":
            return 2
        share = self.step.value if self.step.type == "CAPACITY_PERCENT" else None
        if share is None:
            return -(-max(instances, 1) // self.step.value)
        return -(-100 // share)

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
    termination_wait: Duration = _FIVE_MINUTES
    maximum_execution_timeout: Duration = _TWO_HOURS

    def validate(self, problems: Problems, prop: str) -> None:
        self.traffic.validate(problems, f"{prop}.traffic")
        _check_durations(
            problems,
            prop,
            self,
            "BlueGreenUpdatePolicy",
            "termination_wait",
            "maximum_execution_timeout",
        )
        _check_timeout_covers_waits(
            problems, prop, self.maximum_execution_timeout, self.waiting_seconds(1)
        )

    def waiting_seconds(self, instances: int) -> int:
        """The update's own waits at ``instances``: each shift's bake, then the termination wait."""
        return self.traffic.steps(instances) * _seconds(self.traffic.wait) + _seconds(
            self.termination_wait
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
    wait: Duration = _FIVE_MINUTES
    maximum_execution_timeout: Duration = _THREE_HOURS
    rollback_maximum_batch_size: CapacitySize | None = None

    def validate(self, problems: Problems, prop: str) -> None:
        self.maximum_batch_size.validate(problems, f"{prop}.maximum_batch_size")
        batch = self.maximum_batch_size
        # A percentage here; a count against the fleet (``check_against_fleet``).
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
        _check_durations(
            problems, prop, self, "RollingUpdatePolicy", "wait", "maximum_execution_timeout"
        )
        _check_timeout_covers_waits(
            problems, prop, self.maximum_execution_timeout, self.waiting_seconds(1)
        )

    def waiting_seconds(self, instances: int) -> int:
        """The update's own waits at ``instances``: one bake per batch."""
        batch = self.maximum_batch_size
        per_batch = (
            batch.value
            if batch.type == "INSTANCE_COUNT"
            else max(1, max(instances, 1) * batch.value // 100)
        )
        return -(-max(instances, 1) // per_batch) * _seconds(self.wait)

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

#: The share of the variant's instances one step may take, in percent, as botocore's
#: ``sagemaker`` model documents them (a test reads its sentences).
ROLLING_BATCH_PERCENT = (5, 50)
CANARY_PERCENT = (1, 50)
LINEAR_STEP_PERCENT = (10, 50)
_SHIFT_SHARE = {"CANARY": CANARY_PERCENT, "LINEAR": LINEAR_STEP_PERCENT}


def _check_percent_share(
    problems: Problems, prop: str, size: CapacitySize, share: tuple[int, int], what: str
) -> None:
    if size.type == "CAPACITY_PERCENT" and not share[0] <= size.value <= share[1]:
        problems.add(
            prop,
            size.value,
            f"a {what.lower()} step must be {share[0]}-{share[1]}% of the variant's instances",
        )


def _check_timeout_covers_waits(
    problems: Problems, prop: str, timeout: Duration, waits: int
) -> None:
    """An update that waits longer than it may run times out and rolls back, every time
    (botocore ``BlueGreenUpdatePolicy.MaximumExecutionTimeoutInSeconds``)."""
    seconds = _seconds(timeout)
    if is_unresolved(seconds) or seconds > waits:
        return
    problems.add(
        f"{prop}.maximum_execution_timeout",
        seconds,
        f"must be longer than the update's own waits ({waits} s of bake and termination wait); "
        "raise it or shorten the waits",
    )


def _steps(deployment: EndpointDeployment) -> list[tuple[str, CapacitySize, tuple[int, int]]]:
    """Each step size of ``deployment`` with the share of the fleet it may take."""
    if isinstance(deployment, RollingDeployment):
        return [("maximum_batch_size", deployment.maximum_batch_size, ROLLING_BATCH_PERCENT)]
    step, share = deployment.traffic.step, _SHIFT_SHARE.get(deployment.traffic.type)
    return [] if step is None or share is None else [("traffic.step", step, share)]


def outside_fleet_share(deployment: EndpointDeployment, instances: int) -> list[str]:
    """The step sizes, given as instance counts, outside AWS's share of ``instances``."""
    out = []
    for prop, size, (low, high) in _steps(deployment):
        if size.type == "INSTANCE_COUNT" and not (
            low * instances <= 100 * size.value <= high * instances
        ):
            out.append(f"{prop} of {size.value} instance(s) (AWS allows {low}-{high}%)")
    return out


def check_against_fleet(
    problems: Problems, prop: str, deployment: EndpointDeployment, instances: int
) -> None:
    """What SageMaker refuses at every update of a fleet of ``instances``: a step of the whole
    fleet or more (no count makes it a share AWS allows), and waits longer than the timeout."""
    for step_prop, size, _share in _steps(deployment):
        if size.type == "INSTANCE_COUNT" and size.value >= instances > 0:
            problems.add(
                f"{prop}.{step_prop}",
                size.value,
                f"a step of the whole fleet ({instances} instance(s)) is refused at update time; "
                "give a smaller count or a percentage",
            )
    waits = deployment.waiting_seconds(instances)
    if waits != deployment.waiting_seconds(1):  # at one instance, ``validate`` checked it
        _check_timeout_covers_waits(problems, prop, deployment.maximum_execution_timeout, waits)


def rolling_for_scarce_gpus(instances: int) -> RollingDeployment | None:
    """The default update of a GPU pool endpoint: rolling, the fewest instances within AWS's
    5-50 % of the fleet per batch and per rollback batch; ``None`` for one instance, which stays
    blue/green (docs/design/pool-endpoints.md, "Deployments")."""
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

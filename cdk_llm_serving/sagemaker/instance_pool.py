"""``InstancePool``: one entry of an endpoint variant's ordered instance-type list."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .._cdk.validation import is_unresolved
from ..errors import Problems, check_sequence
from ..planning.instance_types import InstanceType
from .serving_model import ServingModel


def hosting_instance_type(
    problems: Problems, prop: str, value: object
) -> InstanceType | str | None:
    """``value`` as an instance type an endpoint variant takes, or ``None`` with the problem added.

    The one policy of the SageMaker path: the name must be one ``InstanceType`` knows (closest
    matches otherwise) and one SageMaker hosting takes (botocore's production-variant enum).
    A type botocore offers but the planner's catalog does not record is accepted; what needs
    the catalog's facts (fit, GPUs, prices) is then left unchecked, with a warning where the
    model declares its sizing (``cdk-llm-serving:poolNotInCatalog``). A deploy-time token
    passes unchecked.
    """
    if isinstance(value, str) and not isinstance(value, InstanceType) and is_unresolved(value):
        return value
    parsed = InstanceType.parse(problems, prop, value)
    return parsed if parsed is not None and parsed.check_hosting(problems, prop) else None


def parse_instance_types(
    problems: Problems, prop: str, values: object
) -> tuple[InstanceType | str, ...]:
    """A list of hosting instance types (``prop[i]`` names a bad one); the good ones, in order."""
    if not check_sequence(problems, prop, values, str, "an instance type"):
        return ()
    assert isinstance(values, Sequence)
    parsed = [
        hosting_instance_type(problems, f"{prop}[{index}]", value)
        for index, value in enumerate(values)
    ]
    return tuple(value for value in parsed if value is not None)


@dataclass(frozen=True, eq=False)
class InstancePool:
    """An instance type the variant may run on, optionally serving another model.

    Priority is the pool's position in the endpoint's ``pools`` list (first = tried
    first). ``model`` becomes the pool's ``ModelNameOverride``: the way a smaller
    fallback type serves, say, a 4-bit copy of the model.

    :param instance_type: a SageMaker instance type, e.g. ``InstanceType.ML_P5_48XLARGE`` or
        ``"ml.p5.48xlarge"`` (converted to an ``InstanceType``).
    :param model: the model this pool serves. Default: the endpoint's model.
    :param max_concurrency: concurrent requests one instance of this type sustains (measure
        it), the weight this pool gets in autoscaling. Default: derived from the planner when
        the pool's model declares ``sizing`` (see ``InstancePoolEndpoint.pool_capacities``);
        required for autoscaling otherwise.
    """

    instance_type: InstanceType | str
    model: ServingModel | None = None
    max_concurrency: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "instance_type", InstanceType.coerce(self.instance_type))

    def validate(self, problems: Problems, prop: str) -> None:
        """The instance type is a hosting type (``hosting_instance_type``); the capacity is a
        positive number."""
        hosting_instance_type(problems, f"{prop}.instance_type", self.instance_type)
        capacity = self.max_concurrency
        if capacity is not None and not (math.isfinite(capacity) and capacity > 0):
            problems.add(
                f"{prop}.max_concurrency",
                capacity,
                "must be a positive, finite number of concurrent requests",
            )

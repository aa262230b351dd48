"""``InstancePool``: one entry of an endpoint variant's ordered instance-type list."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._cdk.service_limits import production_variant_instance_types
from .._cdk.validation import check_one_of
from ..errors import Problems
from .serving_model import ServingModel


@dataclass(frozen=True, eq=False)
class InstancePool:
    """An instance type the variant may run on, optionally serving another model.

    Priority is the pool's position in the endpoint's ``pools`` list (first = tried
    first). ``model`` becomes the pool's ``ModelNameOverride``: the way a smaller
    fallback type serves, say, a 4-bit copy of the model.

    :param instance_type: a SageMaker instance type, e.g. ``ml.p5.48xlarge``.
    :param model: the model this pool serves. Default: the endpoint's model.
    :param max_concurrency: concurrent requests one instance of this type sustains (measure
        it), the weight this pool gets in autoscaling. Default: derived from the planner when
        the pool's model declares ``sizing`` (see ``InstancePoolEndpoint.pool_capacities``);
        required for autoscaling otherwise.
    """

    instance_type: str
    model: ServingModel | None = None
    max_concurrency: float | None = None

    def validate(self, problems: Problems, prop: str) -> None:
        """The instance type is a production-variant type; the capacity is a positive number."""
        check_one_of(
            problems,
            f"{prop}.instance_type",
            self.instance_type,
            production_variant_instance_types(),
            "SageMaker production-variant instance types",
        )
        capacity = self.max_concurrency
        if capacity is not None and not (math.isfinite(capacity) and capacity > 0):
            problems.add(
                f"{prop}.max_concurrency",
                capacity,
                "must be a positive, finite number of concurrent requests",
            )

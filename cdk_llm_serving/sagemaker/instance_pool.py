"""``InstancePool``: one entry of an endpoint variant's ordered instance-type list."""

from __future__ import annotations

from dataclasses import dataclass

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

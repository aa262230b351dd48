"""What the SageMaker path knows of an instance type's hardware (one lookup for every check)."""

from __future__ import annotations

from ..planning.catalog import Catalog, InstanceSpec
from ..planning.instance_types import InstanceType


def instance_spec(instance_type: InstanceType | str, catalog: Catalog) -> InstanceSpec | None:
    """What is known of ``instance_type``'s hardware: the endpoint's catalog's entry (a custom
    catalog may add types), else the default catalog's (``InstanceType.spec``); ``None`` for a
    type neither records (its GPU checks are left out)."""
    if instance_type in catalog:
        return catalog.get(instance_type)
    return instance_type.spec if isinstance(instance_type, InstanceType) else None

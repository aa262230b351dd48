"""Which instance types carry local NVMe storage (a fact SageMaker's API rules depend on)."""

from __future__ import annotations

import functools
import json
from importlib import resources


@functools.cache
def _local_storage_families() -> frozenset[str]:
    text = resources.files(__package__).joinpath("data/instance_storage.json").read_text()
    return frozenset(json.loads(text)["local_storage_families"])


def instance_family(instance_type: str) -> str:
    """``ml.p6-b200.48xlarge`` -> ``p6-b200``."""
    parts = instance_type.split(".")
    return parts[1] if len(parts) == 3 else instance_type


def has_local_storage(instance_type: str) -> bool:
    return instance_family(instance_type) in _local_storage_families()

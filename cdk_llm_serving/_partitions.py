"""AWS partitions and their region names, from botocore's ``data/partitions.json`` (CDK-free);
a region newer than botocore maps by the partition's ``regionRegex``, as botocore does.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import botocore


@functools.cache
def _partitions() -> tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...]:
    """(partition id, region pattern, known regions), in botocore's order."""
    path = Path(botocore.__file__).parent / "data" / "partitions.json"
    data = json.loads(path.read_text())
    return tuple(
        (
            partition["id"],
            re.compile(partition["regionRegex"]),
            tuple(name for name in partition.get("regions", {}) if not name.endswith("-global")),
        )
        for partition in data["partitions"]
    )


def partition_of_region(region: str) -> str | None:
    """The partition (``aws``, ``aws-cn``, ``aws-us-gov``, ...) of ``region``; ``None`` for a
    name that is no region. A known region decides first, then the patterns."""
    for partition, _, regions in _partitions():
        if region in regions:
            return partition
    for partition, pattern, _ in _partitions():
        if pattern.fullmatch(region):
            return partition
    return None


def known_regions() -> tuple[str, ...]:
    """Every region botocore lists, sorted."""
    return tuple(sorted({name for _, _, names in _partitions() for name in names}))

"""``TieredStorage``: the HyperPod cluster's ``TieredStorageConfig`` (managed tiered storage).

With ``Mode: Enable`` HyperPod runs a memory daemon on every node of the cluster, GPU and system
groups alike, taking ``InstanceMemoryAllocationPercentage`` of each instance's memory
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterTieredStorageConfig.html):
the L2 of the inference operator's KV cache. Sources and the default's reasoning:
``docs/design/multi-node-service.md``, "Managed tiered storage".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Problems
from .pod_spec import HEADROOM_SHARE

__all__ = ["DEFAULT_TIERED_STORAGE_PERCENTAGE", "HEADROOM_PERCENT", "TieredStorage"]

#: Our default share of each instance's memory (AWS documents none): small, as the tier is taken
#: from every node and node-sized pods leave only ``HEADROOM_PERCENT`` (design note).
DEFAULT_TIERED_STORAGE_PERCENTAGE = 5
#: The node-memory headroom the library's node-sized pods leave, in per cent.
HEADROOM_PERCENT = round(HEADROOM_SHARE * 100)


@dataclass(frozen=True)
class TieredStorage:
    """The cluster's managed tiered storage, on.

    :param memory_percentage: the share of each instance's memory the daemon takes
        (``InstanceMemoryAllocationPercentage``), 1-100: 0 is accepted by the API but leaves the
        tier without memory. Default: ``DEFAULT_TIERED_STORAGE_PERCENTAGE`` (5).
    """

    memory_percentage: int = DEFAULT_TIERED_STORAGE_PERCENTAGE

    def validate(self, problems: Problems, prop: str) -> None:
        value = self.memory_percentage
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
            problems.add(
                f"{prop}.memory_percentage",
                value,
                "an integer from 1 to 100 (InstanceMemoryAllocationPercentage is 0-100; 0 leaves "
                "the tier no memory)",
            )

    @property
    def exceeds_headroom(self) -> bool:
        """More than the node headroom the library's node-sized pods leave (they would not fit)."""
        return self.memory_percentage > HEADROOM_PERCENT - 1

    def memory_gib(self, host_memory_gib: float) -> float:
        """What the tier takes of an instance with ``host_memory_gib`` of memory."""
        return host_memory_gib * self.memory_percentage / 100

    def to_cloudformation(self) -> dict[str, Any]:
        """The ``TieredStorageConfig`` property, as CloudFormation spells it."""
        return {"Mode": "Enable", "InstanceMemoryAllocationPercentage": self.memory_percentage}

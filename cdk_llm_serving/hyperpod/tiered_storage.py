"""``TieredStorage``: the HyperPod cluster's ``TieredStorageConfig`` (managed tiered storage).

``AWS::SageMaker::Cluster`` ``TieredStorageConfig`` = ``{Mode, InstanceMemoryAllocationPercentage}``
(botocore's sagemaker model ``ClusterTieredStorageConfig``: ``Mode`` Enable|Disable, required;
``InstanceMemoryAllocationPercentage`` an integer 0-100, optional; the CloudFormation reference
``aws-properties-sagemaker-cluster-tieredstorageconfig.html``: "Update requires: No interruption").
With ``Enable`` HyperPod "installs a memory management daemon that provides disaggregated memory as
a service" on the cluster's nodes, taking that percentage of each instance's memory
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterTieredStorageConfig.html).
It is the L2 backend ``tieredstorage`` of the inference operator's KV cache
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-caching-routing.html)
and, on the Ray path, the cluster-wide tier AWS requires tiered storage "set up ... before you
turn on" (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ray-kv-cache.html).

The memory is taken from every node of the cluster, GPU and system groups alike: the cost is
``memory_percentage`` of each instance's memory (``memory_gib``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Problems
from .pod_spec import HEADROOM_SHARE

__all__ = ["DEFAULT_TIERED_STORAGE_PERCENTAGE", "HEADROOM_PERCENT", "TieredStorage"]

#: Our default share of each instance's memory. AWS documents no default (the property is
#: optional and its service-side default is unpublished), so we state one: 5 %, e.g. 102.4 GiB of
#: a p5en.48xlarge's 2,048 GiB, 3.2 GiB of an m5.4xlarge's 64 GiB. Why so little: the tier is
#: taken from EVERY node of the cluster, and the serving pods this library sizes to a node keep
#: only ``pod_spec.HEADROOM_SHARE`` (10 %) of its memory for the kubelet, system daemons and
#: DaemonSets (the multi-node service's Guaranteed pods request the rest); the deploy rehearsal
#: found the reference multi-node service Pending with a 20 % tier. A share above
#: ``HEADROOM_PERCENT`` is warned (``cdk-llm-serving:tieredStorageExceedsHeadroom``).
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

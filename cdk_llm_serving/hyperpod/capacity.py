"""``GpuNodeLedger``: the GPU nodes every consumer of a HyperPod cluster may take, per group.

Each service (or endpoint, or operator) reserves the nodes it needs at its maximum
replicas; a reservation that makes a group's total exceed its instance count is refused
with one ``ConfigurationError`` listing every consumer's share of that group. A consumer
that reserves again (say, when autoscaling raises its maximum) replaces its earlier share.
A group that cluster node autoscaling may grow counts its maximum (``max_count``, the
group's ``capacity``): the nodes Karpenter may add for the consumers' maximum replicas.
"""

from __future__ import annotations

from collections.abc import Sequence

from constructs import IConstruct

from ..errors import Problems
from .instance_group import HyperPodInstanceGroup


class GpuNodeLedger:
    """Reservations of one cluster's groups, checked as they are made (at synth)."""

    def __init__(self, cluster_path: str, groups: Sequence[HyperPodInstanceGroup]) -> None:
        self.cluster_path = cluster_path
        self.groups = {group.name: group for group in groups}
        #: (consumer path, group name) -> nodes, in reservation order.
        self.reservations: dict[tuple[str, str], int] = {}

    def reserved(self, group_name: str) -> int:
        """Nodes of ``group_name`` reserved so far."""
        return sum(n for (_, group), n in self.reservations.items() if group == group_name)

    def free(self, group_name: str, consumer: IConstruct | None = None) -> int:
        """Nodes of ``group_name`` that no consumer but ``consumer`` has reserved (at least 0).

        ``consumer``'s own share counts as free: reserving again replaces it.
        """
        group = self.groups.get(group_name)
        if group is None:
            return 0
        own = self.reservations.get((consumer.node.path, group_name), 0) if consumer else 0
        return max(0, group.capacity - self.reserved(group_name) + own)

    def reserve(self, consumer: IConstruct, group_name: str, nodes: int) -> None:
        """Record ``consumer``'s ``nodes`` on ``group_name``; refuse if the group overflows."""
        problems = Problems(f"GPU nodes of HyperPod cluster '{self.cluster_path}'")
        group = self.groups.get(group_name)
        if group is None:
            problems.add(
                "group_name",
                group_name,
                f"must name an instance group of the cluster: {', '.join(self.groups)}",
            )
        if nodes < 0:
            problems.add("nodes", nodes, "must be 0 or more")
        problems.raise_if_any()
        assert group is not None
        self.reservations[(consumer.node.path, group_name)] = nodes
        total = self.reserved(group_name)
        if total > group.capacity:
            for (path, name), share in self.reservations.items():
                if name == group_name:
                    problems.add(
                        path,
                        f"{share} nodes",
                        f"all consumers of GPU group {group_name!r} need {total} nodes at their "
                        f"maximum replicas; it has {group.capacity}"
                        + (" at its max_count" if group.autoscaled else ""),
                    )
            problems.raise_if_any()

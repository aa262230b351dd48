"""Where a ``VllmMultiNodeService`` runs: its GPU group, nodes per replica, plan and resources.

``place_replicas`` decides it once from the service's inputs and returns an immutable
``MultiNodePlacement``; every problem it finds goes to the caller's ``Problems``. No construct
state: the construct and the manifest renderers (``multi_node_manifests``) read the result.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._cdk.validation import check_at_least
from ..errors import ConfigurationError, Problems
from ..planning.catalog import Catalog, InstanceSpec
from ..planning.models import ModelSpec, WeightFormat
from ..planning.sizing import Layout, Plan, layout_across_nodes, plan, tensor_parallel_options
from ..vllm.pool_strategy import tensor_parallel_cost_warning
from .constants import EFA_RESOURCE, GPU_RESOURCE
from .instance_group import HyperPodInstanceGroup
from .interfaces import IHyperPodCluster
from .pod_spec import guaranteed_cpu_memory, rollout_strategy

__all__ = ["MultiNodePlacement", "place_replicas"]


@dataclass(frozen=True)
class MultiNodePlacement:
    """A multi-node service's placement, decided once.

    :param group: the GPU group the replicas run on.
    :param instance: the group's type in the planner's catalog.
    :param plan: the planner's sizing for the group's type (``None`` when it found none; the
        service then refuses with the planner's reason).
    :param nodes: nodes per replica (the LeaderWorkerSet group size).
    :param replicas: model replicas (LeaderWorkerSet groups).
    :param layout: the parallelism a replica runs.
    :param resources: each pod's requests and limits (whole-node GPUs and EFA devices,
        Guaranteed CPU and memory from the vCPUs the group's nodes offer with its threads
        per core).
    """

    group: HyperPodInstanceGroup
    instance: InstanceSpec
    plan: Plan | None
    nodes: int
    replicas: int
    layout: Layout
    resources: Mapping[str, str]
    #: Set when the user's tensor-parallel size serves fewer than half the tokens per dollar of
    #: the planner's layout (``vllm.pool_strategy.tensor_parallel_cost_warning``).
    tensor_parallel_warning: str | None = None

    @property
    def rollout_strategy(self) -> dict[str, Any]:
        """LeaderWorkerSet's rolling update for this group, replica size and count."""
        return rollout_strategy(self.group.capacity, self.nodes, self.replicas)

    @property
    def can_surge(self) -> bool:
        """The group has room for one more replica during an update."""
        return bool(self.rollout_strategy["rollingUpdateConfiguration"]["maxSurge"])

    @property
    def gpu_nodes(self) -> int:
        """Nodes of the group the replicas take."""
        return self.replicas * self.nodes


def _gpu_group(
    problems: Problems, cluster: IHyperPodCluster, gpu_group: str | None
) -> HyperPodInstanceGroup:
    """The named GPU group, or the cluster's first; refused at once when there is none."""
    gpu_groups = cluster.gpu_groups
    groups = {group.name: group for group in gpu_groups}
    group = groups.get(gpu_group) if gpu_group else (gpu_groups[0] if gpu_groups else None)
    if group is None:
        problems.add(
            "gpu_group", gpu_group, f"must name a GPU group of the cluster: {', '.join(groups)}"
        )
        problems.raise_if_any()
        raise AssertionError("unreachable: raise_if_any raised")
    return group


def _catalogued(problems: Problems, catalog: Catalog, group: HyperPodInstanceGroup) -> InstanceSpec:
    """The group's type in the catalog; refused at once when the catalog lacks it."""
    if group.instance_type not in catalog:
        problems.add(
            "gpu_group",
            str(group.instance_type),
            "a GPU group needs a GPU instance type from the planner's catalog",
        )
        problems.raise_if_any()
    return catalog.get(group.instance_type)


#: The planner at one tensor-parallel size: ``size(tensor_parallel=...)``.
Sizer = Callable[..., Plan]


def _plan(problems: Problems, spec: ModelSpec, size: Sizer, tensor_parallel: int) -> Plan | None:
    """The planner's sizing at ``tensor_parallel`` (each node's GPUs one group, the launcher's
    one rank per node, unless the user's size wins); ``None`` with the planner's reason."""
    try:
        return size(tensor_parallel=tensor_parallel)
    except ConfigurationError as error:  # PlanningError: no layout fits
        problems.add("model", spec.name, str(error))
        return None


def _tensor_parallel_warning(size: Sizer, planned: Plan, node_width: int) -> str | None:
    """The warning when the user's size costs more than 2x in tokens per dollar vs the default."""
    try:
        default = size(tensor_parallel=node_width)
    except ConfigurationError:
        return None
    return (
        tensor_parallel_cost_warning(planned, default) if default.nodes == planned.nodes else None
    )


def _resources(
    problems: Problems, group: HyperPodInstanceGroup, instance: InstanceSpec
) -> dict[str, str]:
    """Whole-node GPUs and EFA devices; Guaranteed CPU and memory sized from the type and the
    group's threads per core (``pod_spec.guaranteed_cpu_memory``)."""
    resources = {GPU_RESOURCE: str(instance.gpus), EFA_RESOURCE: str(instance.efa_devices)}
    if instance.vcpus is None:
        problems.add(
            "gpu_group",
            str(group.instance_type),
            f"the catalog has no vCPU count for {instance.instance_type}; add it",
        )
        return resources
    return {**guaranteed_cpu_memory(instance, group.threads_per_core), **resources}


def place_replicas(
    problems: Problems,
    *,
    cluster: IHyperPodCluster,
    catalog: Catalog,
    spec: ModelSpec,
    weight_format: WeightFormat,
    max_context: int | None,
    gpu_group: str | None,
    nodes_per_replica: int | None,
    replicas: int,
    tensor_parallel: int | None = None,
) -> MultiNodePlacement:
    """The group, plan, nodes per replica and resources of a multi-node service.

    The planner sizes the group's type with the BF16 KV cache, each node's GPUs one
    tensor-parallel group unless ``tensor_parallel`` is given; ``nodes_per_replica`` above the
    plan's takes the planner's layout rule for that many nodes. Enough nodes per replica,
    replicas that fit the group, EFA and vCPUs known: each shortfall is a problem.
    """
    group = _gpu_group(problems, cluster, gpu_group)
    instance = _catalogued(problems, catalog, group)
    size: Sizer = functools.partial(
        plan,
        spec,
        weight_format.name,
        instance.instance_type,
        max_context=max_context,
        catalog=catalog,
        kv_cache_dtype="auto",
    )
    node_width = tensor_parallel_options(spec, instance.gpus)[-1]
    planned = _plan(problems, spec, size, tensor_parallel or node_width)
    nodes = nodes_per_replica or (planned.nodes if planned else 1)
    if planned is not None and planned.nodes == nodes:
        layout = planned.layout
    else:
        layout = layout_across_nodes(spec, tensor_parallel or node_width, nodes)
    _check_fit(problems, group, instance, planned, nodes, replicas, spec, weight_format)
    return MultiNodePlacement(
        group=group,
        instance=instance,
        plan=planned,
        nodes=nodes,
        replicas=replicas,
        layout=layout,
        resources=_resources(problems, group, instance),
        tensor_parallel_warning=(
            _tensor_parallel_warning(size, planned, node_width)
            if planned is not None and tensor_parallel is not None
            else None
        ),
    )


def _check_fit(
    problems: Problems,
    group: HyperPodInstanceGroup,
    instance: InstanceSpec,
    planned: Plan | None,
    nodes: int,
    replicas: int,
    spec: ModelSpec,
    fmt: WeightFormat,
) -> None:
    """Enough nodes per replica for the model, replicas that fit the group, EFA known."""
    if planned is not None and nodes < planned.nodes:
        problems.add(
            "nodes_per_replica",
            nodes,
            f"the planner needs {planned.nodes} x {group.instance_type} per replica for {spec.name} in {fmt.name}",
        )
    check_at_least(problems, "replicas", replicas, 1)
    if replicas * nodes > group.capacity:
        problems.add(
            "replicas",
            replicas,
            f"{replicas} x {nodes} nodes exceed GPU group {group.name!r} ({group.capacity} nodes)",
        )
    if instance.efa_devices is None:
        problems.add(
            "gpu_group",
            str(group.instance_type),
            "the catalog has no EFA device count for this type; add it to the catalog",
        )

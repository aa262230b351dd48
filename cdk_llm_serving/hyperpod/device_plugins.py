"""Helm values that make the NVIDIA and EFA device plugins land on a cluster's HyperPod nodes,
whichever chart installs them: placement by the groups' ``ml.*`` instance types (the charts'
defaults select no HyperPod node), a full toleration list (the chart's, the deep-health-check
taint and the groups' taints), and short fixed object names (``fullnameOverride``). The charts'
keys and why each value: docs/design/hyperpod-cluster.md, "Device plugins"."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..planning.catalog import Catalog
from .constants import (
    CRITICAL_ADDONS_ONLY_KEY,
    EFA_DEVICE_PLUGIN_CHART,
    EFA_DEVICE_PLUGIN_RELEASE,
    EFA_TAINT_KEY,
    GPU_NODE_ROLE,
    GPU_TAINT_KEY,
    INSTANCE_TYPE_LABEL,
    NODE_HEALTH_TAINT_KEY,
    NODE_HEALTH_TAINT_VALUE,
    NVIDIA_DEVICE_PLUGIN_CHART,
    NVIDIA_DEVICE_PLUGIN_RELEASE,
)
from .instance_group import HyperPodInstanceGroup


def gpu_instance_types(groups: Iterable[HyperPodInstanceGroup]) -> list[str]:
    """The ``ml.*`` instance types of the GPU groups, sorted."""
    return sorted({str(group.instance_type) for group in groups if group.role == GPU_NODE_ROLE})


def efa_instance_types(groups: Iterable[HyperPodInstanceGroup], catalog: Catalog) -> list[str]:
    """GPU groups' types with EFA devices (the planner catalog's ``efa_devices``), sorted."""
    return [
        instance_type
        for instance_type in gpu_instance_types(groups)
        if instance_type in catalog and catalog.get(instance_type).efa_devices
    ]


def node_in(key: str, values: Iterable[str]) -> dict[str, Any]:
    """A node selector requirement: node label ``key`` In ``values``."""
    return {"key": key, "operator": "In", "values": list(values)}


def required_node_affinity(*requirements: dict[str, Any]) -> dict[str, Any]:
    """A ``nodeAffinity`` requiring the one node selector term of ``requirements``."""
    term = {"matchExpressions": list(requirements)}
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}


def _toleration(key: str, effect: str, value: str | None = None) -> dict[str, str]:
    if value is None:
        return {"key": key, "operator": "Exists", "effect": effect}
    return {"key": key, "operator": "Equal", "value": value, "effect": effect}


def _tolerations(
    first: list[dict[str, str]], groups: Iterable[HyperPodInstanceGroup]
) -> list[dict[str, str]]:
    """``first``, the deep-health-check taint, then each group taint not yet tolerated."""
    found = [
        *first,
        _toleration(NODE_HEALTH_TAINT_KEY, "NoSchedule", NODE_HEALTH_TAINT_VALUE),
    ]
    covered = {(t["key"], t.get("effect")) for t in found if t["operator"] == "Exists"}
    for group in groups:
        for taint in group.effective_taints:
            if (taint.key, taint.effect) not in covered:
                covered.add((taint.key, taint.effect))
                found.append(_toleration(taint.key, taint.effect))
    return found


def nvidia_values(groups: Iterable[HyperPodInstanceGroup]) -> dict[str, Any]:
    """NVIDIA device-plugin values: GPU groups' types, the chart's tolerations plus ours."""
    groups = list(groups)
    default = [
        {"key": CRITICAL_ADDONS_ONLY_KEY, "operator": "Exists"},
        _toleration(GPU_TAINT_KEY, "NoSchedule"),
    ]
    on_gpu_types = node_in(INSTANCE_TYPE_LABEL, gpu_instance_types(groups))
    return {
        "fullnameOverride": NVIDIA_DEVICE_PLUGIN_RELEASE,
        "affinity": {"nodeAffinity": required_node_affinity(on_gpu_types)},
        "tolerations": _tolerations(default, groups),
    }


def efa_values(groups: Iterable[HyperPodInstanceGroup], catalog: Catalog) -> dict[str, Any]:
    """EFA device-plugin values: EFA groups' types, the EFA taint, ours (CriticalAddonsOnly is fixed).

    Without EFA groups the instance list is left to the chart: an ``In`` expression with no
    values is invalid (Kubernetes API reference, NodeSelectorRequirement: "If the operator is
    In or NotIn, the values array must be non-empty").
    """
    groups = list(groups)
    values: dict[str, Any] = {"fullnameOverride": EFA_DEVICE_PLUGIN_RELEASE}
    efa_types = efa_instance_types(groups, catalog)
    if efa_types:
        values["supportedInstanceLabels"] = {"keys": [INSTANCE_TYPE_LABEL], "values": efa_types}
    values["tolerations"] = _tolerations(
        [_toleration(EFA_TAINT_KEY, "NoSchedule"), _toleration(GPU_TAINT_KEY, "NoSchedule")],
        groups,
    )
    return values


def secrets_store_values(groups: Iterable[HyperPodInstanceGroup]) -> dict[str, Any]:
    """Configuration of the EKS add-on ``aws-secrets-store-csi-driver-provider``: its DaemonSet
    tolerates the deep-health-check taint and every taint of the GPU groups, whose serving pods
    mount the API key through it (its chart tolerates none; the CSI driver's chart tolerates
    every taint already: docs/design/hyperpod-cluster.md, "Device plugins").
    """
    gpu_groups = [group for group in groups if group.role == GPU_NODE_ROLE]
    return {"tolerations": _tolerations([], gpu_groups)}


def hyperpod_chart_values(
    groups: Iterable[HyperPodInstanceGroup], catalog: Catalog, region: str
) -> dict[str, Any]:
    """Our values for AWS's HyperPod dependencies chart.

    ``global.region``: the health-monitoring agent's image is regional and, installed before
    any node exists, the chart cannot look the region up from node labels (its
    ``health-monitoring-agent.imageUri`` helper falls back to us-east-1).
    """
    groups = list(groups)
    return {
        "global": {"region": region},
        NVIDIA_DEVICE_PLUGIN_CHART: nvidia_values(groups),
        EFA_DEVICE_PLUGIN_CHART: efa_values(groups, catalog),
    }


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` on top, mappings merged key by key (as Helm merges values)."""
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = value
    return merged

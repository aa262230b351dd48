"""The parts of a serving pod that follow from the node it runs on and from security policy.

Guaranteed QoS (requests = limits, https://kubernetes.io/docs/concepts/workloads/pods/pod-qos/)
sized from the vCPUs the node really offers (``node_vcpus``: half the catalog's without
multithreading) less a 10 % headroom for the kubelet, system daemons and DaemonSets; the KV
offload budget, what the pod's memory leaves once the vLLM processes, the weights and the
cluster's tiered storage have theirs (``kv_offload_budget_gib``); a restricted container that
keeps ``IPC_LOCK`` for EFA and runs as root (AWS's vLLM image has no other user). The figures
and their sources: ``docs/design/multi-node-service.md``, "The serving pod".
"""

from __future__ import annotations

import math
from typing import Any

from ..planning.catalog import InstanceSpec

#: Share of a node's vCPUs and memory left to the kubelet, system daemons and DaemonSets.
HEADROOM_SHARE = 0.10
MIN_HEADROOM_VCPUS = 2
MIN_HEADROOM_GIB = 4
#: Host memory the vLLM processes of a node keep beside the KV offload buffer (module doc).
PROCESS_BASE_GIB = 16
PROCESS_GIB_PER_GPU = 16
#: The smallest per-node offload buffer the multi-node service turns on by default.
MIN_KV_OFFLOAD_GIB = 64
#: The one capability the vLLM container keeps (EFA memory registration).
CAPABILITIES_KEPT = ("IPC_LOCK",)


#: Catalog types whose vCPUs are one per core already: Arm hosts (NVIDIA Grace) have no
#: simultaneous multithreading, so ``threads_per_core=1`` takes nothing away. ASSUMED from
#: the EC2 CPU-options table (cpu-options-supported-instances-values.html lists one thread per
#: core for Arm types); HyperPod documents no CPU figures of its own.
ONE_THREAD_PER_CORE = frozenset({"ml.p6e-gb200.36xlarge"})


def node_vcpus(instance: InstanceSpec, threads_per_core: int) -> int:
    """The vCPUs a node of a group with ``threads_per_core`` offers to the kubelet.

    Raises ``ValueError`` when the catalog has no vCPU count for the type.
    """
    if instance.vcpus is None:
        raise ValueError(f"the catalog has no vCPU count for {instance.instance_type}")
    if threads_per_core >= 2 or instance.instance_type in ONE_THREAD_PER_CORE:
        return instance.vcpus
    return instance.vcpus // 2


def guaranteed_cpu_memory(instance: InstanceSpec, threads_per_core: int) -> dict[str, str]:
    """``cpu`` (whole cores) and ``memory`` (GiB) for requests and limits alike, on a node of
    a group with ``threads_per_core`` (``node_vcpus``).

    Raises ``ValueError`` when the catalog has no vCPU count for the type (the multi-node
    placement reports that as a problem before it asks).
    """
    vcpus = node_vcpus(instance, threads_per_core)
    cpu_headroom = max(MIN_HEADROOM_VCPUS, math.ceil(vcpus * HEADROOM_SHARE))
    memory_headroom = max(MIN_HEADROOM_GIB, math.ceil(instance.host_memory_gib * HEADROOM_SHARE))
    cpu = vcpus - cpu_headroom
    memory = math.floor(instance.host_memory_gib) - memory_headroom
    return {"cpu": str(cpu), "memory": f"{memory}Gi"}


def memory_gib(resources: dict[str, str] | Any) -> int | None:
    """The ``memory`` request in whole GiB (``"1843Gi"`` -> 1843), ``None`` when not set."""
    memory = resources.get("memory")
    if memory is None or not str(memory).endswith("Gi"):
        return None
    return int(str(memory)[: -len("Gi")])


def kv_offload_budget_gib(
    pod_memory_gib: int, gpus: int, weights_gib_per_node: float, tier_gib: float = 0.0
) -> int:
    """GiB of the pod's memory left for KV offload buffers on one node, >= 0: the pod's
    memory less the vLLM processes', the node's share of the weights and ``tier_gib``, what
    the cluster's tiered storage takes beside the pod (``TieredStorage.memory_gib``)."""
    reserve = (
        PROCESS_BASE_GIB
        + PROCESS_GIB_PER_GPU * gpus
        + math.ceil(weights_gib_per_node)
        + math.ceil(tier_gib)
    )
    return max(0, pod_memory_gib - reserve)


def container_security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"], "add": list(CAPABILITIES_KEPT)},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security() -> dict[str, Any]:
    """Pod-level fields: default seccomp, no API token, host namespaces off (explicitly)."""
    return {
        "automountServiceAccountToken": False,
        "hostNetwork": False,
        "hostPID": False,
        "hostIPC": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }


def rollout_strategy(group_nodes: int, nodes_per_replica: int, replicas: int) -> dict[str, Any]:
    """LeaderWorkerSet's rolling update: with room for one more replica, surge it first
    (``maxSurge: 1, maxUnavailable: 0``); without, replace one at a time (LWS refuses both 0:
    kubernetes-sigs/lws ``leaderworkerset.x-k8s.io_leaderworkersets.yaml``)."""
    surge = group_nodes >= (replicas + 1) * nodes_per_replica
    return {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {
            "maxSurge": 1 if surge else 0,
            "maxUnavailable": 0 if surge else 1,
        },
    }

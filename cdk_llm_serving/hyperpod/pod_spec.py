"""The parts of a serving pod that follow from the node it runs on and from security policy.

* Guaranteed QoS: CPU and memory requests equal to limits (Kubernetes' Guaranteed class is
  evicted last, https://kubernetes.io/docs/concepts/workloads/pods/pod-qos/), sized from the
  vCPUs the node really offers minus headroom for the kubelet, system daemons and the
  DaemonSets of a HyperPod node. The catalog counts an instance type's vCPUs with
  multithreading on (2 threads per core on the x86 hosts); a group with
  ``threads_per_core=1`` (the GPU groups' default) disables it, and its nodes offer half
  (p6-b200: 96 of 192; ``ThreadsPerCore`` in botocore's ``ClusterInstanceGroupSpecification``:
  "specify 1 for disabling multithreading"; vCPUs = cores x threads per core,
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cpu-options-supported-instances-values.html).
  ``node_vcpus`` does that arithmetic. Decision: keep 10% of those vCPUs (at least 2) and 10%
  of the memory (at least 4 GiB). EKS's AMIs reserve far less for the kubelet on these sizes
  (kube-reserved CPU 6% of the first core + 1% of the second + 0.5% of cores 3-4 + 0.25% of
  the rest = 0.31 vCPU on 96 vCPUs, 0.55 on 192; memory 255 MiB + 11 MiB per pod;
  awslabs/amazon-eks-ami ``nodeadm/internal/kubelet/config.go``), so the request stays below
  the node's allocatable (96 - 0.31 = 95.69 > 86 on p6-b200 without multithreading); the
  largest DaemonSet on a HyperPod GPU node, the health-monitoring agent, requests 500m /
  512 Mi (aws/sagemaker-hyperpod-cli
  ``helm_chart/HyperPodHelmChart/charts/health-monitoring-agent``), so 10% leaves room for
  the device plugins, CNI, Pod Identity agent, FSx CSI node and page cache pressure.
* KV-cache offload to host memory (``kv_offload_budget_gib``): what is left of the pod's
  memory once the vLLM processes have theirs. vLLM's native offloading keeps the blocks in
  one ``/dev/shm`` file per engine and node, which every worker maps and pins whole
  (``SharedOffloadRegion``, vllm/v1/kv_offload/cpu/shared_offload_region.py;
  ``pin_mmap_region`` registers ``total_size_bytes``, vllm/v1/kv_offload/cpu/gpu_worker.py;
  vLLM 0.32.0), so a node holds the whole ``--kv-offloading-size`` of each engine with a
  rank on it. The pod's ``/dev/shm`` is a memory-backed emptyDir: its usage counts against
  the pod's memory limit and is capped by it ("the minimum value between the SizeLimit ...
  and the sum of memory limits of all containers in a pod", ``EmptyDirVolumeSource.sizeLimit``
  in the Kubernetes API, https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/volume/),
  so the buffer must fit inside the Guaranteed request. Decision (no published figure for
  vLLM's own host memory per GPU): keep ``PROCESS_BASE_GIB`` for the API server and engine
  core, ``PROCESS_GIB_PER_GPU`` per GPU worker (CUDA context, NCCL, pinned staging buffers)
  and the node's share of the weights (page cache of safetensors reads from FSx, or the Run:ai
  streamer's host buffers), and the share the cluster's managed tiered storage takes of the
  node (``TieredStorage.memory_percentage``; its daemon's memory is beside the pod, inside the
  headroom), and offload the rest; below ``MIN_KV_OFFLOAD_GIB`` it is not worth the start-up
  time of pinning it.
* A restricted container: no privilege escalation, every capability dropped except
  ``IPC_LOCK`` (EFA/libfabric registers - pins - memory for RDMA:
  https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html asks for ``IPC_LOCK`` on
  EFA pods), the runtime's default seccomp profile, no service-account token (vLLM does not
  call the Kubernetes API; EKS Pod Identity mounts its own token).
* Root: AWS's vLLM container has no non-root user (docker/vllm/Dockerfile in
  aws/deep-learning-containers has no ``USER``; vLLM, Triton and FlashInfer write caches
  under ``$HOME``), and a capability added for a non-root user is not in the process's
  effective set under Kubernetes (kubernetes/kubernetes#56374), so ``IPC_LOCK`` would be lost.
  ``runAsNonRoot`` is therefore not set; the other restrictions are.
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
    """GiB of the pod's memory left for KV offload buffers on one node (module doc), >= 0.

    ``tier_gib``: what the cluster's managed tiered storage takes of the node
    (``TieredStorage.memory_gib``). Its daemon holds that share of the instance's memory beside
    the pod, inside the headroom the Guaranteed request leaves (``HEADROOM_SHARE``); the
    headroom was sized for the kubelet, the system daemons and the DaemonSets without it. A
    buffer that pins the pod's whole limit would then leave the node short by the tier's share
    (the kubelet evicts, or the kernel kills, under memory pressure:
    https://kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/), so the
    buffer gives the tier's share up: the pod's own use stays at its request less the tier.
    """
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
    """LeaderWorkerSet's rolling update: surge one replica when the group has its nodes.

    With room for one more replica the update adds the new one before removing an old one
    (``maxSurge: 1, maxUnavailable: 0``): a replica keeps serving throughout. Without room,
    one replica at a time is replaced (``maxSurge: 0, maxUnavailable: 1``; LWS refuses both
    0: kubernetes-sigs/lws ``leaderworkerset.x-k8s.io_leaderworkersets.yaml``,
    "This can not be 0 if MaxSurge is 0").
    """
    surge = group_nodes >= (replicas + 1) * nodes_per_replica
    return {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {
            "maxSurge": 1 if surge else 0,
            "maxUnavailable": 0 if surge else 1,
        },
    }


def can_surge(strategy: dict[str, Any]) -> bool:
    return bool(strategy["rollingUpdateConfiguration"]["maxSurge"])

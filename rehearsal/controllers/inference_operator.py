"""The HyperPod inference operator: the pods it creates for an ``InferenceEndpointConfig``, and
the cluster memory its managed tiered KV cache takes.

Our model of the operator's documented behaviour (its code is not public):

* Colocated (no ``pdSpec``): ``spec.replicas`` worker pods, each the ``worker`` container with its
  ``resources``, required node affinity on ``node.kubernetes.io/instance-type`` In
  ``instanceTypes`` (the CRD: the operator "selects the first available type"; AWS's add-on
  announcement: required plus preferred terms). With ``pdSpec`` (CRD: its presence "enables DPD
  mode, creating separate prefill and decode Deployments"): ``prefillSpec.replicas`` prefill and
  ``decodingSpec.replicas`` decode pods, each with its role's ``nodeSelector`` and
  ``resources``. Every pod gets a toleration per extended resource it requests, as EKS's
  ``ExtendedResourceToleration`` admission plugin adds (enabled on every EKS platform version,
  https://docs.aws.amazon.com/eks/latest/userguide/platform-versions.html). ASSUMED: the pods
  are named ``<name>-<i>``, ``<name>-prefill-<i>``, ``<name>-decode-<i>`` (names change nothing
  the rehearsal checks).
* ``intelligentRoutingSpec.enabled``: the operator provisions the router (AWS's DPD page: "the
  inference operator handles the orchestration, which includes provisioning the router"); its
  pod's resources and placement are not published. ASSUMED: the router is one pod requesting
  nothing, on any node without a taint it does not tolerate.
* ``kvCacheSpec`` with L2 ``tieredstorage`` needs the cluster's managed tiered storage
  (``TieredStorageConfig`` ``Mode: Enable``): HyperPod's Ray KV-cache page requires it "set up ...
  before you turn on the cluster-wide cache"
  (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ray-kv-cache.html); without
  it the L2 has no store (blocking: the operator cannot configure the tier it was asked for).
* The KV transfer under ``pdSpec`` (AWS's DPD page: the operator wires "prefill and decode pods
  together via LMCache and NIXL", the KV cache moving "over Elastic Fabric Adapter (EFA) using
  GPU-Direct" RDMA; its troubleshooting page, "KV cache transfer issues": throughput "below 1
  GB/s" means "EFA is not being used", and a decoder that retrieves "0 out of N required tokens"
  falls back to recomputing the prompt locally). A role that requests no EFA device, or a worker
  image without LMCache and NIXL (AWS's SageMaker vLLM container: the DPD page lists the
  HyperPod DLC and LMCache's images instead), serves, but without the transfer P/D exists for:
  degrading. The pairs that can transfer are recorded (``KV_TRANSFER``) for the report.
* Tiered storage's memory: ``Mode: Enable`` installs "a memory management daemon that provides
  disaggregated memory as a service", taking ``InstanceMemoryAllocationPercentage`` of each
  instance's memory (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterTieredStorageConfig.html).
  ASSUMED: that memory is unavailable to pods (taken from the node's allocatable memory), so
  the scheduler places every later pod against what the tier leaves; a tier that leaves a node
  less than the kubelet's own reservation is blocking.
"""

from __future__ import annotations

import copy
from typing import Any

from rehearsal.findings import Finding
from rehearsal.scheduling import INSTANCE_TYPE
from rehearsal.world import Key, PodState, World

CONTROLLER = "controller:inference-operator"
KIND = "InferenceEndpointConfig"
TIER_SOURCE = (
    "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterTieredStorageConfig.html"
)
KV_SOURCE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-caching-routing.html; https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ray-kv-cache.html"
#: Facts key: the cluster's ``TieredStorageConfig`` as played (absent or ``None``: off).
TIERED_STORAGE = "tiered_storage"
#: Facts key: GiB the tier took from each node, by node name.
TIER_GIB = "tiered_storage_gib"
DPD_SOURCE = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-dpd.html; "
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-ts-dpd.html"
)
#: Facts key: ``"<namespace>/<name>"`` -> the EFA devices each role's pods use for the transfer.
KV_TRANSFER = "kv_transfer"
EFA = "vpc.amazonaws.com/efa"
#: Images the DPD page lists (vLLM + LMCache + NIXL + the EFA libfabric provider), by the part
#: of the reference that names them.
DPD_IMAGES = ("vllm:server-hyperpod-cuda", "lmcache/")


def reserve_tiered_storage(world: World, cluster_id: str, properties: dict[str, Any]) -> None:
    """Record the cluster's ``TieredStorageConfig`` and take its memory from every node."""
    config = properties.get("TieredStorageConfig")
    world.facts[TIERED_STORAGE] = config
    if not config or str(config.get("Mode")) != "Enable":
        return
    percentage = int(config.get("InstanceMemoryAllocationPercentage") or 0)
    taken: dict[str, float] = {}
    for node in world.nodes:
        memory = node.capacity.get("memory", 0.0)
        tier = memory * percentage / 100
        taken[node.name] = tier / 2**30
        node.capacity["memory"] = memory - tier
        if node.capacity["memory"] <= 0:
            world.report(
                Finding(
                    "operator.tier-takes-all-memory",
                    f"{cluster_id} (AWS::SageMaker::Cluster)",
                    f"TieredStorageConfig takes {percentage} % of node {node.name}'s memory: "
                    "nothing is left for its pods",
                    TIER_SOURCE,
                )
            )
    world.facts[TIER_GIB] = taken


def _tolerations(resources: dict[str, Any]) -> list[dict[str, str]]:
    """One per extended resource requested (``ExtendedResourceToleration``)."""
    names = sorted(
        {*((resources.get("requests") or {}).keys()), *((resources.get("limits") or {}).keys())}
    )
    return [
        {"key": name, "operator": "Exists", "effect": "NoSchedule"}
        for name in names
        if "/" in name  # extended resources are domain-qualified (cpu, memory are not)
    ]


def _pod(
    config: dict[str, Any], name: str, resources: dict[str, Any], placement: dict[str, Any]
) -> dict[str, Any]:
    meta = config.get("metadata") or {}
    worker = (config.get("spec") or {}).get("worker") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace", "default"),
            "labels": dict(meta.get("labels") or {}),
        },
        "spec": {
            **copy.deepcopy(placement),
            "tolerations": _tolerations(resources),
            "containers": [
                {
                    "name": "worker",
                    "image": worker.get("image", ""),
                    "resources": copy.deepcopy(resources),
                }
            ],
        },
    }


def pods_for(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod the operator creates for ``config`` (the module doc's model)."""
    spec = config.get("spec") or {}
    name = str((config.get("metadata") or {}).get("name"))
    pods: list[dict[str, Any]] = []
    pd = spec.get("pdSpec")
    if pd:
        for role, key in (("prefill", "prefillSpec"), ("decode", "decodingSpec")):
            role_spec = pd.get(key) or {}
            placement = {"nodeSelector": dict(role_spec.get("nodeSelector") or {})}
            for index in range(int(role_spec.get("replicas", 1))):
                pods.append(
                    _pod(
                        config,
                        f"{name}-{role}-{index}",
                        role_spec.get("resources") or {},
                        placement,
                    )
                )
    else:
        types = list(spec.get("instanceTypes") or [])
        placement = {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": INSTANCE_TYPE, "operator": "In", "values": types}
                                ]
                            }
                        ]
                    }
                }
            }
        }
        resources = ((spec.get("worker") or {}).get("resources")) or {}
        for index in range(int(spec.get("replicas", 1))):
            pods.append(_pod(config, f"{name}-{index}", resources, placement))
    if (spec.get("intelligentRoutingSpec") or {}).get("enabled"):
        pods.append(_pod(config, f"{name}-router", {}, {}))
    return pods


def check_kv_cache(world: World, key: Key, config: dict[str, Any]) -> Finding | None:
    """An L2 on managed tiered storage needs the cluster's tiered storage on."""
    cache = (config.get("spec") or {}).get("kvCacheSpec") or {}
    backend = str(((cache.get("l2CacheSpec") or {}).get("l2CacheBackend")) or "").lower()
    if not cache.get("enableL2Cache") or backend != "tieredstorage":
        return None
    tier = world.facts.get(TIERED_STORAGE)
    if tier and str(tier.get("Mode")) == "Enable":
        return None
    return Finding(
        "operator.tiered-storage-off",
        f"{KIND} {key[1]}/{key[2]}",
        "kvCacheSpec asks for an L2 cache on tieredstorage, but the HyperPod cluster has no "
        "TieredStorageConfig with Mode Enable: the L2 tier has no store",
        KV_SOURCE,
    )


def check_kv_transfer(world: World, key: Key, config: dict[str, Any]) -> list[Finding]:
    """Under ``pdSpec``: each role has EFA for the transfer, and the worker image carries
    LMCache and NIXL (the module doc); the roles' EFA devices are recorded."""
    spec = config.get("spec") or {}
    pd = spec.get("pdSpec")
    if not pd:
        return []
    resource = f"{KIND} {key[1]}/{key[2]}"
    findings = []
    devices: dict[str, int] = {}
    for role, role_key in (("prefill", "prefillSpec"), ("decode", "decodingSpec")):
        resources = (pd.get(role_key) or {}).get("resources") or {}
        amount = (resources.get("requests") or resources.get("limits") or {}).get(EFA)
        devices[role] = int(amount or 0)
        if not devices[role]:
            findings.append(
                Finding(
                    "operator.pd-transfer-without-efa",
                    resource,
                    f"pdSpec.{role_key}.resources requests no {EFA}: the KV cache cannot move "
                    "over EFA with GPU-Direct RDMA and falls back to TCP (AWS: below 1 GB/s)",
                    DPD_SOURCE,
                    severity="degrades",
                )
            )
    image = str((spec.get("worker") or {}).get("image") or "")
    if not any(part in image for part in DPD_IMAGES):
        findings.append(
            Finding(
                "operator.pd-image-without-nixl",
                resource,
                f"worker image {image} is not one the DPD page lists (vLLM with LMCache, NIXL "
                "and the EFA provider): no KV transfer, every decoder recomputes the prompt",
                DPD_SOURCE,
                severity="degrades",
            )
        )
    world.facts.setdefault(KV_TRANSFER, {})[f"{key[1]}/{key[2]}"] = devices
    return findings


def reconcile(world: World) -> bool:
    if KIND not in world.crd_kinds:  # ASSUMED: the operator runs once its add-on is created
        return False
    changed = False
    for key, config in world.of_kind(KIND):
        finding = check_kv_cache(world, key, config)
        if finding is not None:
            world.report(finding)
        for transfer in check_kv_transfer(world, key, config):
            world.report(transfer)
        for pod in pods_for(config):
            pod_key = ("Pod", key[1], pod["metadata"]["name"])
            if pod_key not in world.pods:
                world.pods[pod_key] = PodState(key=pod_key, obj=pod, owner=key)
                changed = True
    return changed

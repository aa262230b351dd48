"""The first cold start from an FSx for Lustre file system linked to S3, against the leader's
startup probe.

* A data repository association with ``BatchImportMetaDataOnCreate`` imports metadata only
  ("an import data repository task to import metadata", FSx API ``DataRepositoryAssociation``,
  https://docs.aws.amazon.com/fsx/latest/APIReference/API_DataRepositoryAssociation.html); a
  file's content is loaded from S3 when it is first read (FSx for Lustre User Guide, "Lazy
  load"), so the first start reads every weight byte from S3 through the file system.
* A file system's baseline throughput is its per-unit storage throughput (MB/s per TiB) times
  its storage capacity (https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html);
  the group's readers share it. ASSUMED: lazy loading runs at that baseline (AWS gives no
  separate S3 import rate), and the group reads each weight byte once in aggregate.
* The startup probe allows ``initialDelaySeconds + periodSeconds x failureThreshold``; then the
  kubelet restarts the container (https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/)
  and LWS's ``RecreateGroupOnPodRestart`` recreates the whole group
  (kubernetes-sigs/lws ``api/leaderworkerset/v1/leaderworkerset_types.go``), which starts over.
* The engine's start after loading: the planner's ``engine_start_seconds``
  (``cdk_llm_serving/planning/data/loading.json``).
"""

from __future__ import annotations

from typing import Any

from cdk_llm_serving.planning.cold_start import estimate_cold_start
from rehearsal.findings import Finding
from rehearsal.world import World

SOURCE = (
    "https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html; "
    "https://docs.aws.amazon.com/fsx/latest/APIReference/API_DataRepositoryAssociation.html; "
    "https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/"
)


def _file_system(world: World, file_system_id: str) -> dict[str, Any] | None:
    for resource in world.assembly.of_type("AWS::FSx::FileSystem"):
        if world.resolver.ref(resource.logical_id) == file_system_id:
            return world.resolver.properties(resource.logical_id)
    return None


def _metadata_only(world: World, file_system_id: str) -> bool:
    for resource in world.assembly.of_type("AWS::FSx::DataRepositoryAssociation"):
        props = world.resolver.properties(resource.logical_id)
        if props.get("FileSystemId") == file_system_id and props.get("BatchImportMetaDataOnCreate"):
            return True
    return False


def baseline_bytes_per_second(props: dict[str, Any]) -> float:
    lustre = props.get("LustreConfiguration") or {}
    per_tib = float(lustre.get("PerUnitStorageThroughput", 0))
    return per_tib * 1e6 * float(props.get("StorageCapacity", 0)) / 1024


def probe_budget(container: dict[str, Any]) -> float | None:
    probe = container.get("startupProbe")
    if not probe:
        return None
    return float(probe.get("initialDelaySeconds", 0)) + float(
        probe.get("periodSeconds", 10)
    ) * float(probe.get("failureThreshold", 3))


def check(world: World, weight_bytes: float | None) -> list[Finding]:
    """Each LeaderWorkerSet whose leader reads weights from a lazily loaded FSx volume."""
    if not weight_bytes:
        return []
    found = []
    engine_start = estimate_cold_start(weight_bytes, "fsx_lustre").engine_start_seconds
    for (_, namespace, name), lws in world.of_kind("LeaderWorkerSet"):
        template = lws["spec"]["leaderWorkerTemplate"]
        leader = (template.get("leaderTemplate") or template["workerTemplate"])["spec"]
        budget = next(
            (b for c in leader.get("containers") or [] if (b := probe_budget(c)) is not None), None
        )
        if budget is None:
            continue
        for volume in leader.get("volumes") or []:
            claim = world.get(
                "PersistentVolumeClaim",
                namespace,
                str((volume.get("persistentVolumeClaim") or {}).get("claimName")),
            )
            pv = world.get(
                "PersistentVolume", "", str(((claim or {}).get("spec") or {}).get("volumeName"))
            )
            csi = ((pv or {}).get("spec") or {}).get("csi") or {}
            if csi.get("driver") != "fsx.csi.aws.com":
                continue
            props = _file_system(world, str(csi.get("volumeHandle")))
            if props is None or not _metadata_only(world, str(csi.get("volumeHandle"))):
                continue
            rate = baseline_bytes_per_second(props)
            needed = weight_bytes / rate + engine_start if rate else float("inf")
            if needed > budget:
                found.append(
                    Finding(
                        "startup.cold-start-exceeds-probe",
                        f"LeaderWorkerSet {namespace}/{name}",
                        f"the first start hydrates {weight_bytes / 1e12:.2f} TB from S3 at the file system's "
                        f"{rate / 1e9:.2f} GB/s baseline plus {engine_start:.0f} s engine start: "
                        f"{needed:.0f} s, the startup probe allows {budget:.0f} s, and a probe "
                        "failure recreates the whole group",
                        SOURCE,
                        "degrades",
                    )
                )
            else:
                world.facts.setdefault("cold_start", {})[(namespace, name)] = (needed, budget)
    return found

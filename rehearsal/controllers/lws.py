"""The LeaderWorkerSet controller (kubernetes-sigs/lws; the rules below cite files at 060ab4d).

* The headless Service: ``CreateHeadlessServiceIfNotExists``
  (``pkg/utils/controller/controller_utils.go``, called from
  ``pkg/controllers/leaderworkerset_controller.go`` with the LWS's own name under the default
  ``SubdomainShared`` policy) creates ``clusterIP: None``, ``publishNotReadyAddresses: true``,
  selector ``leaderworkerset.sigs.k8s.io/name=<lws>`` ONLY if no Service of that name exists in
  the namespace. A Service of that name that is not headless gives the pods no DNS records.
* Pods: the leader StatefulSet ``<lws>`` (``WithServiceName(lws.Name)``) makes leader
  ``<lws>-<group>``; each group's worker StatefulSet ``<lws>-<group>`` makes workers
  ``<lws>-<group>-<index>`` (index 1 .. size-1); StatefulSet pods get ``hostname`` = their name
  and ``subdomain`` = the service name (Kubernetes StatefulSet "Stable Network ID").
* Labels: ``leaderworkerset.sigs.k8s.io/name``, ``group-index``, ``worker-index`` (0 for the
  leader); annotation ``leaderworkerset.sigs.k8s.io/size`` (``api/leaderworkerset/v1/leaderworkerset_types.go``).
* Environment (``pkg/utils/pod/pod_utils.go`` ``AddLWSVariables``, ``addEnvVarsIfNotExists``):
  ``LWS_LEADER_ADDRESS=<lws>-<group>.<subdomain>.<namespace>``, ``LWS_GROUP_SIZE=<size>``,
  ``LWS_WORKER_INDEX=<index>``, put first in every container's ``env``, the container's own
  variables after them unless they have the same name.
* Rollout (``site/content/en/docs/concepts/rollout-strategy/_index.md``): ``maxSurge`` extra
  replicas during an update (default 0), ``maxUnavailable`` replicas down at once: with
  ``maxSurge: 0`` and every replica allowed down, an update stops the service until the new
  group is ready.
"""

from __future__ import annotations

import copy
from typing import Any

from rehearsal.findings import Finding
from rehearsal.world import Key, PodState, World

NAME = "leaderworkerset.sigs.k8s.io/name"
GROUP = "leaderworkerset.sigs.k8s.io/group-index"
WORKER = "leaderworkerset.sigs.k8s.io/worker-index"
SIZE = "leaderworkerset.sigs.k8s.io/size"
HEADLESS_SOURCE = (
    "kubernetes-sigs/lws pkg/utils/controller/controller_utils.go CreateHeadlessServiceIfNotExists"
)
ENV_SOURCE = "kubernetes-sigs/lws pkg/utils/pod/pod_utils.go AddLWSVariables"
ROLLOUT_SOURCE = "kubernetes-sigs/lws site/content/en/docs/concepts/rollout-strategy/_index.md"
#: Who the rehearsal says created an object the controller made.
CONTROLLER = "controller:lws"


def controller_running(world: World) -> bool:
    """The LWS controller manager (the lws chart's Deployment) runs somewhere."""
    return world.controller_running("controller-manager") and "LeaderWorkerSet" in world.crd_kinds


def lws_env(name: str, namespace: str, group: int, size: int, index: int) -> list[dict[str, str]]:
    """The variables ``AddLWSVariables`` sets (subdomain = the LWS name under SubdomainShared)."""
    return [
        {"name": "LWS_LEADER_ADDRESS", "value": f"{name}-{group}.{name}.{namespace}"},
        {"name": "LWS_GROUP_SIZE", "value": str(size)},
        {"name": "LWS_WORKER_INDEX", "value": str(index)},
    ]


def _with_env(containers: list[dict[str, Any]], first: list[dict[str, str]]) -> None:
    """``addEnvVarsIfNotExists``: the LWS variables first, then the container's others."""
    names = {e["name"] for e in first}
    for container in containers:
        own = [e for e in container.get("env") or [] if e.get("name") not in names]
        container["env"] = [dict(e) for e in first] + own


def group_pods(lws: dict[str, Any], namespace: str) -> list[tuple[str, int, int, dict[str, Any]]]:
    """Every pod the LWS makes: (name, group, worker index, template)."""
    spec = lws["spec"]
    template = spec["leaderWorkerTemplate"]
    size = int(template.get("size", 1))
    worker = template["workerTemplate"]
    leader = template.get("leaderTemplate") or worker
    name = lws["metadata"]["name"]
    pods = []
    for group in range(int(spec.get("replicas", 1))):
        pods.append((f"{name}-{group}", group, 0, leader))
        pods += [(f"{name}-{group}-{i}", group, i, worker) for i in range(1, size)]
    return pods


def _pod(
    lws: dict[str, Any],
    namespace: str,
    pod_name: str,
    group: int,
    index: int,
    template: dict[str, Any],
) -> dict[str, Any]:
    name = lws["metadata"]["name"]
    size = int(lws["spec"]["leaderWorkerTemplate"].get("size", 1))
    meta = copy.deepcopy(template.get("metadata") or {})
    labels = dict(meta.get("labels") or {})
    labels.update({NAME: name, GROUP: str(group), WORKER: str(index)})
    annotations = {**(meta.get("annotations") or {}), SIZE: str(size)}
    spec = copy.deepcopy(template.get("spec") or {})
    spec["hostname"] = pod_name
    spec["subdomain"] = name
    env = lws_env(name, namespace, group, size, index)
    _with_env(spec.get("containers") or [], env)
    _with_env(spec.get("initContainers") or [], env)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }


def headless_service(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": {NAME: name}},
        "spec": {"clusterIP": "None", "selector": {NAME: name}, "publishNotReadyAddresses": True},
    }


def check_headless(world: World, key: Key) -> Finding | None:
    """The LWS's pods have DNS names only if the Service of the LWS's name is headless."""
    _, namespace, name = key
    service = world.get("Service", namespace, name)
    if service is None or (service.get("spec") or {}).get("clusterIP") == "None":
        return None
    declared = ", ".join(world.declared_by.get(("Service", namespace, name), []))
    kind = (service.get("spec") or {}).get("type", "ClusterIP")
    return Finding(
        "lws.headless-service-shadowed",
        f"LeaderWorkerSet {namespace}/{name}",
        f"a {kind} Service {namespace}/{name} (from {declared}) has the LeaderWorkerSet's name, so "
        "the controller creates no headless Service; LWS_LEADER_ADDRESS "
        f"{name}-0.{name}.{namespace} has no DNS record and the workers cannot reach the leader",
        HEADLESS_SOURCE,
    )


def rollout_outage(lws: dict[str, Any], key: Key) -> Finding | None:
    """``maxSurge: 0`` with every replica allowed down: an update is an outage."""
    spec = lws.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    rolling = ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration")) or {}
    surge = int(str(rolling.get("maxSurge", 0)).rstrip("%") or 0)
    unavailable = rolling.get("maxUnavailable", 1)
    down = (
        replicas
        if str(unavailable).endswith("%") and int(str(unavailable)[:-1]) >= 100
        else int(str(unavailable).rstrip("%"))
    )
    if surge == 0 and down >= replicas:
        return Finding(
            "lws.rollout-outage",
            f"LeaderWorkerSet {key[1]}/{key[2]}",
            f"replicas {replicas}, maxSurge 0, maxUnavailable {unavailable}: every template change "
            "deletes the serving group before its replacement is ready (a full outage per update)",
            ROLLOUT_SOURCE,
            severity="degrades",
        )
    return None


def reconcile(world: World) -> bool:
    if not controller_running(world):
        return False
    changed = False
    for key, lws in world.of_kind("LeaderWorkerSet"):
        _, namespace, name = key
        if world.get("Service", namespace, name) is None:
            world.put(headless_service(name, namespace), CONTROLLER, namespace)
            changed = True
        for pod_name, group, index, template in group_pods(lws, namespace):
            pod_key = ("Pod", namespace, pod_name)
            if pod_key not in world.pods:
                world.pods[pod_key] = PodState(
                    pod_key, _pod(lws, namespace, pod_name, group, index, template), key
                )
                changed = True
    return changed

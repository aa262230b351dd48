"""Deployments, StatefulSets, ReplicaSets, Jobs and DaemonSets create their pods.

* Deployment / ReplicaSet / StatefulSet: ``spec.replicas`` pods (default 1) from
  ``spec.template`` (https://kubernetes.io/docs/concepts/workloads/controllers/deployment/);
  StatefulSet pods are ``<name>-<ordinal>`` with ``hostname`` = their name and ``subdomain`` =
  ``spec.serviceName`` (https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#stable-network-id).
* Job: ``spec.parallelism`` pods (default 1).
* DaemonSet: one pod on every node whose labels and taints admit the template (nodeSelector,
  required node affinity, NoSchedule/NoExecute taints), re-evaluated when nodes change
  (https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/#how-daemon-pods-are-scheduled).
  The DaemonSet controller adds tolerations for ``node.kubernetes.io/not-ready``,
  ``unreachable``, ``disk-pressure``, ``memory-pressure``, ``pid-pressure``,
  ``unschedulable`` and, for host-network pods, ``network-unavailable`` (same page,
  "Taints and tolerations"): none of those taints is modelled, so nothing to add.
"""

from __future__ import annotations

import copy
from typing import Any

from rehearsal.scheduling import why_not
from rehearsal.world import Key, PodState, World

REPLICATED = ("Deployment", "ReplicaSet", "StatefulSet")


def _pod(template: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    meta = copy.deepcopy(template.get("metadata") or {})
    meta.update({"name": name, "namespace": namespace})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


def _ensure(world: World, owner: Key, name: str, obj: dict[str, Any], daemon: bool = False) -> bool:
    key = ("Pod", owner[1], name)
    if key in world.pods:
        return False
    world.pods[key] = PodState(key=key, obj=obj, owner=owner, daemon=daemon)
    return True


def reconcile(world: World) -> bool:
    changed = False
    for kind in (*REPLICATED, "Job", "DaemonSet"):
        for owner, obj in world.of_kind(kind):
            spec = obj.get("spec") or {}
            template = spec.get("template") or {}
            namespace, name = owner[1], owner[2]
            if kind == "DaemonSet":
                for node in world.nodes:
                    pod_name = f"{name}-{node.name}"
                    if ("Pod", namespace, pod_name) in world.pods:
                        continue
                    if why_not(template.get("spec") or {}, node) is not None:
                        continue
                    pod = _pod(template, namespace, pod_name)
                    pod["spec"]["nodeName"] = node.name  # bound by the DaemonSet controller
                    changed = _ensure(world, owner, pod_name, pod, daemon=True) or changed
                continue
            count = int(spec.get("parallelism" if kind == "Job" else "replicas", 1))
            for index in range(count):
                pod_name = f"{name}-{index}"
                pod = _pod(template, namespace, pod_name)
                if kind == "StatefulSet":
                    pod["spec"]["hostname"] = pod_name
                    if spec.get("serviceName"):
                        pod["spec"]["subdomain"] = spec["serviceName"]
                changed = _ensure(world, owner, pod_name, pod) or changed
    return changed

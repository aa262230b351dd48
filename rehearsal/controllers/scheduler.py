"""kube-scheduler's filters, and what a node advertises once a device plugin runs there.

Filters (https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/,
https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/,
https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#how-pods-with-resource-requests-are-scheduled):
``nodeSelector``, required node affinity, untolerated ``NoSchedule``/``NoExecute`` taints, and
requests (containers summed; an init container's if larger; a limit stands in for a missing
request) against what is left of the node's allocatable (``rehearsal.scheduling``). A pod
that passes no node stays ``Pending`` with the reason of the nodes that came closest.

Device plugins (https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/):
a node advertises ``nvidia.com/gpu`` / ``vpc.amazonaws.com/efa`` only once the plugin's pod
runs there (``rehearsal.scheduling.DEVICE_PLUGINS``), as many as the catalog lists.
ASSUMED: no scoring: a pod goes to the first node that passes the filters (kube-scheduler's
scoring plugins would spread pods; the serving pods' placement does not depend on it here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdk_llm_serving.planning.catalog import default_catalog
from rehearsal.findings import Finding
from rehearsal.scheduling import DEVICE_PLUGINS, GPU, Node, pod_requests, why_not
from rehearsal.world import PodState, World

SOURCE = "https://kubernetes.io/docs/concepts/scheduling-eviction/ (kube-scheduler filters: NodeResourcesFit, TaintToleration, NodeAffinity)"
_SHORT = {"nvidia.com/gpu": "gpu", "vpc.amazonaws.com/efa": "efa"}


def pod_address(index: int) -> str:
    """The ``index``-th pod address on the rehearsal's pod network."""
    return f"10.0.{100 + index // 250}.{index % 250 + 2}"


def explain(spec: Mapping[str, Any], nodes: list[Node]) -> tuple[str, str, Node | None]:
    """Why no node takes a pod with ``spec``: (rule, message, the closest node or ``None``).

    A node that passes every filter but resources names the resource (``insufficient-cpu``);
    else a node that passes the selectors names its taint; else the selector.
    """
    requests = pod_requests(spec)
    fitting_filters = [n for n in nodes if why_not(spec, n) is None]
    for node in fitting_filters:
        for resource, value in requests.items():
            if value > node.free(resource) + 1e-9:
                offers = node.capacity.get(resource, 0.0)
                return (
                    f"scheduler.insufficient-{_SHORT.get(resource, resource)}",
                    f"requests {resource} {value:g}; node {node.name} ({node.instance_type}) "
                    f"offers {offers:g} allocatable, {node.free(resource):g} free",
                    node,
                )
    reasons = {n.name: why_not(spec, n) for n in nodes}
    tainted = [n for n in nodes if str(reasons[n.name]).startswith("untolerated taint")]
    if tainted:
        return "scheduler.untolerated-taint", f"{tainted[0].name}: {reasons[tainted[0].name]}", None
    if not nodes:
        return "scheduler.no-nodes", "the cluster has no nodes", None
    first = nodes[0]
    return (
        "scheduler.no-matching-node",
        f"no node matches ({first.name}: {reasons[first.name]})",
        None,
    )


def fits(spec: Mapping[str, Any], node: Node) -> bool:
    if why_not(spec, node) is not None:
        return False
    return all(v <= node.free(r) + 1e-9 for r, v in pod_requests(spec).items())


def bind(world: World, pod: PodState, node: Node) -> None:
    """Bind ``pod`` to ``node``: account its requests, give it an address, advertise devices."""
    for resource, value in pod_requests(pod.spec).items():
        node.used[resource] = node.used.get(resource, 0.0) + value
    node.pods.append(pod.key[2])
    pod.node = node.name
    pod.obj["spec"]["nodeName"] = node.name
    pod.ip = pod_address(sum(1 for p in world.pods.values() if p.ip))
    pod.problem = None
    _advertise(pod, node)


def _advertise(pod: PodState, node: Node) -> None:
    for plugin in DEVICE_PLUGINS:
        for container in pod.spec.get("containers") or []:
            command = " ".join([*(container.get("command") or []), *(container.get("args") or [])])
            if (
                plugin.image_part in str(container.get("image"))
                and plugin.not_command not in command
            ):
                spec = default_catalog().get(node.instance_type)
                count = spec.gpus if plugin.resource == GPU else (spec.efa_devices or 0)
                node.capacity[plugin.resource] = float(count)


def reconcile(world: World) -> bool:
    """Bind every pending pod to the first node that passes the filters (DaemonSet pods come
    bound to their node; they are admitted there if their requests fit)."""
    changed = False
    pending = [p for p in world.pods.values() if p.node is None]
    for pod in sorted(pending, key=lambda p: (not p.daemon, p.key)):
        if pod.daemon:
            own = world.node(pod.spec["nodeName"])
            if fits(pod.spec, own):
                bind(world, pod, own)
                changed = True
            else:
                rule, message, _ = explain(pod.spec, [own])
                pod.problem = Finding(rule, f"Pod {pod.key[1]}/{pod.key[2]}", message, SOURCE)
            continue
        node = next((n for n in world.nodes if fits(pod.spec, n)), None)
        if node is not None:
            bind(world, pod, node)
            changed = True
        else:
            rule, message, _ = explain(pod.spec, world.nodes)
            pod.problem = Finding(
                rule, f"Pod {pod.key[1]}/{pod.key[2]}", f"stays Pending: {message}", SOURCE
            )
    return changed


def force_bind(world: World, pod: PodState) -> bool:
    """Keep-going mode: bind a pod that failed on resources alone to the closest node, so the
    rules after scheduling (volumes, DNS, load balancer) are still played."""
    candidates = [n for n in world.nodes if why_not(pod.spec, n) is None]
    if not candidates:
        return False
    bind(world, pod, max(candidates, key=lambda n: (n.free("cpu"), -len(n.pods))))
    return True

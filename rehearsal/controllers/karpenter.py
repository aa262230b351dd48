"""HyperPod's managed Karpenter: whole GPU nodes for pending pods, and the drain on scale-in.

* The cluster's ``AutoScaling: {Mode: Enable, AutoScalerType: Karpenter}`` makes HyperPod
  install and run Karpenter, with its CRDs; it ships no node class or pool
  (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html).
* Provisioning: Karpenter watches pods the scheduler cannot place and launches a node from a
  ``NodePool`` whose template admits the pod (labels and single-value ``In`` requirements
  against its node selector and required affinity, the pool's taints against its
  tolerations) and whose ``limits`` the new node keeps within
  (https://karpenter.sh/docs/concepts/nodepools/, "Limits"); on HyperPod the node comes from an
  instance group its ``HyperpodNodeClass`` names, with that group's labels and taints
  (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodeclass.html).
  ASSUMED: one node per pending pod that no node fits (our serving pods take whole nodes);
  a node joins without deep health checks (HyperPod's Karpenter supports none, same page).
* Scale-in (``scale_in``): the LeaderWorkerSet drops its last group whole (leader and workers;
  kubernetes-sigs/lws ``pkg/controllers/leaderworkerset_controller.go``); each pod's preStop
  runs before SIGTERM within ``terminationGracePeriodSeconds``
  (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination); the
  NLB drains the leader's IP target for the deregistration delay, 300 s unless the Service's
  target-group attributes set it
  (https://docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-target-groups.html#deregistration-delay),
  after a health-check interval of 10 s by default
  (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/#healthcheck-interval);
  a node Karpenter emptied goes after ``consolidateAfter`` with ``consolidationPolicy:
  WhenEmpty`` (https://karpenter.sh/docs/concepts/disruption/#consolidation).
"""

from __future__ import annotations

from typing import Any

from rehearsal.cluster import InstanceGroup
from rehearsal.controllers import scheduler
from rehearsal.controllers.lws import GROUP, WORKER
from rehearsal.findings import Finding
from rehearsal.scheduling import (
    DEVICE_PLUGINS,
    HEALTH,
    INSTANCE_TYPE,
    Node,
    allocatable,
    pod_requests,
)
from rehearsal.world import Key, World

SOURCE = "https://karpenter.sh/docs/concepts/nodepools/"
DRAIN_SOURCE = "https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination; https://docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-target-groups.html#deregistration-delay"
#: The kinds HyperPod's Karpenter brings once the cluster's autoscaling is on.
KINDS = ("HyperpodNodeClass", "NodePool", "NodeClaim")
DEREGISTRATION_DELAY = 300
HEALTH_CHECK_INTERVAL = 10
_TG_ATTRIBUTES = "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"
_HC_INTERVAL = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval"


def enabled(world: World) -> bool:
    return bool(world.facts.get("karpenter"))


def _pool_group(world: World, pool: dict[str, Any]) -> InstanceGroup | None:
    ref = ((pool.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeClassRef") or {}
    node_class = world.get("HyperpodNodeClass", "", str(ref.get("name")))
    if node_class is None:
        return None
    names = (node_class.get("spec") or {}).get("instanceGroups") or []
    groups = {g.name: g for g in world.facts.get("instance_groups", [])}
    return next((groups[n] for n in names if n in groups), None)


def _candidate(pool: dict[str, Any], group: InstanceGroup, index: int) -> Node:
    """The node Karpenter would launch from ``pool`` in ``group`` (as HyperPod labels it)."""
    template = pool["spec"]["template"]
    labels = {
        **group.labels,
        **((template.get("metadata") or {}).get("labels") or {}),
        INSTANCE_TYPE: group.instance_type,
        HEALTH: "Schedulable",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "sagemaker.amazonaws.com/instance-group-name": group.name,
        "karpenter.sh/nodepool": pool["metadata"]["name"],
    }
    for requirement in template["spec"].get("requirements") or []:
        if requirement.get("operator") == "In" and len(requirement.get("values") or []) == 1:
            labels.setdefault(requirement["key"], requirement["values"][0])
    name = f"{group.name}-karpenter-{index}"
    labels["kubernetes.io/hostname"] = name
    taints = [dict(t) for t in group.taints]
    for taint in template["spec"].get("taints") or []:
        if taint not in taints:
            taints.append(dict(taint))
    return Node(
        name=name,
        group=group.name,
        instance_type=group.instance_type,
        labels=labels,
        taints=taints,
        capacity=allocatable(group.instance_type, group.threads_per_core),
    )


def _with_devices(node: Node) -> Node:
    """The candidate as the device plugins will advertise it (what Karpenter plans against)."""
    from cdk_llm_serving.planning.catalog import default_catalog

    spec = default_catalog().get(node.instance_type)
    capacity = dict(node.capacity)
    for plugin in DEVICE_PLUGINS:
        count = spec.gpus if plugin.resource == "nvidia.com/gpu" else (spec.efa_devices or 0)
        capacity[plugin.resource] = float(count)
    return Node(node.name, node.group, node.instance_type, dict(node.labels), node.taints, capacity)


def _within_limits(world: World, pool: dict[str, Any], node: Node) -> bool:
    limits = (pool.get("spec") or {}).get("limits") or {}
    gpu_limit = limits.get("nvidia.com/gpu")
    if gpu_limit is None:
        return True
    name = pool["metadata"]["name"]
    gpus = _with_devices(node).capacity.get("nvidia.com/gpu", 0.0)
    held = sum(
        _with_devices(n).capacity.get("nvidia.com/gpu", 0.0)
        for n in world.nodes
        if n.labels.get("karpenter.sh/nodepool") == name
    )
    return held + gpus <= float(gpu_limit)


def reconcile(world: World) -> bool:
    """Launch a node for each pending (non-DaemonSet) pod no node fits, from the first pool
    whose template admits it, within its limits."""
    if not enabled(world):
        return False
    pools = [pool for _, pool in world.of_kind("NodePool")]
    if not pools:
        return False
    changed = False
    events = world.facts.setdefault("karpenter_events", [])
    for pod in sorted(world.pods.values(), key=lambda p: p.key):
        if pod.node is not None or pod.daemon:
            continue
        if any(scheduler.fits(pod.spec, n) for n in world.nodes):
            continue  # the scheduler places it (device plugins may still be starting)
        for pool in pools:
            group = _pool_group(world, pool)
            if group is None:
                continue
            index = sum(1 for n in world.nodes if n.group == group.name)
            candidate = _candidate(pool, group, index)
            if not scheduler.fits(pod.spec, _with_devices(candidate)):
                continue
            if not _within_limits(world, pool, candidate):
                events.append(f"pool {pool['metadata']['name']} at its limits: {pod.key[2]} pends")
                continue
            world.nodes.append(candidate)
            events.append(f"launch {candidate.name} for {pod.key[2]}")
            changed = True
            break
    return changed


def scale_out(world: World, lws_key: Key, replicas: int) -> list[str]:
    """KEDA sets the LeaderWorkerSet's replicas (its /scale subresource); the world reconciles:
    new group pods pend, Karpenter launches their nodes, the device plugins start there and
    the scheduler places the pods. Returns the events in order."""
    lws = world.objects[lws_key]
    lws.setdefault("spec", {})["replicas"] = replicas
    before = len(world.facts.get("karpenter_events", []))
    world.reconcile(rounds=16)
    return list(world.facts.get("karpenter_events", [])[before:])


def _termination(pod_spec: dict[str, Any]) -> tuple[float, float]:
    """(preStop sleep seconds, termination grace seconds) of a pod."""
    grace = float(pod_spec.get("terminationGracePeriodSeconds", 30))
    sleeps = [
        float(((c.get("lifecycle") or {}).get("preStop") or {}).get("sleep", {}).get("seconds", 0))
        for c in pod_spec.get("containers") or []
    ]
    return (min(sleeps) if sleeps else 0.0), grace


def _drain_window(service: dict[str, Any] | None) -> float:
    annotations = ((service or {}).get("metadata") or {}).get("annotations") or {}
    delay = float(DEREGISTRATION_DELAY)
    for attribute in str(annotations.get(_TG_ATTRIBUTES, "")).split(","):
        key, _, value = attribute.partition("=")
        if key.strip() == "deregistration_delay.timeout_seconds" and value.strip().isdigit():
            delay = float(value)
    interval = float(annotations.get(_HC_INTERVAL, HEALTH_CHECK_INTERVAL))
    return delay + interval


def scale_in(world: World, lws_key: Key, replicas: int, service_key: Key) -> list[str]:
    """KEDA lowers the replicas: the last groups leave whole, in the drain order; returns the
    events, and reports ``karpenter.scale-in-cuts-requests`` where a pod would stop before its
    target is drained (or a worker before its leader)."""
    lws = world.objects[lws_key]
    old = int(lws["spec"].get("replicas", 1))
    lws["spec"]["replicas"] = replicas
    window = _drain_window(world.objects.get(service_key))
    events: list[str] = []
    for group in range(replicas, old):
        pods = [
            p
            for p in world.pods.values()
            if p.owner == lws_key and p.labels.get(GROUP) == str(group)
        ]
        leader = next(
            (p for p in pods if p.labels.get(WORKER) == "0"),
            None,
        )
        events.append(f"group {group}: pods deleted together (LWS deletes the group whole)")
        events.append(f"group {group}: leader target deregistering ({window:g} s drain window)")
        leader_stop = _termination(leader.spec)[0] if leader else 0.0
        for pod in sorted(pods, key=lambda p: p.key):
            pre_stop, grace = _termination(pod.spec)
            short = pre_stop < (window if pod is leader else max(window, leader_stop))
            if short or grace <= pre_stop:
                world.report(
                    Finding(
                        "karpenter.scale-in-cuts-requests",
                        f"Pod {pod.key[1]}/{pod.key[2]}",
                        f"preStop {pre_stop:g} s, grace {grace:g} s: the pod stops before the "
                        f"load balancer's {window:g} s drain (deregistration delay + health-check "
                        "interval) ends, cutting in-flight requests",
                        DRAIN_SOURCE,
                        "degrades",
                    )
                )
        events.append(f"group {group}: in-flight requests finish; SIGTERM after preStop")
        for pod in pods:
            if pod.node is not None:
                node = world.node(pod.node)
                node.pods = [n for n in node.pods if n != pod.key[2]]
                for resource, value in pod_requests(pod.spec).items():
                    node.used[resource] = node.used.get(resource, 0.0) - value
            del world.pods[pod.key]
        events.append(f"group {group}: pods gone")
    for node in list(world.nodes):
        if "karpenter.sh/nodepool" not in node.labels:
            continue
        serving = [
            name
            for name in node.pods
            if not any(p.daemon and p.key[2] == name for p in world.pods.values())
        ]
        if not serving:
            world.nodes.remove(node)
            for key in [k for k, p in world.pods.items() if p.node == node.name]:
                del world.pods[key]
            events.append(f"node {node.name} empty: removed after consolidateAfter (WhenEmpty)")
    return events

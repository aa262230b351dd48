"""The KEDA variant's nodes follow its replicas: scale-out gets whole nodes from
HyperPod's Karpenter, scale-in drains in order (``rehearsal.controllers.karpenter``)."""

from __future__ import annotations

from rehearsal.assembly import Assembly
from rehearsal.controllers import karpenter
from rehearsal.play import play
from rehearsal.variants import reference_weight_bytes
from tests.rehearsal.conftest import synthesized


def _played():
    built = synthesized("keda")
    assert isinstance(built, Assembly), built
    return play(built, weight_bytes=reference_weight_bytes())


def test_scale_out_adds_whole_nodes_and_scale_in_drains_in_order():
    result = _played()
    assert result.blocking == [], "\n".join(map(str, result.findings))
    assert "karpenter.scale-in-cuts-requests" not in result.rules
    assert "karpenter.replica-not-placed" not in result.rules
    events = result.world.facts["scale_play"]
    out, scale_in = events.index("scale-out to 2:"), events.index("scale-in to 1:")
    launches = [e for e in events[out:scale_in] if e.startswith("launch ")]
    assert len(launches) == 2  # the second replica: 2 whole p6-b200 nodes
    drain = events[scale_in + 1 :]
    order = [
        "pods deleted together",
        "leader target deregistering",
        "in-flight requests finish",
        "pods gone",
        "empty: removed",
    ]
    positions = [next(i for i, e in enumerate(drain) if step in e) for step in order]
    assert positions == sorted(positions), drain
    assert sum("empty: removed" in e for e in drain) == 2  # the replica's nodes leave


def test_a_replica_without_pre_stop_cuts_requests_on_scale_in():
    """The same play with the drain taken out: the rule reports it (fails without the rule)."""
    built = synthesized("keda")
    assert isinstance(built, Assembly), built
    result = play(built, weight_bytes=reference_weight_bytes())
    world = result.world
    (key,) = [k for k, _ in world.of_kind("LeaderWorkerSet")]
    karpenter.scale_out(world, key, 2)
    for pod in world.pods.values():
        if pod.owner == key:
            for container in pod.obj["spec"]["containers"]:
                container.pop("lifecycle", None)
    karpenter.scale_in(world, key, 1, ("Service", key[1], f"{key[2]}-api"))
    assert "karpenter.scale-in-cuts-requests" in [f.rule for f in world.findings]


def test_past_the_pool_s_limit_the_replica_pends_and_the_others_keep_serving():
    """The rehearsal's KEDA variant scales to 2 replicas; its pool may grow to three replicas'
    GPUs (the maximum plus one replica's room to surge). Asked for four, the fourth pends and
    the others keep serving."""
    built = synthesized("keda")
    assert isinstance(built, Assembly), built
    world = play(built, weight_bytes=reference_weight_bytes()).world
    (key,) = [k for k, _ in world.of_kind("LeaderWorkerSet")]
    events = karpenter.scale_out(world, key, 4)
    assert any("at its limits" in e for e in events)
    pods = [p for p in world.pods.values() if p.owner == key]
    pending = {p.labels["leaderworkerset.sigs.k8s.io/group-index"] for p in pods if p.node is None}
    assert pending == {"3"}  # the fourth replica; replicas 0 to 2 stay placed


def _played_zero():
    built = synthesized("keda-zero")
    assert isinstance(built, Assembly), built
    return play(built, weight_bytes=reference_weight_bytes())


def test_scale_to_zero_removes_every_node_and_a_connection_wakes_a_replica():
    """keda-zero: scale-in to 0 leaves no GPU node; a client connects to the NLB,
    whose targets are the wake proxy's running pods (NewFlowCount counts it), KEDA wakes the
    LeaderWorkerSet, Karpenter adds the replica's 2 nodes, it places behind the proxy's
    leaders Service, within the retry budget."""
    result = _played_zero()
    assert result.blocking == [], "\n".join(map(str, result.findings))
    assert not {
        "keda.no-wake-signal",
        "keda.wake-on-empty-load-balancer",
        "keda.wake-signal-elsewhere",
        "keda.woken-replica-unreachable",
        "keda.no-retry-budget",
    } & set(result.rules)
    events = result.world.facts["scale_play"]
    scale_in, wake = events.index("scale-in to 0:"), events.index("wake from zero:")
    assert sum("empty: removed" in e for e in events[scale_in:wake]) == 4  # all 2 x 2 nodes
    woken = events[wake:]
    (signal,) = [e for e in woken if e.startswith("wake signal: ")]
    assert signal.startswith("wake signal: AWS/NetworkELB NewFlowCount > 0 on net/k8s-")
    assert "targets: reference-moe-nvfp4-wake-0, reference-moe-nvfp4-wake-1" in signal
    assert sum(e.startswith("launch ") for e in woken) == 2
    assert "replica placed: 2 pods on nodes, 0 pending" in woken
    assert (
        "through the wake proxy: Service reference-moe-nvfp4-leaders selects reference-moe-nvfp4-0"
        in woken
    )


def test_a_scaled_object_at_zero_without_a_live_target_or_its_own_nlb_never_wakes():
    """The rules fail a ScaledObject with only its queue trigger, one woken by the NLB's
     metric while the Service selects no running pod (undocumented for an empty target group:
    ), and one that watches another load balancer; a cron trigger wakes."""
    import copy

    from rehearsal.controllers import keda

    world = _played_zero().world
    ((_, namespace, name), scaled) = next(iter(world.of_kind("ScaledObject")))
    service = world.objects[("Service", namespace, f"{name}-api")]
    targets = ["reference-moe-nvfp4-wake-0"]
    fires, missing = keda.wake_signal(scaled, service, targets)
    assert missing is None and len(fires) == 1
    queue_only = copy.deepcopy(scaled)
    queue_only["spec"]["triggers"] = queue_only["spec"]["triggers"][:1]
    assert keda.wake_signal(queue_only, service, targets)[1].rule == "keda.no-wake-signal"
    assert keda.wake_signal(scaled, service, [])[1].rule == "keda.wake-on-empty-load-balancer"
    elsewhere = copy.deepcopy(scaled)
    elsewhere["spec"]["triggers"][1]["metadata"]["dimensionValue"] = "net/other/0123"
    assert keda.wake_signal(elsewhere, service, targets)[1].rule == "keda.wake-signal-elsewhere"
    on_schedule = copy.deepcopy(scaled)
    on_schedule["spec"]["triggers"][1] = {
        "type": "cron",
        "metadata": {"timezone": "UTC", "start": "0 6 * * *", "end": "0 20 * * *"},
    }
    assert keda.wake_signal(on_schedule, service, [])[1] is None
    # the healthy threshold the stack sets: 2 checks of 10 s, not the controller's 3
    assert keda.health_check_seconds(service) == 20

"""The prefix-aware router in the KEDA variant (``rehearsal.controllers.router``):
placed on the system nodes, it reaches the leaders over TLS verified against the service's CA;
each way it could not is a finding (each test fails without its rule)."""

from __future__ import annotations

import copy

import pytest

from rehearsal.assembly import Assembly
from rehearsal.controllers import router
from rehearsal.play import play
from rehearsal.variants import reference_weight_bytes
from tests.rehearsal.conftest import synthesized


@pytest.fixture(scope="module")
def played():
    built = synthesized("keda-routed")
    assert isinstance(built, Assembly), built
    return play(built, weight_bytes=reference_weight_bytes())


def _router_pods(world):
    return [p for p in world.pods.values() if router._router_container(p) is not None]


def test_the_router_serves_from_the_system_nodes_and_reaches_a_leader(played):
    assert played.blocking == [], "\n".join(map(str, played.findings))
    world = played.world
    pods = _router_pods(world)
    assert len(pods) == 2 and all(p.running for p in pods)
    assert {world.node(p.node).labels.get("cdk-llm-serving/role") for p in pods} == {"system"}
    # (Spread over nodes is a preferred anti-affinity: the rehearsal's scheduler does not
    # score, rehearsal/scheduling.py; the rendered term is tested in test_prefix_routing.)
    assert not [f for f in played.findings if f.rule.startswith("router.")]
    assert list(world.facts["router_leaders"].values()) == [1]  # KEDA's minimum: one leader
    (service,) = [o for k, o in world.of_kind("Service") if k[2].endswith("-api")]
    assert service["spec"]["selector"]["cdk-llm-serving/role"] == "router"


def _mutated(played, change):
    world = copy.deepcopy(played.world)
    world.facts.pop("router_leaders", None)
    (pod, *_) = _router_pods(world)
    for other in _router_pods(world):
        change(world, other, router._router_container(other))
    return router.check(world), pod


def test_an_http_worker_url_is_a_scheme_mismatch(played):
    def to_http(world, pod, container):
        container["args"] = [a.replace("https://", "http://") for a in container["args"]]

    findings, _ = _mutated(played, to_http)
    assert [f.rule for f in findings] == ["router.scheme-mismatch"]


def test_a_router_without_the_ca_is_reported(played):
    def no_ca(world, pod, container):
        container["env"] = [e for e in container["env"] if e["name"] != "SSL_CERT_FILE"]

    findings, _ = _mutated(played, no_ca)
    assert [f.rule for f in findings] == ["router.no-ca"]


def test_a_url_naming_a_worker_pod_is_reported(played):
    """A two-node replica's second pod (``<lws>-<group>-1``) does not serve the API."""
    world = played.world
    workers = [
        p
        for p in world.pods.values()
        if p.labels.get("leaderworkerset.sigs.k8s.io/worker-index") == "1"
    ]
    assert workers, "the reference replica spans two nodes"
    worker = workers[0]
    host = f"{worker.spec['hostname']}.{worker.spec['subdomain']}.{worker.key[1]}.svc"

    def to_worker(world, pod, container):
        args = container["args"]
        start = args.index("--worker-urls") + 1
        args[start] = f"https://{host}:8000"

    findings, _ = _mutated(played, to_worker)
    assert "router.selects-workers" in [f.rule for f in findings]


def test_a_leader_certificate_without_the_leaders_names_is_rejected(played):
    """The leader certificate's ``*.<lws>.<ns>.svc`` taken out: the real handshake fails."""

    def other_host(world, pod, container):
        args = container["args"]
        start = args.index("--worker-urls") + 1
        # the same leader, by its full cluster name, which the certificate does not list
        url = args[start]
        host = url.split("//")[1].split(":")[0]
        args[start] = url.replace(host, f"{host}.cluster.local")

    findings, _ = _mutated(played, other_host)
    assert [f.rule for f in findings] == ["router.leader-certificate-rejected"]
    assert "match" in findings[0].message or "mismatch" in findings[0].message


def test_the_handshake_accepts_only_the_named_host(played):
    world = played.world
    (leader,) = [
        p
        for p in world.pods.values()
        if p.labels.get("leaderworkerset.sigs.k8s.io/worker-index") == "0" and p.running
    ]
    cert, key = router._leader_tls(leader)
    pod = _router_pods(world)[0]
    ca = router._file(pod, "/var/run/secrets/router-tls/ca.crt")
    host = f"{leader.spec['hostname']}.{leader.spec['subdomain']}.{leader.key[1]}.svc"
    assert router.handshake(ca, cert, key, host) is None
    assert router.handshake(ca, cert, key, "elsewhere.example.com") is not None

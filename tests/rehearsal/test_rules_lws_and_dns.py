"""The LeaderWorkerSet controller's pods, environment and headless Service; cluster DNS."""

from __future__ import annotations

from rehearsal.controllers import dns, lws
from tests.rehearsal.builders import lws as lws_object
from tests.rehearsal.builders import lws_controller, namespace, node, world


def _played(tmp_path, service=None):
    w = world(tmp_path)
    w.nodes = [node("system-0", cpu=64), node("system-1", cpu=64)]
    namespace(w, "inference")
    lws_controller(w)
    if service is not None:
        w.put(service, "ServingService")
    w.put(lws_object(), "ServingLeaderWorkerSet")
    w.reconcile()
    return w


LOAD_BALANCER = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "svc", "namespace": "inference"},
    "spec": {"type": "LoadBalancer", "selector": {"app": "svc"}, "ports": [{"port": 443}]},
}


def test_pods_are_named_labelled_and_given_the_lws_environment_first(tmp_path):
    w = _played(tmp_path)
    leader = w.pods[("Pod", "inference", "svc-0")]
    worker = w.pods[("Pod", "inference", "svc-0-1")]
    assert leader.labels[lws.WORKER] == "0" and worker.labels[lws.WORKER] == "1"
    assert worker.spec["hostname"] == "svc-0-1" and worker.spec["subdomain"] == "svc"
    env = worker.spec["containers"][0]["env"]
    assert [e["name"] for e in env] == [
        "LWS_LEADER_ADDRESS",
        "LWS_GROUP_SIZE",
        "LWS_WORKER_INDEX",
        "A",
    ]
    assert (
        env[0]["value"] == "svc-0.svc.inference"
        and env[1]["value"] == "2"
        and env[2]["value"] == "1"
    )


def test_the_controller_creates_a_headless_service_and_the_leader_address_resolves(tmp_path):
    w = _played(tmp_path)
    service = w.get("Service", "inference", "svc")
    assert service is not None and service["spec"]["clusterIP"] == "None"
    assert lws.check_headless(w, ("LeaderWorkerSet", "inference", "svc")) is None
    worker = w.pods[("Pod", "inference", "svc-0-1")]
    leader = w.pods[("Pod", "inference", "svc-0")]
    assert dns.resolve(w, "svc-0.svc.inference", worker) == leader.ip


def test_a_service_of_the_lws_name_shadows_the_headless_one_and_nothing_resolves(tmp_path):
    w = _played(tmp_path, service=LOAD_BALANCER)
    finding = lws.check_headless(w, ("LeaderWorkerSet", "inference", "svc"))
    assert finding is not None and finding.rule == "lws.headless-service-shadowed"
    assert "ServingService" in finding.message
    worker = w.pods[("Pod", "inference", "svc-0-1")]
    assert dns.resolve(w, "svc-0.svc.inference", worker) is None


def test_dns_answers_pod_records_only_for_headless_services(tmp_path):
    w = _played(tmp_path)
    names = dns.records(w)
    assert set(names) == {
        "svc-0.svc.inference.svc.cluster.local",
        "svc-0-1.svc.inference.svc.cluster.local",
    }


def test_a_single_replica_without_surge_is_an_outage_per_update():
    key = ("LeaderWorkerSet", "inference", "svc")
    one = lws_object(replicas=1)
    one["spec"]["rolloutStrategy"] = {
        "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1}
    }
    finding = lws.rollout_outage(one, key)
    assert finding is not None and finding.severity == "degrades"
    surge = lws_object(replicas=1)
    surge["spec"]["rolloutStrategy"] = {
        "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0}
    }
    assert lws.rollout_outage(surge, key) is None
    two = lws_object(replicas=2)
    two["spec"]["rolloutStrategy"] = {
        "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1}
    }
    assert lws.rollout_outage(two, key) is None


def test_no_pods_while_the_lws_controller_does_not_run(tmp_path):
    w = world(tmp_path)
    w.nodes = [node("system-0")]
    namespace(w, "inference")
    w.put(lws_object(), "ServingLeaderWorkerSet")
    w.reconcile()
    assert not w.pods

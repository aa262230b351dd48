"""Prefix-cache-aware routing in front of a ``VllmMultiNodeService``'s replicas:
vLLM's router on the system nodes, TLS end to end, the load balancer on the routers."""

from __future__ import annotations

import argparse
import json

import pytest
from aws_cdk.assertions import Template
from vllm_router.router_args import RouterArgs

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod import PrefixRouting, RouterPolicy
from cdk_llm_serving.hyperpod.constants import LEADER_POD_ROLE, ROLE_LABEL, VLLM_API_PORT
from cdk_llm_serving.hyperpod.prefix_routing import ROUTER_TLS_PORT
from tests.support.builders import new_stack
from tests.support.hyperpod import deepseek_service, small_cluster
from tests.support.kubernetes_schemas import validate_core
from tests.support.network_policy import Endpoint, allowed
from tests.support.template_helpers import manifest_objects


@pytest.fixture(scope="module")
def routed():
    """Two one-node replicas: routed by default."""
    stack = new_stack("Routed")
    cluster, addons, store = small_cluster(stack, gpu_count=3)
    service = deepseek_service(stack, cluster, addons, store, replicas=2)
    return service, Template.from_stack(stack).to_json()


def _router_objects(template: dict) -> dict[str, dict]:
    objects = manifest_objects(template, "ServingRouter")
    return {obj["kind"]: obj for obj in objects if obj["kind"] != "Certificate"}


def _parse_router_args(args: list[str]) -> RouterArgs:
    """The router's own parser (vllm-router 0.1.17, ``vllm_router/router_args.py``)."""
    parser = argparse.ArgumentParser()
    RouterArgs.add_cli_args(parser)
    return RouterArgs.from_cli_args(parser.parse_args(args))


def test_the_router_dials_every_leader_over_https(routed):
    service, template = routed
    deployment = _router_objects(template)["Deployment"]
    router, proxy = deployment["spec"]["template"]["spec"]["containers"]
    parsed = _parse_router_args(router["args"])
    # The group has room for 3 one-node replicas: the router knows all 3 leaders' names.
    assert parsed.worker_urls == [
        f"https://{service.name}-{index}.{service.name}.{service.namespace}.svc:{VLLM_API_PORT}"
        for index in range(3)
    ]
    assert parsed.policy == "cache_aware"
    assert parsed.cache_threshold == 0.3
    assert (parsed.host, parsed.port) == ("127.0.0.1", 30000)  # loopback: TLS is the proxy's
    assert parsed.worker_startup_timeout_secs == service.startup_timeout_seconds
    assert parsed.service_discovery is False  # discovery would register http:// workers
    # The leaders' certificate is verified against the service's CA: the router's Secret's
    # ca.crt, read by rustls through SSL_CERT_FILE.
    assert {"name": "SSL_CERT_FILE", "value": "/var/run/secrets/router-tls/ca.crt"} in router["env"]
    items = deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["items"]
    assert {"key": "ca.crt", "path": "ca.crt"} in items
    # The TLS front is nginx with the mounted configuration: TLS on the Service's target port,
    # the router on loopback, only /v1/ and the probes forwarded (test_router_proxy runs it).
    assert proxy["command"][:2] == ["/bin/sh", "-c"]
    conf = _router_objects(template)["ConfigMap"]["data"]["nginx.conf"]
    assert f"listen {ROUTER_TLS_PORT} ssl;" in conf
    assert "proxy_pass http://127.0.0.1:30000;" in conf
    assert "location / { return 404; }" in conf


def test_the_leader_certificate_names_the_leaders_and_the_router_certificate_the_balancer(routed):
    service, template = routed
    leader = [
        o
        for o in manifest_objects(template, "ServingServingCertificate")
        if o["kind"] == "Certificate"
    ]
    assert f"*.{service.name}.{service.namespace}.svc" in leader[0]["spec"]["dnsNames"]
    (router_cert,) = manifest_objects(template, "ServingRouterCertificate")
    assert router_cert["spec"]["issuerRef"]["name"] == f"{service.name}-ca"  # the same CA
    assert f"{service.service_name}.{service.namespace}.svc" in router_cert["spec"]["dnsNames"]
    assert router_cert["spec"]["secretName"] == f"{service.name}-router-tls"


def test_the_load_balancer_selects_the_routers(routed):
    service, template = routed
    (svc,) = [o for o in manifest_objects(template, "ServingService") if o["kind"] == "Service"]
    deployment = _router_objects(template)["Deployment"]
    assert svc["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"][ROLE_LABEL] == "router"
    assert svc["spec"]["ports"][0]["targetPort"] == ROUTER_TLS_PORT
    assert svc["spec"]["ports"][0]["port"] == 443
    # The router's /health is 503 while any listed leader is absent (the deploy review ran
    # vllm-router 0.1.17): the load balancer checks /liveness instead.
    annotations = svc["metadata"]["annotations"]
    assert (
        annotations["service.beta.kubernetes.io/aws-load-balancer-healthcheck-path"] == "/liveness"
    )


def test_the_router_pods_are_placed_on_the_system_nodes_and_spread(routed):
    _, template = routed
    objects = _router_objects(template)
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {ROLE_LABEL: "system"}
    assert objects["Deployment"]["spec"]["replicas"] == 2
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert objects["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1
    assert pod["automountServiceAccountToken"] is False
    assert objects["ServiceAccount"]["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    for container in pod["containers"]:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["resources"]["requests"] == container["resources"]["limits"]
        assert {"readinessProbe", "livenessProbe"} <= set(container)  # checkov CKV_K8S_8/9
    for obj in objects.values():
        validate_core(obj)
    # No RBAC: the router never calls the Kubernetes API.
    assert not {"Role", "RoleBinding", "ClusterRole"} & set(objects)


def test_network_policies_let_the_routers_reach_the_leaders_and_the_vpc_reach_the_routers(routed):
    service, template = routed
    found = [o for o in manifest_objects(template, "Serving") if o["kind"] == "NetworkPolicy"]
    # The new cluster's VPC CIDR is known at deploy: take the VPC to be 10.0.0.0/16.
    policies = json.loads(json.dumps(found).replace("deploy-time-value", "10.0.0.0/16"))
    assert {p["metadata"]["name"] for p in policies} >= {f"{service.name}-router"}
    router_labels = _router_objects(template)["Deployment"]["spec"]["template"]["metadata"][
        "labels"
    ]
    leader = Endpoint(
        "10.0.1.10", {**service.labels(), ROLE_LABEL: LEADER_POD_ROLE}, service.namespace
    )
    router = Endpoint("10.0.2.20", router_labels, service.namespace)
    outside = Endpoint("10.0.3.30")  # the NLB's addresses are in the VPC
    assert allowed(policies, router, leader, VLLM_API_PORT)
    assert allowed(policies, outside, router, ROUTER_TLS_PORT)


def test_routing_false_keeps_the_load_balancer_on_the_leaders():
    stack = new_stack("Unrouted")
    cluster, addons, store = small_cluster(stack, gpu_count=4)
    service = deepseek_service(stack, cluster, addons, store, replicas=2, routing=False)
    asked = deepseek_service(
        stack, cluster, addons, store, id="Asked", name="asked", replicas=2, routing=True
    )
    assert service.router is None
    assert service.service["spec"]["selector"][ROLE_LABEL] == LEADER_POD_ROLE
    assert asked.router is not None
    assert asked.service["spec"]["selector"][ROLE_LABEL] == "router"


def test_one_replica_is_not_routed_by_default():
    stack = new_stack("OneReplica")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    assert deepseek_service(stack, cluster, addons, store).router is None


def test_every_bad_setting_is_reported_at_once():
    stack = new_stack("BadRouting")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    bad = PrefixRouting(policy="fastest", cache_threshold=1.5, replicas=1, cpu="lots", memory="2GB")
    with pytest.raises(ConfigurationError) as caught:
        deepseek_service(stack, cluster, addons, store, replicas=2, routing=bad)
    text = str(caught.value)
    for prop in (
        "routing.policy",
        "routing.cache_threshold",
        "routing.replicas",
        "routing.cpu",
        "routing.memory",
    ):
        assert prop in text


def test_a_policy_is_rendered_as_the_router_names_it():
    stack = new_stack("Policy")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    service = deepseek_service(
        stack,
        cluster,
        addons,
        store,
        replicas=2,
        routing=PrefixRouting(policy=RouterPolicy.POWER_OF_TWO),
    )
    assert service.router is not None
    assert _parse_router_args(service.router.router_args()).policy == "power_of_two"


def test_the_leaders_serve_the_render_route_the_router_tokenizes_with(routed):
    """Without --enable-scale-out vLLM 0.32 answers /v1/chat/completions/render 403 and the
    router's cache-aware policy decides without tokens (``missing_tokens``; measured with the
    0.32 CPU build and the 0.1.17 router); only the leader gets it, and only with the router."""
    service, _ = routed
    templates = service.lws["spec"]["leaderWorkerTemplate"]
    leader = templates.get("leaderTemplate") or templates["workerTemplate"]
    (container,) = leader["spec"]["containers"]
    assert "--enable-scale-out" in " ".join(container["command"] + container["args"])
    stack = new_stack("NoScaleOut")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    plain = deepseek_service(stack, cluster, addons, store, replicas=2, routing=False)
    (container,) = plain.lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
    assert "--enable-scale-out" not in " ".join(container["command"] + container["args"])

"""The wake proxy of a service scaled to zero that wakes on a client's connection.

``ScaleToZero(wake=WakeOnConnect())`` keeps a registered, always-on target behind the
service's NLB while no replica runs, so a client's connection counts in ``NewFlowCount``
("new flows (or connections) established from clients to targets",
https://docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-cloudwatch-metrics.html),
which KEDA watches (``replica_autoscaling``). On the system nodes: ``WAKE_PROXY_REPLICAS``
nginx pods whose stream module passes TCP through to a ClusterIP Service on the leaders (no
TLS termination: TLS and the API key stay end to end), a health port that answers without a
leader, a PodDisruptionBudget, and NetworkPolicies (the VPC in; out only to the leaders' API
port and DNS). How it drains, why the egress rule selects exactly the Service's pods, and
the timeouts: ``docs/design/multi-node-service.md``, "The wake proxy".

ASSUMED: the image's nginx (nginx.org's Alpine package) has the stream module built in
(``--with-stream``), so the pods' configuration loads no module; not run in the image here
(no registry access). Debian's nginx, which the tests run, loads it as a dynamic module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .constants import (
    APP_NAME_LABEL,
    PART_OF_LABEL,
    PART_OF_VALUE,
    ROLE_LABEL,
    VLLM_API_PORT,
)
from .multi_node_manifests import ServiceFront
from .prefix_routing import (
    PROXY_IMAGE,
    disruption_budget,
    nginx_config_map,
    nginx_container,
    nginx_preamble,
    nginx_volumes,
    service_account,
    system_deployment,
)
from .serving_security import ANYWHERE_BUT_IMDS, network_policy

__all__ = [
    "WAKE_PROXY_HEALTH_PORT",
    "WAKE_PROXY_PORT",
    "WakeProxyDeployment",
]

#: Where the proxy passes clients' TCP through (the load-balanced Service's target port).
WAKE_PROXY_PORT = 8443
#: Where the proxy answers the NLB's TCP health check.
WAKE_PROXY_HEALTH_PORT = 8081
#: Proxy pods: one may be disrupted at a time while the other keeps the target healthy.
WAKE_PROXY_REPLICAS = 2
#: How long the proxy waits for a leader to accept (in-cluster: milliseconds when one runs).
WAKE_PROXY_CONNECT_TIMEOUT_SECONDS = 5
#: ``proxy_timeout`` is ``longest_request`` plus this: a non-streamed request at the limit is
#: not cut, and it stays below the NLB's 350 s TCP idle timeout (design note).
WAKE_PROXY_TIMEOUT_MARGIN_SECONDS = 30
#: Each proxy pod's requests and limits: one nginx worker relaying bytes.
WAKE_PROXY_RESOURCES = {"cpu": "100m", "memory": "64Mi"}
#: The proxy's name in its volumes and configuration path.
_KIND = "wake-proxy"
#: The cluster DNS port (CoreDNS), which the proxy needs to resolve the leaders' Service.
_DNS_PORT = 53


@dataclass(frozen=True)
class WakeProxyDeployment:
    """The wake proxy's Kubernetes objects for the multi-node service ``name`` (pure renderers).

    :param name: the service's LeaderWorkerSet name.
    :param namespace: the service's namespace.
    :param leader_labels: the leader pods' labels (the ClusterIP Service's selector).
    :param vpc_cidr: the cluster VPC's CIDR (NetworkPolicy).
    :param longest_request_seconds: nginx's ``proxy_timeout``.
    :param image: the nginx image. Default: ``prefix_routing.PROXY_IMAGE``.
    """

    name: str
    namespace: str
    leader_labels: tuple[tuple[str, str], ...]
    vpc_cidr: str
    longest_request_seconds: int
    image: str = PROXY_IMAGE

    @property
    def proxy_name(self) -> str:
        return f"{self.name}-wake"

    @property
    def leaders_service(self) -> str:
        """The ClusterIP Service on the leaders' API port that the proxy dials."""
        return f"{self.name}-leaders"

    def labels(self) -> dict[str, str]:
        """The proxy pods' labels: their own app name, so the replicas' group-isolation
        NetworkPolicy (``app.kubernetes.io/name: <name>``) leaves them out."""
        return {APP_NAME_LABEL: self.proxy_name, PART_OF_LABEL: PART_OF_VALUE, ROLE_LABEL: "wake"}

    def upstream(self) -> str:
        return f"{self.leaders_service}.{self.namespace}.svc.cluster.local:{VLLM_API_PORT}"

    def proxy_config(self, upstream: str | None = None, tmp_dir: str = "/tmp") -> str:
        """nginx's stream configuration (module doc). ``upstream`` and ``tmp_dir`` default to
        the pod's; the tests run the same configuration with their own."""
        return (
            nginx_preamble(tmp_dir) + "stream {\n"
            "  server {\n"
            f"    listen {WAKE_PROXY_PORT};\n"
            f"    proxy_pass {upstream or self.upstream()};\n"
            f"    proxy_connect_timeout {WAKE_PROXY_CONNECT_TIMEOUT_SECONDS}s;\n"
            f"    proxy_timeout {self.longest_request_seconds}s;\n"
            "  }\n"
            "  server {\n"
            f"    listen {WAKE_PROXY_HEALTH_PORT};\n"
            "    return ok;\n"
            "  }\n"
            "}\n"
        )

    def manifests(self) -> list[dict[str, Any]]:
        """ServiceAccount, ConfigMap, the leaders' ClusterIP Service, Deployment, PDB and the
        NetworkPolicies."""
        return [
            service_account(self._metadata()),
            nginx_config_map(self._metadata(), self.proxy_config()),
            self.leaders_service_manifest(),
            self.deployment(),
            disruption_budget(self._metadata(), self.labels()),
            *self.network_policies(),
        ]

    def _metadata(self, name: str | None = None) -> dict[str, Any]:
        return {
            "name": name or self.proxy_name,
            "namespace": self.namespace,
            "labels": self.labels(),
        }

    def leaders_service_manifest(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self._metadata(self.leaders_service),
            "spec": {
                "type": "ClusterIP",
                "selector": dict(self.leader_labels),
                "ports": [{"name": "https", "port": VLLM_API_PORT, "targetPort": VLLM_API_PORT}],
            },
        }

    def deployment(self) -> dict[str, Any]:
        proxy = nginx_container(
            "wake-proxy",
            _KIND,
            self.image,
            {"tcp": WAKE_PROXY_PORT, "health": WAKE_PROXY_HEALTH_PORT},
            WAKE_PROXY_HEALTH_PORT,
            WAKE_PROXY_RESOURCES,
        )
        return system_deployment(
            self._metadata(),
            self.labels(),
            WAKE_PROXY_REPLICAS,
            [proxy],
            nginx_volumes(_KIND, self.proxy_name, "16Mi"),
        )

    def network_policies(self) -> list[dict[str, Any]]:
        """The proxy: both ports from the VPC, out to the leaders' port and DNS only. The
        leaders: the API port from the proxy pods (NetworkPolicies add up: the leaders keep
        what they accept today)."""
        leader_labels = dict(self.leader_labels)
        api = [{"protocol": "TCP", "port": VLLM_API_PORT}]
        dns = [{"protocol": "UDP", "port": _DNS_PORT}, {"protocol": "TCP", "port": _DNS_PORT}]
        ports = [WAKE_PROXY_PORT, WAKE_PROXY_HEALTH_PORT]
        proxy = network_policy(
            self._metadata(),
            self.labels(),
            ingress=[
                {
                    "from": [{"ipBlock": {"cidr": self.vpc_cidr}}],
                    "ports": [{"protocol": "TCP", "port": port} for port in ports],
                }
            ],
            egress=[
                {"to": [{"podSelector": {"matchLabels": leader_labels}}], "ports": api},
                {"to": [ANYWHERE_BUT_IMDS], "ports": dns},
            ],
        )
        proxy_pods = {"podSelector": {"matchLabels": self.labels()}}
        leaders = network_policy(
            self._metadata(f"{self.name}-from-wake"),
            leader_labels,
            ingress=[{"from": [proxy_pods], "ports": api}],
        )
        return [proxy, leaders]

    def front(self) -> ServiceFront:
        """The proxy in front of the leaders: TCP on ``WAKE_PROXY_PORT``, a TCP health check
        on ``WAKE_PROXY_HEALTH_PORT`` that never touches a leader."""
        return ServiceFront(
            tuple(self.labels().items()), WAKE_PROXY_PORT, health_check_port=WAKE_PROXY_HEALTH_PORT
        )

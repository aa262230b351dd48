"""The wake proxy of a service scaled to zero that wakes on a client's connection (issue 30).

``ScaleToZero(wake=WakeOnConnect())`` keeps a registered, always-on target behind the
service's Network Load Balancer while no replica runs, so that a client's connection is one
the NLB counts: ``NewFlowCount`` is "the total number of new flows (or connections)
established from clients to targets" (ELB user guide, "CloudWatch metrics for your Network
Load Balancer",
https://docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-cloudwatch-metrics.html).
KEDA's ``aws-cloudwatch`` trigger on it then wakes the LeaderWorkerSet
(``replica_autoscaling``).

What it deploys (on the system nodes, none on the GPU groups):

* a Deployment of ``WAKE_PROXY_REPLICAS`` nginx pods (the router's TLS front's image,
  ``prefix_routing.PROXY_IMAGE``) spread over nodes, with a PodDisruptionBudget, a
  ServiceAccount with no token and no RBAC (nginx never calls the Kubernetes API);
* nginx's **stream** module as a plain TCP pass-through on ``WAKE_PROXY_PORT`` to a ClusterIP
  Service ``<name>-leaders`` on the leaders' API port: no TLS termination, so TLS stays end to
  end to vLLM's leader and the API key is checked there, as without the proxy
  (https://nginx.org/en/docs/stream/ngx_stream_proxy_module.html). At zero replicas that
  Service has no endpoint: the connection to it fails (kube-proxy rejects a connection to a
  Service without endpoints: kubernetes/kubernetes ``pkg/proxy/iptables/proxier.go``, its
  "has no endpoints" REJECT rule, kubernetes/kubernetes#43415; at worst after
  ``proxy_connect_timeout``) and nginx closes the client's connection, which the NLB has
  counted;
* a health port, ``WAKE_PROXY_HEALTH_PORT``, where nginx answers and closes
  (``ngx_stream_return_module``, https://nginx.org/en/docs/stream/ngx_stream_return_module.html):
  the NLB's TCP health check keeps the proxy's targets healthy with or without replicas and
  never touches a leader;
* NetworkPolicies: the proxy accepts both ports from the VPC only (like the leaders) and may
  reach nothing but the leaders' API port and DNS. Its egress rule's pod selector is exactly
  the ClusterIP Service's selector, on the port the leaders listen on: EKS's network policy
  controller allows a Service's ClusterIP only then (aws/amazon-network-policy-controller-k8s
  ``pkg/resolvers/endpoints.go``: "limited to tracking the services where the
  service.spec.Selector matches the pod selector in the egress rules"; issues #194, #207).
  The leaders accept the API port from the
  proxy pods by pod selector (an ``ipBlock`` is meant for cluster-external addresses: "Pod
  IPs are ephemeral and unpredictable", https://kubernetes.io/docs/concepts/services-networking/network-policies/#networkpolicy-resource).

nginx's own configuration: ``proxy_timeout`` (the longest silence between two reads or
writes before the connection is closed, default 10 minutes) is the service's
``longest_request`` plus ``WAKE_PROXY_TIMEOUT_MARGIN_SECONDS`` (a non-streamed generation
writes nothing until it ends), and
``proxy_connect_timeout`` is short (``WAKE_PROXY_CONNECT_TIMEOUT_SECONDS``): an in-cluster
connect to a running leader takes milliseconds, and a client's first attempt at zero is
answered by a close, not a hang. The proxy resolves the ClusterIP Service's name when it
starts and at each reload (``prefix_routing.nginx_command``); a ClusterIP Service's address
does not change while it exists.

The image's nginx (nginx.org's Alpine package, which ``nginxinc/docker-nginx-unprivileged``
``stable/alpine-slim/Dockerfile`` installs) is configured ``--with-stream`` (static; nginx.org
packages' configure arguments), so the pods' configuration loads no module. ASSUMED: not run
in the image here (no registry access); Debian's nginx, which the tests run, has stream as a
dynamic module (``libnginx-mod-stream``), so only the tests' copy says ``load_module``.

Drain-safe scale-in through the proxy: a terminating leader's endpoint turns
``ready: false`` (``serving`` while its probe passes, ``terminating: true``; "EndpointSlices",
https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/#conditions), so
while another leader is ready kube-proxy sends it no new connection, while the connections
the proxy opened before keep going to it; the leader's preStop sleep
(``multi_node_manifests.drain_before_stop``) keeps it serving them for longer than
``longest_request``. Not for the last leader (1 -> 0): with no ready endpoint, kube-proxy
sends new connections to serving-terminating ones (kubernetes/kubernetes
``pkg/proxy/topology.go``, ``CategorizeEndpoints``), so a request that arrives during the
last leader's preStop is accepted and may be cut at its end; its new flow wakes the service
again, and the client retries within the first-request wait. Scale-in to zero happens only
after ``idle_after`` with no flow, no queued and no running request (``_running_trigger``
in ``replica_autoscaling``), which makes that rare, not impossible.

Cost: two small pods (``WAKE_PROXY_RESOURCES``) on the system nodes, always on, and one
in-cluster TCP hop.
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
from .prefix_routing import (
    PROXY_IMAGE,
    PROXY_SECURITY,
    disruption_budget,
    nginx_command,
    system_deployment,
)
from .serving_security import IMDS_CIDR

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
#: ``proxy_timeout`` is ``longest_request`` plus this, so a non-streamed request at the limit
#: is not cut by the proxy; with ``longest_request`` at most the NLB's 300 s deregistration
#: delay, it stays below the NLB's 350 s TCP idle timeout ("Network Load Balancers", idle
#: timeout, https://docs.aws.amazon.com/elasticloadbalancing/latest/network/network-load-balancers.html#connection-idle-timeout).
WAKE_PROXY_TIMEOUT_MARGIN_SECONDS = 30
#: Each proxy pod's requests and limits: one nginx worker relaying bytes.
WAKE_PROXY_RESOURCES = {"cpu": "100m", "memory": "64Mi"}
_CONFIG_MOUNT = "/etc/wake-proxy"
_CONFIG_VOLUME = "wake-proxy-config"
_TMP_VOLUME = "wake-proxy-tmp"
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
    :param pre_stop_seconds: the proxy's preStop sleep, so it outlives its NLB target
        (``multi_node_manifests.drain_before_stop``'s timings).
    :param grace_seconds: its termination grace.
    :param image: the nginx image. Default: ``prefix_routing.PROXY_IMAGE``.
    """

    name: str
    namespace: str
    leader_labels: tuple[tuple[str, str], ...]
    vpc_cidr: str
    longest_request_seconds: int
    pre_stop_seconds: int
    grace_seconds: int
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
            "worker_processes 1;\n"
            f"pid {tmp_dir}/nginx.pid;\n"
            "error_log stderr warn;\n"
            "events { worker_connections 4096; }\n"
            "stream {\n"
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
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": self._metadata(),
                "automountServiceAccountToken": False,
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": self._metadata(),
                "data": {"nginx.conf": self.proxy_config()},
            },
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
        health = {"tcpSocket": {"port": WAKE_PROXY_HEALTH_PORT}}
        proxy = {
            "name": "wake-proxy",
            "image": self.image,
            "command": nginx_command(f"{_CONFIG_MOUNT}/nginx.conf"),
            "ports": [
                {"name": "tcp", "containerPort": WAKE_PROXY_PORT},
                {"name": "health", "containerPort": WAKE_PROXY_HEALTH_PORT},
            ],
            "readinessProbe": {**health, "periodSeconds": 10},
            "livenessProbe": {**health, "periodSeconds": 30, "failureThreshold": 5},
            "resources": {
                "requests": dict(WAKE_PROXY_RESOURCES),
                "limits": dict(WAKE_PROXY_RESOURCES),
            },
            "lifecycle": {"preStop": {"sleep": {"seconds": self.pre_stop_seconds}}},
            "securityContext": dict(PROXY_SECURITY),
            "volumeMounts": [
                {"name": _CONFIG_VOLUME, "mountPath": _CONFIG_MOUNT, "readOnly": True},
                {"name": _TMP_VOLUME, "mountPath": "/tmp"},
            ],
        }
        return system_deployment(
            self._metadata(),
            self.labels(),
            WAKE_PROXY_REPLICAS,
            self.grace_seconds,
            [proxy],
            [
                {"name": _CONFIG_VOLUME, "configMap": {"name": self.proxy_name}},
                {"name": _TMP_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
            ],
        )

    def network_policies(self) -> list[dict[str, Any]]:
        """The proxy: both ports from the VPC, out to the leaders' port and DNS only. The
        leaders: the API port from the proxy pods (NetworkPolicies add up: the leaders keep
        what they accept today)."""
        proxy_pods = {"podSelector": {"matchLabels": self.labels()}}
        leaders = {"podSelector": {"matchLabels": dict(self.leader_labels)}}
        api = [{"protocol": "TCP", "port": VLLM_API_PORT}]
        dns = [{"protocol": "UDP", "port": _DNS_PORT}, {"protocol": "TCP", "port": _DNS_PORT}]
        return [
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": self._metadata(),
                "spec": {
                    "podSelector": {"matchLabels": self.labels()},
                    "policyTypes": ["Ingress", "Egress"],
                    "ingress": [
                        {
                            "from": [{"ipBlock": {"cidr": self.vpc_cidr}}],
                            "ports": [
                                {"protocol": "TCP", "port": WAKE_PROXY_PORT},
                                {"protocol": "TCP", "port": WAKE_PROXY_HEALTH_PORT},
                            ],
                        }
                    ],
                    "egress": [
                        {"to": [leaders], "ports": api},
                        {
                            "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [IMDS_CIDR]}}],
                            "ports": dns,
                        },
                    ],
                },
            },
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": self._metadata(f"{self.name}-from-wake"),
                "spec": {
                    "podSelector": {"matchLabels": dict(self.leader_labels)},
                    "policyTypes": ["Ingress"],
                    "ingress": [{"from": [proxy_pods], "ports": api}],
                },
            },
        ]

    def front(self, service: dict[str, Any]) -> None:
        """Point the load-balanced Service ``service`` at the proxy: its selector, target port
        and a TCP health check on the health port (the AWS Load Balancer Controller's
        ``healthcheck-protocol`` and ``healthcheck-port`` annotations; ``healthcheck-path``
        applies to HTTP(S) only,
        https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/#healthcheck-protocol).
        The NLB keeps its listener, TLS mode and name."""
        prefix = "service.beta.kubernetes.io/aws-load-balancer"
        annotations = service["metadata"]["annotations"]
        annotations.pop(f"{prefix}-healthcheck-path", None)
        annotations[f"{prefix}-healthcheck-protocol"] = "TCP"
        annotations[f"{prefix}-healthcheck-port"] = str(WAKE_PROXY_HEALTH_PORT)
        service["spec"]["selector"] = self.labels()
        for port in service["spec"]["ports"]:
            port["targetPort"] = WAKE_PROXY_PORT

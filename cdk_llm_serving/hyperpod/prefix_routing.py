"""Prefix-cache-aware routing in front of a ``VllmMultiNodeService``'s replicas.

``PrefixRouting`` puts vLLM's router (vllm-project/router, PyPI ``vllm-router`` 0.1.17, its
``cache_aware`` policy) in front of the leaders, on the system nodes: each router pod runs the
router on loopback behind an nginx TLS front that forwards only ``/v1/`` and the router's
probes (its worker-management routes take no credentials), and the router dials every leader
the GPU group has room for by its stable HTTPS name, verified against the service's CA. The
load-balanced Service then selects the routers (``RouterDeployment.front``). Why this router,
what was verified with it, its cost and the published gains: ``docs/design/multi-node-service.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..errors import Problems
from .constants import (
    APP_NAME_LABEL,
    PART_OF_LABEL,
    PART_OF_VALUE,
    ROLE_LABEL,
    SYSTEM_NODE_ROLE,
    VLLM_API_PORT,
)
from .multi_node_manifests import DRAIN_GRACE_SECONDS, DRAIN_PRE_STOP_SECONDS, ServiceFront
from .serving_security import ANYWHERE_BUT_IMDS, network_policy
from .serving_tls import serving_certificate

__all__ = [
    "PROXIED_PREFIX",
    "PROXIED_PROBES",
    "PROXY_IMAGE",
    "ROUTER_IMAGE",
    "ROUTER_METRICS_PORT",
    "ROUTER_TLS_PORT",
    "PrefixRouting",
    "RouterDeployment",
    "RouterPolicy",
]

#: vLLM's router 0.1.17 (``vllm/vllm-router``, built from ``docker/Dockerfile.router``). ASSUMED
#: tag: not checked against the registry; the PyPI wheel of the version was. Pin a digest.
ROUTER_IMAGE = "docker.io/vllm/vllm-router:v0.1.17"
#: NGINX's unprivileged image, nginx 1.28 (stable), non-root when every writable path is under
#: ``/tmp``. ASSUMED tag, as the router's; its configuration runs in the tests on Debian's nginx.
PROXY_IMAGE = "docker.io/nginxinc/nginx-unprivileged:1.28.0-alpine"
#: The router's own port, on loopback only.
ROUTER_PORT = 30000
#: Where the TLS proxy serves (the Service's target port).
ROUTER_TLS_PORT = 8443
#: The router's Prometheus port (``--prometheus-port``; the router's default is 29000).
ROUTER_METRICS_PORT = 29000
#: The distroless ``nonroot`` user and group (uid/gid 65532).
NONROOT_ID = 65532
#: The TLS proxy's requests and limits: one worker, no response buffering.
PROXY_RESOURCES = {"cpu": "200m", "memory": "128Mi"}
#: How often the proxy re-reads the certificate cert-manager renews in the Secret.
PROXY_RELOAD_SECONDS = 3600
#: The routes the proxy forwards to the router: the OpenAI API and the router's probes.
PROXIED_PREFIX = "/v1/"
PROXIED_PROBES = ("/liveness", "/readiness")
#: The NLB's health check on the routers: ``/liveness`` answers while the router runs, while
#: its ``/health`` answers 503 as long as any listed leader is absent (vllm-router 0.1.17).
ROUTER_LIVENESS_PATH = "/liveness"
#: The router's TLS front's name in its volumes and configuration path.
_PROXY_KIND = "router-proxy"
#: How often the router checks each leader's ``/health``: a replica that stopped is marked
#: unhealthy after ``--health-failure-threshold`` (3) checks, 30 s.
HEALTH_CHECK_INTERVAL_SECONDS = 10
_TLS_MOUNT = "/var/run/secrets/router-tls"
_TLS_VOLUME = "router-tls"
_TLS_VOLUME_MOUNT = {"name": _TLS_VOLUME, "mountPath": _TLS_MOUNT, "readOnly": True}
#: Both containers sleep in preStop until the NLB has deregistered the pod.
_PRE_STOP = {"preStop": {"sleep": {"seconds": DRAIN_PRE_STOP_SECONDS}}}


class RouterPolicy(Enum):
    """The router's ``--policy`` values this library offers (``vllm_router/router_args.py``)."""

    #: Longest cached prefix, unless the load is unbalanced (the router's default).
    CACHE_AWARE = "cache_aware"
    #: The less loaded of two random replicas.
    POWER_OF_TWO = "power_of_two"
    #: In turn; no cache awareness (what the NLB does, with health checks).
    ROUND_ROBIN = "round_robin"


@dataclass(frozen=True)
class PrefixRouting:
    """vLLM's router in front of the replicas (module doc: what it deploys, what it costs).

    :param policy: the router's policy. Default: ``RouterPolicy.CACHE_AWARE``.
    :param cache_threshold: the share of a prompt (0-1) that must match a replica's tree for the
        cache-aware policy to pick it over the one with the most room. Default: 0.3, the
        router's own.
    :param replicas: router pods. Default: 2 (one may be disrupted at a time; at least 2).
    :param cpu: each router's CPU request and limit. Default: ``"500m"``.
    :param memory: each router's memory request and limit; the radix tree grows to
        ``--max-tree-size`` (2^25) before eviction. Default: ``"2Gi"`` (decision: no published
        figure of the tree's memory).
    :param image: the router image. Default: ``ROUTER_IMAGE``.
    :param proxy_image: the TLS proxy's image (nginx). Default: ``PROXY_IMAGE``.
    """

    policy: RouterPolicy | str = RouterPolicy.CACHE_AWARE
    cache_threshold: float = 0.3
    replicas: int = 2
    cpu: str = "500m"
    memory: str = "2Gi"
    image: str = ROUTER_IMAGE
    proxy_image: str = PROXY_IMAGE

    def validate(self, problems: Problems, prop: str) -> None:
        """Every bad field at once."""
        allowed = [policy.value for policy in RouterPolicy]
        if self.policy_name not in allowed:
            problems.add(f"{prop}.policy", self.policy, f"one of {', '.join(allowed)}")
        threshold, replicas = self.cache_threshold, self.replicas
        number = isinstance(threshold, int | float) and not isinstance(threshold, bool)
        if not number or not 0 <= threshold <= 1:
            problems.add(f"{prop}.cache_threshold", threshold, "a number from 0 to 1")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2:
            problems.add(
                f"{prop}.replicas",
                replicas,
                "an integer of at least 2: one router in front of every replica is a single "
                "point of failure (and its PodDisruptionBudget would block node drains)",
            )
        if not _positive_quantity(_CPU_QUANTITY, self.cpu):
            problems.add(f"{prop}.cpu", self.cpu, "a CPU quantity such as 500m or 1")
        if not _positive_quantity(_MEMORY_QUANTITY, self.memory):
            problems.add(f"{prop}.memory", self.memory, "a memory quantity such as 512Mi or 2Gi")
        for field_name in ("image", "proxy_image"):
            check_image(problems, f"{prop}.{field_name}", getattr(self, field_name))

    @property
    def policy_name(self) -> str:
        return str(getattr(self.policy, "value", self.policy))


#: The quantities the router's resources take: millicores or cores; whole Mi or Gi.
_CPU_QUANTITY = re.compile(r"\d+m|\d+(\.\d+)?")
_MEMORY_QUANTITY = re.compile(r"\d+(Mi|Gi)")


def _positive_quantity(pattern: re.Pattern[str], value: object) -> bool:
    text = str(value)
    return pattern.fullmatch(text) is not None and any(c in "123456789" for c in text)


def check_image(problems: Problems, prop: str, value: object) -> None:
    """A container image reference: a string without white space."""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        problems.add(prop, value, "a container image reference")


def leader_urls(name: str, namespace: str, ceiling: int) -> list[str]:
    """The HTTPS URL of each leader a LeaderWorkerSet ``name`` may have, below ``ceiling``."""
    return [
        f"https://{name}-{index}.{name}.{namespace}.svc:{VLLM_API_PORT}" for index in range(ceiling)
    ]


def leader_wildcard(name: str, namespace: str) -> str:
    """The name the leader certificate needs for ``leader_urls``."""
    return f"*.{name}.{namespace}.svc"


def nginx_preamble(tmp_dir: str) -> str:
    """The start of every proxy's nginx configuration: one worker, its pid under ``tmp_dir``,
    errors to stderr."""
    return (
        "worker_processes 1;\n"
        f"pid {tmp_dir}/nginx.pid;\n"
        "error_log stderr warn;\n"
        "events { worker_connections 4096; }\n"
    )


def nginx_command(conf: str) -> list[str]:
    """nginx in the foreground with ``conf``, reloaded every ``PROXY_RELOAD_SECONDS`` (files and
    upstream names re-read) and stopped gracefully on SIGTERM (``quit`` lets open connections
    finish; https://nginx.org/en/docs/control.html). Shared by the wake proxy (``wake_proxy``)."""
    script = (
        f"nginx -e stderr -c {conf} -g 'daemon off;' & "
        f"trap 'nginx -e stderr -c {conf} -s quit; wait; exit 0' TERM INT; "
        f"while true; do sleep {PROXY_RELOAD_SECONDS} & wait $!; "
        f"nginx -e stderr -c {conf} -s reload; done"
    )
    return ["/bin/sh", "-c", script]


def nginx_container(
    name: str,
    kind: str,
    image: str,
    ports: dict[str, int],
    probe_port: int,
    resources: dict[str, str],
    mounts: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    """An nginx container of the proxy ``kind`` (``router-proxy``, ``wake-proxy``): its
    configuration from ``/etc/<kind>``, scratch space in ``/tmp``, TCP probes on
    ``probe_port`` (listening is all it does), and the drain of its pod's load-balancer target."""
    tcp = {"tcpSocket": {"port": probe_port}}
    return {
        "name": name,
        "image": image,
        "command": nginx_command(f"/etc/{kind}/nginx.conf"),
        "ports": [{"name": port_name, "containerPort": port} for port_name, port in ports.items()],
        "readinessProbe": {**tcp, "periodSeconds": 10},
        "livenessProbe": {**tcp, "periodSeconds": 30, "failureThreshold": 5},
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "lifecycle": _PRE_STOP,
        "securityContext": dict(PROXY_SECURITY),
        "volumeMounts": [
            *mounts,
            {"name": f"{kind}-config", "mountPath": f"/etc/{kind}", "readOnly": True},
            {"name": f"{kind}-tmp", "mountPath": "/tmp"},
        ],
    }


def nginx_volumes(kind: str, config_map: str, tmp_size: str) -> list[dict[str, Any]]:
    """The configuration and the memory-backed scratch space of ``nginx_container``."""
    return [
        {"name": f"{kind}-config", "configMap": {"name": config_map}},
        {"name": f"{kind}-tmp", "emptyDir": {"medium": "Memory", "sizeLimit": tmp_size}},
    ]


#: A proxy container's security context: no privilege, read-only root, no capability.
PROXY_SECURITY = {
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
#: A proxy pod's security context: the nonroot user, RuntimeDefault seccomp.
PROXY_POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": NONROOT_ID,
    "runAsGroup": NONROOT_ID,
    "fsGroup": NONROOT_ID,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def system_deployment(
    metadata: dict[str, Any],
    labels: dict[str, str],
    replicas: int,
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
) -> dict[str, Any]:
    """A Deployment of proxy pods on the system nodes, spread over nodes, one surge pod at a
    time and none unavailable, that outlive their load-balancer target; its ServiceAccount
    (``metadata``'s name) has no token."""
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
    spread = {"weight": 100, "podAffinityTerm": term}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": metadata["name"],
                    "automountServiceAccountToken": False,
                    "securityContext": dict(PROXY_POD_SECURITY),
                    "terminationGracePeriodSeconds": DRAIN_GRACE_SECONDS,
                    "nodeSelector": {ROLE_LABEL: SYSTEM_NODE_ROLE},
                    # Preferred anti-affinity on the hostname: the pods on different nodes.
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [spread]
                        }
                    },
                    "containers": containers,
                    "volumes": volumes,
                },
            },
        },
    }


def service_account(metadata: dict[str, Any]) -> dict[str, Any]:
    """A ServiceAccount without a token and without RBAC: the pods never call the API."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata,
        "automountServiceAccountToken": False,
    }


def nginx_config_map(metadata: dict[str, Any], config: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {"nginx.conf": config},
    }


def disruption_budget(metadata: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """A PodDisruptionBudget that lets one pod of ``labels`` go at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata,
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
    }


@dataclass(frozen=True)
class RouterDeployment:
    """The router's Kubernetes objects for the multi-node service ``name`` (pure renderers).
    Its pods outlive their load-balancer target as the scaled leaders do
    (``DRAIN_PRE_STOP_SECONDS``).

    :param routing: the user's settings.
    :param name: the service's LeaderWorkerSet name.
    :param namespace: the service's namespace.
    :param ceiling: the most replicas the GPU group has room for (``leader_urls``).
    :param startup_timeout_seconds: how long the router waits for a first healthy leader
        (``--worker-startup-timeout-secs``): the leader's own startup budget.
    :param vpc_cidr: the cluster VPC's CIDR (NetworkPolicy).
    """

    routing: PrefixRouting
    name: str
    namespace: str
    ceiling: int
    startup_timeout_seconds: int
    vpc_cidr: str

    @property
    def router_name(self) -> str:
        return f"{self.name}-router"

    @property
    def secret_name(self) -> str:
        return f"{self.router_name}-tls"

    def labels(self) -> dict[str, str]:
        """The router pods' labels: their own app name, so the replicas' group-isolation
        NetworkPolicy (which selects ``app.kubernetes.io/name: <name>``) leaves them out."""
        return {
            APP_NAME_LABEL: self.router_name,
            PART_OF_LABEL: PART_OF_VALUE,
            ROLE_LABEL: "router",
        }

    def front(self) -> ServiceFront:
        """The routers in front of the leaders: TLS on ``ROUTER_TLS_PORT``, checked on
        ``/liveness`` (leader health is the router's own check)."""
        return ServiceFront(
            tuple(self.labels().items()), ROUTER_TLS_PORT, health_check_path=ROUTER_LIVENESS_PATH
        )

    def router_args(self) -> list[str]:
        """The router's command line (checked by the router's own parser in the tests)."""
        options = {
            "--policy": self.routing.policy_name,
            "--cache-threshold": f"{self.routing.cache_threshold:g}",
            "--worker-startup-timeout-secs": str(self.startup_timeout_seconds),
            "--health-check-interval-secs": str(HEALTH_CHECK_INTERVAL_SECONDS),
            "--health-check-endpoint": "/health",
            # The pod's metrics port, NetworkPolicy-limited to the VPC.
            "--prometheus-host": "0.0.0.0",  # noqa: S104
            "--prometheus-port": str(ROUTER_METRICS_PORT),
        }
        urls = leader_urls(self.name, self.namespace, self.ceiling)
        listen = ["--host", "127.0.0.1", "--port", str(ROUTER_PORT), "--worker-urls", *urls]
        return [*listen, *(part for option in options.items() for part in option)]

    def proxy_config(self, tls_dir: str = _TLS_MOUNT, tmp_dir: str = "/tmp") -> str:
        """nginx's configuration: TLS on ``ROUTER_TLS_PORT``, ``/v1/`` and the router's probes
        forwarded to it on loopback, streaming (no response buffering; long generations keep
        their connection), everything else 404 (nginx ``ngx_http_proxy_module``,
        https://nginx.org/en/docs/http/ngx_http_proxy_module.html). ``tls_dir`` and ``tmp_dir``
        are the pod's paths; the tests run the same configuration with their own."""
        upstream = f"http://127.0.0.1:{ROUTER_PORT}"
        forward = (
            f"proxy_pass {upstream}; proxy_http_version 1.1; "
            'proxy_set_header Connection ""; proxy_buffering off; proxy_request_buffering off; '
            "proxy_read_timeout 3600s; proxy_send_timeout 3600s;"
        )
        probes = "".join(
            f"    location = {path} {{ proxy_pass {upstream}; }}\n" for path in PROXIED_PROBES
        )
        return (
            nginx_preamble(tmp_dir) + "http {\n"
            "  access_log off;\n"
            "  server_tokens off;\n"
            f"  client_body_temp_path {tmp_dir}/client_body;\n"
            f"  proxy_temp_path {tmp_dir}/proxy;\n"
            f"  fastcgi_temp_path {tmp_dir}/fastcgi;\n"
            f"  uwsgi_temp_path {tmp_dir}/uwsgi;\n"
            f"  scgi_temp_path {tmp_dir}/scgi;\n"
            "  client_max_body_size 64m;\n"
            "  server {\n"
            f"    listen {ROUTER_TLS_PORT} ssl;\n"
            f"    ssl_certificate {tls_dir}/tls.crt;\n"
            f"    ssl_certificate_key {tls_dir}/tls.key;\n"
            "    ssl_protocols TLSv1.2 TLSv1.3;\n"
            f"    location {PROXIED_PREFIX} {{ {forward} }}\n"
            f"{probes}"
            "    location / { return 404; }\n"
            "  }\n"
            "}\n"
        )

    def certificate(self, dns_names: list[str]) -> dict[str, Any]:
        """The router's certificate for the load balancer's names, from the service's CA."""

        return serving_certificate(
            self.name, self.namespace, self.labels(), dns_names, self.secret_name
        )

    def manifests(self) -> list[dict[str, Any]]:
        """ServiceAccount, the proxy's ConfigMap, Deployment, PodDisruptionBudget, NetworkPolicy."""
        metadata = self._metadata()
        return [
            service_account(metadata),
            nginx_config_map(
                {**metadata, "name": f"{self.router_name}-proxy"}, self.proxy_config()
            ),
            self.deployment(),
            disruption_budget(metadata, self.labels()),
            self.network_policy(),
        ]

    def _metadata(self) -> dict[str, Any]:
        return {"name": self.router_name, "namespace": self.namespace, "labels": self.labels()}

    def deployment(self) -> dict[str, Any]:
        """The router pods: the router and its TLS front, on the system nodes."""
        return system_deployment(
            self._metadata(),
            self.labels(),
            self.routing.replicas,
            [
                self._router_container(),
                nginx_container(
                    "tls-proxy",
                    _PROXY_KIND,
                    self.routing.proxy_image,
                    {"https": ROUTER_TLS_PORT},
                    ROUTER_TLS_PORT,
                    PROXY_RESOURCES,
                    (_TLS_VOLUME_MOUNT,),
                ),
            ],
            self._volumes(),
        )

    def _router_container(self) -> dict[str, Any]:
        routing = self.routing
        resources = {"cpu": routing.cpu, "memory": routing.memory}
        probe = {"path": "/readiness", "port": ROUTER_TLS_PORT, "scheme": "HTTPS"}
        return {
            "name": "router",
            "image": routing.image,
            "command": ["vllm-router"],
            "args": self.router_args(),
            # rustls-native-certs reads the trust store from SSL_CERT_FILE: the service's CA.
            "env": [{"name": "SSL_CERT_FILE", "value": f"{_TLS_MOUNT}/ca.crt"}],
            "ports": [{"name": "metrics", "containerPort": ROUTER_METRICS_PORT}],
            "resources": {"requests": resources, "limits": dict(resources)},
            "readinessProbe": {"httpGet": probe, "periodSeconds": 10, "failureThreshold": 3},
            "livenessProbe": {
                "httpGet": {**probe, "path": "/liveness"},
                "periodSeconds": 30,
                "failureThreshold": 5,
            },
            "lifecycle": _PRE_STOP,
            "securityContext": PROXY_SECURITY,
            "volumeMounts": [_TLS_VOLUME_MOUNT],
        }

    def _volumes(self) -> list[dict[str, Any]]:
        """The TLS Secret (group-readable: the containers run as the nonroot user and the
        files belong to fsGroup), the proxy's configuration and its scratch space."""
        tls_files = [{"key": key, "path": key} for key in ("tls.crt", "tls.key", "ca.crt")]
        return [
            {
                "name": _TLS_VOLUME,
                "secret": {
                    "secretName": self.secret_name,
                    "defaultMode": 0o440,
                    "items": tls_files,
                },
            },
            *nginx_volumes(_PROXY_KIND, f"{self.router_name}-proxy", "64Mi"),
        ]

    def network_policy(self) -> dict[str, Any]:
        """TLS and metrics from the VPC; egress anywhere but the instance metadata service."""
        ports = [ROUTER_TLS_PORT, ROUTER_METRICS_PORT]
        return network_policy(
            self._metadata(),
            self.labels(),
            ingress=[
                {
                    "from": [{"ipBlock": {"cidr": self.vpc_cidr}}],
                    "ports": [{"protocol": "TCP", "port": port} for port in ports],
                }
            ],
            egress=[{"to": [ANYWHERE_BUT_IMDS]}],
        )

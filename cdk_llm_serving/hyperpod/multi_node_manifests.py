"""Pure renderers of a ``VllmMultiNodeService``'s Kubernetes objects.

``MultiNodeWorkload`` holds the immutable inputs (names, image, the vLLM configuration, the
placement, the exposure) and returns the LeaderWorkerSet, the Service, the pod templates and
the NetworkPolicies as plain dicts: no construct, no state, no warning. ``Exposure`` says how
clients reach the leaders, ``ServiceFront`` which pods stand before them. Sources and timings:
``docs/design/multi-node-service.md``.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass
from typing import Any

from ..errors import Problems
from ..vllm.config import VllmConfig
from ..vllm.multinode import (
    Startup,
    leader_command,
    with_api_key_file,
    with_route_guard,
    worker_command,
)
from .constants import (
    APP_NAME_LABEL,
    GPU_TAINT_KEY,
    GROUP_LABEL,
    INSTANCE_TYPE_LABEL,
    LEADER_POD_ROLE,
    LWS_API_VERSION,
    NODE_HEALTH_LABEL,
    NODE_HEALTHY,
    PART_OF_LABEL,
    PART_OF_VALUE,
    ROLE_LABEL,
    VLLM_API_PORT,
    VLLM_HEALTH_PATH,
    WORKER_POD_ROLE,
)
from .multi_node_placement import MultiNodePlacement
from .pod_spec import container_security_context, pod_security
from .serving_image import efa_environment
from .serving_security import API_KEY_FILE, API_KEY_MOUNT, api_key_volume, network_policies
from .serving_tls import serving_secret_name, tls_flags, tls_mount, tls_volume

__all__ = [
    "API_SERVICE_SUFFIX",
    "HTTPS_PORT",
    "TLS_LISTENER_POLICY",
    "WEIGHTS_MOUNT",
    "Exposure",
    "MultiNodeWorkload",
    "ServiceFront",
]

#: Where the FSx model store's claim is mounted in every pod.
WEIGHTS_MOUNT = "/models"
_NCCL_ENVIRONMENT = {"NCCL_DEBUG": "WARN"}
_PROBE_PERIOD_SECONDS = 10
#: How long a serving pod has to stop (vLLM finishes or aborts its requests).
TERMINATION_GRACE_SECONDS = 120
#: The load balancer's listener port: TLS always (vLLM's own, or the NLB's with an ACM
#: certificate); there is no plain-HTTP listener.
HTTPS_PORT = 443
#: The NLB's TLS listener policy with an ACM certificate: TLS 1.3 and 1.2 only (the policy AWS
#: recommends, https://docs.aws.amazon.com/elasticloadbalancing/latest/network/describe-ssl-policies.html).
TLS_LISTENER_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
#: The AWS Load Balancer Controller's Service annotations' prefix.
LB_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer"


#: A DNS name for a certificate: labels of letters, digits and hyphens; an optional leading ``*.``.
_DNS_NAME = re.compile(
    r"(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
)


@dataclass(frozen=True)
class Exposure:
    """How clients reach the leaders: an internal NLB on 443, TLS end to end.

    Without ``certificate_arn`` the NLB passes vLLM's own TLS through (clients trust the
    ``CaCertificate`` output); with it, the NLB terminates TLS with the ACM certificate and
    re-encrypts to the pod. Health checks are HTTPS to vLLM's ``/health`` either way. The AWS
    Load Balancer Controller's annotations:
    https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/.

    :param public: internet-facing instead of internal; needs a certificate, explicit
        ``source_ranges`` and an API key. Default: ``False``.
    :param certificate_arn: ACM certificate the NLB terminates TLS with (the name clients
        see); it re-encrypts to vLLM. Default: none; the NLB passes vLLM's TLS through.
    :param tls_dns_names: further names for the leader's certificate, the ones clients use
        without ``certificate_arn`` (e.g. a Route 53 alias of the load balancer). Default: the
        Service's in-cluster names and the load balancer's hostname only.
    :param source_ranges: client CIDRs the load balancer admits (its security group's
        inbound rules, from ``spec.loadBalancerSourceRanges``). Default: the cluster VPC's CIDR.
    """

    public: bool = False
    certificate_arn: str | None = None
    source_ranges: tuple[str, ...] | None = None
    tls_dns_names: tuple[str, ...] = ()

    def validate(self, problems: Problems, prop: str) -> None:
        """Source ranges are CIDRs; a public endpoint names its TLS certificate and clients."""
        for index, cidr in enumerate(self.source_ranges or ()):
            try:
                ipaddress.ip_network(cidr)
            except ValueError:
                problems.add(
                    f"{prop}.source_ranges[{index}]", cidr, "a CIDR such as 203.0.113.0/24"
                )
        for index, dns_name in enumerate(self.tls_dns_names):
            if not _DNS_NAME.fullmatch(dns_name):
                problems.add(
                    f"{prop}.tls_dns_names[{index}]",
                    dns_name,
                    "a DNS name such as llm.example.com (a leading *. for a wildcard)",
                )
        if not self.public:
            return
        if not self.certificate_arn:
            problems.add(
                f"{prop}.certificate_arn", None, "public=True needs an ACM certificate (TLS on 443)"
            )
        if not self.source_ranges:
            problems.add(
                f"{prop}.source_ranges",
                self.source_ranges,
                "public=True needs the client CIDRs the load balancer may admit, given explicitly",
            )

    def _render(self) -> dict[str, str]:
        """The Service annotations the AWS Load Balancer Controller reads for this exposure."""
        annotations = {
            f"{LB_ANNOTATION}-type": "external",
            f"{LB_ANNOTATION}-nlb-target-type": "ip",
            f"{LB_ANNOTATION}-scheme": "internet-facing" if self.public else "internal",
            f"{LB_ANNOTATION}-healthcheck-path": VLLM_HEALTH_PATH,
            f"{LB_ANNOTATION}-healthcheck-protocol": "HTTPS",
        }
        if self.certificate_arn:
            annotations[f"{LB_ANNOTATION}-ssl-cert"] = self.certificate_arn
            annotations[f"{LB_ANNOTATION}-ssl-ports"] = str(HTTPS_PORT)
            annotations[f"{LB_ANNOTATION}-ssl-negotiation-policy"] = TLS_LISTENER_POLICY
            annotations[f"{LB_ANNOTATION}-backend-protocol"] = "ssl"
        return annotations


#: Suffix of the load-balanced Service's name, ``<name>-api``: LeaderWorkerSet's headless
#: Service takes the LWS's own name, which ``LWS_LEADER_ADDRESS`` resolves through (design note).
API_SERVICE_SUFFIX = "-api"
#: A Service name is an RFC 1035 label of at most 63 characters
#: (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#rfc-1035-label-names).
SERVICE_NAME_MAX = 63
#: The NLB target group's deregistration delay when the Service sets none
#: (https://docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-target-groups.html#deregistration-delay).
NLB_DEREGISTRATION_DELAY_SECONDS = 300
#: The AWS Load Balancer Controller's default NLB health-check interval
#: (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/#healthcheck-interval).
NLB_HEALTH_CHECK_INTERVAL_SECONDS = 10
#: What vLLM gets after its preStop hook to stop (SIGTERM to SIGKILL).
STOP_MARGIN_SECONDS = 30
#: A scaled pod's preStop sleep: it outlives its load-balancer target (design note, "Drain").
DRAIN_PRE_STOP_SECONDS = NLB_DEREGISTRATION_DELAY_SECONDS + NLB_HEALTH_CHECK_INTERVAL_SECONDS
#: ... and its termination grace.
DRAIN_GRACE_SECONDS = DRAIN_PRE_STOP_SECONDS + STOP_MARGIN_SECONDS


@dataclass(frozen=True)
class ServiceFront:
    """Pods that the load-balanced Service selects instead of the leaders (the prefix-aware
    router, the wake proxy); ``VllmMultiNodeService.add_front`` puts one in place.

    :param labels: the front pods' labels: the Service's selector.
    :param port: their port: the Service's target port.
    :param health_check_path: the NLB's HTTPS health check path on them. Default: vLLM's.
    :param health_check_port: a TCP health check on this port instead of HTTPS. Default: none.
    """

    labels: tuple[tuple[str, str], ...]
    port: int
    health_check_path: str | None = None
    health_check_port: int | None = None


@dataclass(frozen=True)
class MultiNodeWorkload:
    """What the multi-node service's objects are rendered from.

    :param name: the LeaderWorkerSet name (the ``app.kubernetes.io/name`` label); the
        load-balanced Service is ``<name>-api``.
    :param namespace: where every object lives.
    :param service_account: the leader's service account.
    :param image: the vLLM image.
    :param config: the vLLM configuration of every pod (the leader adds its TLS flags).
    :param startup: ``native`` or ``ray`` (``vllm.multinode``).
    :param placement: group, nodes per replica, replicas, resources.
    :param startup_timeout_seconds: the cold start the leader's startup probe allows.
    :param api_key_class: the SecretProviderClass of the API key. ``None``: no API key.
    :param claim_name: the FSx model store's PersistentVolumeClaim. ``None``: weights are
        streamed from S3.
    :param exposure: how clients reach the leaders.
    :param vpc_cidr: the cluster VPC's CIDR (default source range, NetworkPolicy).
    :param load_balancer_subnets: subnet IDs the load balancer is placed in. Default: none;
        the AWS Load Balancer Controller discovers the subnets by tag.
    :param worker_service_account: the workers' service account (no API key). Default:
        ``service_account``.
    :param front: the pods the Service selects instead of the leaders. Default: none.
    :param routed: the prefix-aware router dials the leaders (``--enable-scale-out``).
        Default: ``False``.
    :param scaled: an autoscaler sets the replica count: ``spec.replicas`` is left out and
        every pod drains before it stops. Default: ``False``.
    :param healthy_threshold: the NLB health check's healthy threshold. Default: the
        controller's.
    """

    name: str
    namespace: str
    service_account: str
    image: str
    config: VllmConfig
    startup: Startup
    placement: MultiNodePlacement
    startup_timeout_seconds: float
    api_key_class: str | None
    claim_name: str | None
    exposure: Exposure
    vpc_cidr: str
    load_balancer_subnets: tuple[str, ...] = ()
    worker_service_account: str | None = None
    front: ServiceFront | None = None
    routed: bool = False
    scaled: bool = False
    healthy_threshold: int | None = None

    @property
    def service_name(self) -> str:
        """The load-balanced Service's name (``<name>-api``)."""
        return f"{self.name}{API_SERVICE_SUFFIX}"

    def labels(self) -> dict[str, str]:
        return {APP_NAME_LABEL: self.name, PART_OF_LABEL: PART_OF_VALUE}

    def leader_labels(self) -> dict[str, str]:
        return {**self.labels(), ROLE_LABEL: LEADER_POD_ROLE}

    def pod_template(self, role: str, command: list[str], args: list[str]) -> dict[str, Any]:
        """A pod of a replica: the vLLM container, on a healthy node of the GPU group."""
        container = self._container(command, args)
        volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
        if self.claim_name is not None:
            container["volumeMounts"].append(
                {"name": "weights", "mountPath": WEIGHTS_MOUNT, "readOnly": True}
            )
            volumes.append(
                {
                    "name": "weights",
                    "persistentVolumeClaim": {"claimName": self.claim_name, "readOnly": True},
                }
            )
        if role == LEADER_POD_ROLE:
            container.update(self._api_serving())
            container["volumeMounts"].append(tls_mount())
            volumes.append(tls_volume(serving_secret_name(self.name)))
            if self.api_key_class is not None:
                container["volumeMounts"].append(
                    {"name": "api-key", "mountPath": API_KEY_MOUNT, "readOnly": True}
                )
                volumes.append(api_key_volume(self.api_key_class))
        if self.scaled:  # scale-in: serve in-flight requests until the NLB let go (design note)
            container["lifecycle"] = {"preStop": {"sleep": {"seconds": DRAIN_PRE_STOP_SECONDS}}}
        grace = DRAIN_GRACE_SECONDS if self.scaled else TERMINATION_GRACE_SECONDS
        account = self.worker_service_account if role != LEADER_POD_ROLE else None
        return {
            "metadata": {"labels": {**self.labels(), ROLE_LABEL: role}},
            "spec": {
                "serviceAccountName": account or self.service_account,
                **pod_security(),
                "terminationGracePeriodSeconds": grace,
                **self._scheduling(),
                "containers": [container],
                "volumes": volumes,
            },
        }

    def _container(self, command: list[str], args: list[str]) -> dict[str, Any]:
        """The vLLM container: the node's GPUs and EFA devices, Guaranteed CPU and memory."""
        environment = {**efa_environment(), **_NCCL_ENVIRONMENT}
        resources = self.placement.resources
        return {
            "name": "vllm",
            "image": self.image,
            "command": command,
            "args": args,
            "env": [{"name": key, "value": value} for key, value in environment.items()],
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "securityContext": container_security_context(),
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        }

    def _api_serving(self) -> dict[str, Any]:
        """The leader serves the API over HTTPS: its port and probes (startup allows the cold
        start; the kubelet does not verify the certificate, ``serving_tls``)."""
        failures = math.ceil(self.startup_timeout_seconds / _PROBE_PERIOD_SECONDS)
        probe = {
            "httpGet": {"path": VLLM_HEALTH_PATH, "port": VLLM_API_PORT, "scheme": "HTTPS"},
            "periodSeconds": _PROBE_PERIOD_SECONDS,
        }
        return {
            "ports": [{"name": "https", "containerPort": VLLM_API_PORT}],
            "startupProbe": {**probe, "failureThreshold": failures},
            "readinessProbe": {**probe, "failureThreshold": 3},
            "livenessProbe": {**probe, "periodSeconds": 30, "failureThreshold": 5},
        }

    def _scheduling(self) -> dict[str, Any]:
        """Node selector, health affinity and GPU toleration of a serving pod."""
        group = self.placement.group
        healthy = {"key": NODE_HEALTH_LABEL, "operator": "In", "values": [NODE_HEALTHY]}
        return {
            "nodeSelector": {
                INSTANCE_TYPE_LABEL: str(group.instance_type),
                GROUP_LABEL: group.name,
            },
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [healthy]}]
                    }
                }
            },
            "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        }

    def leader_worker_set(self) -> dict[str, Any]:
        """The LeaderWorkerSet: ``replicas`` groups of ``nodes`` pods; only the leader serves."""
        # Only the leader serves the API: the TLS flags go on its command line alone.
        leader_flags = {**self.config.extra_flags, **tls_flags()}
        if self.routed:
            # The router tokenizes through /v1/chat/completions/render, which vLLM answers 403
            # without --enable-scale-out (vllm/entrypoints/scale_out/factories.py).
            leader_flags["enable-scale-out"] = True
        leader_config = self.config.with_changes(extra_flags=leader_flags)
        # vLLM serves /v1 (key-checked), /health and /metrics only: route_guard.py.
        nodes = self.placement.nodes
        leader = with_route_guard(leader_command(leader_config, nodes, self.startup))
        worker = worker_command(self.config, nodes, self.startup)
        if self.api_key_class is not None:
            leader = with_api_key_file(leader, API_KEY_FILE)
        template: dict[str, Any] = {
            "size": nodes,
            "restartPolicy": "RecreateGroupOnPodRestart",
            "workerTemplate": self.pod_template(WORKER_POD_ROLE, worker.command, worker.args),
        }
        leader_template = self.pod_template(LEADER_POD_ROLE, leader.command, leader.args)
        # One node per replica: the leader is the whole group, in the worker template.
        template["leaderTemplate" if nodes > 1 else "workerTemplate"] = leader_template
        replicas = {} if self.scaled else {"replicas": self.placement.replicas}
        return {
            "apiVersion": LWS_API_VERSION,
            "kind": "LeaderWorkerSet",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels()},
            "spec": {
                **replicas,
                "startupPolicy": "LeaderCreated",
                "rolloutStrategy": self.placement.rollout_strategy,
                "leaderWorkerTemplate": template,
            },
        }

    def service_manifest(self) -> dict[str, Any]:
        """The Service on the leaders (or on their front), behind the load balancer
        ``exposure`` describes; named ``<name>-api``, apart from the LWS's headless Service."""
        front = self.front
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": self.service_name,
                "namespace": self.namespace,
                "labels": self.labels(),
                "annotations": self._load_balancer_annotations(),
            },
            "spec": {
                "type": "LoadBalancer",
                "loadBalancerSourceRanges": list(self.exposure.source_ranges or [self.vpc_cidr]),
                "selector": dict(front.labels) if front else self.leader_labels(),
                "ports": [
                    {
                        "name": "https",
                        "port": HTTPS_PORT,
                        "targetPort": front.port if front else VLLM_API_PORT,
                        "protocol": "TCP",
                    }
                ],
            },
        }

    def _load_balancer_annotations(self) -> dict[str, str]:
        """The exposure's annotations, the front's health check, the subnets when named
        (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/#subnets)
        and the healthy threshold."""
        annotations = self.exposure._render()
        front = self.front
        tcp_port = front.health_check_port if front else None
        if tcp_port is not None:  # healthcheck-path applies to HTTP(S) checks only
            del annotations[f"{LB_ANNOTATION}-healthcheck-path"]
            annotations[f"{LB_ANNOTATION}-healthcheck-protocol"] = "TCP"
        elif front is not None and front.health_check_path is not None:
            annotations[f"{LB_ANNOTATION}-healthcheck-path"] = front.health_check_path
        if self.load_balancer_subnets:
            annotations[f"{LB_ANNOTATION}-subnets"] = ",".join(self.load_balancer_subnets)
        if self.healthy_threshold is not None:
            annotations[f"{LB_ANNOTATION}-healthcheck-healthy-threshold"] = str(
                self.healthy_threshold
            )
        if tcp_port is not None:
            annotations[f"{LB_ANNOTATION}-healthcheck-port"] = str(tcp_port)
        return annotations

    def network_policies(self) -> list[dict[str, Any]]:
        """Group-internal traffic, the API port from the VPC to leaders, no metadata service."""
        return network_policies(
            self.name,
            self.namespace,
            self.labels(),
            self.leader_labels(),
            VLLM_API_PORT,
            self.vpc_cidr,
        )

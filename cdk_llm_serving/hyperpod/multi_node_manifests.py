"""Pure renderers of a ``VllmMultiNodeService``'s Kubernetes objects.

``MultiNodeWorkload`` holds the immutable inputs (names, image, the vLLM configuration, the
placement, the exposure) and returns the LeaderWorkerSet, the Service, the pod templates and
the NetworkPolicies as plain dicts: no construct, no state, no warning. ``Exposure`` says how
clients reach the leaders.
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
    "api_service_name",
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


#: A DNS name for a certificate: labels of letters, digits and hyphens; an optional leading ``*.``.
_DNS_NAME = re.compile(
    r"(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
)


@dataclass(frozen=True)
class Exposure:
    """How clients reach the leaders: an internal NLB on 443, TLS end to end.

    Annotations of the AWS Load Balancer Controller
    (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/):

    * without ``certificate_arn``: a TCP listener on 443 that passes vLLM's own TLS through to
      the pod; clients verify the leader's certificate against the service's CA (``ca.crt``,
      the ``CaCertificate`` output, README "HyperPod security").
    * with ``certificate_arn``: a TLS listener on 443 with that ACM certificate
      (``ssl-cert``, ``ssl-ports``, ``ssl-negotiation-policy``) that opens TLS to the pod again
      (``backend-protocol: ssl``): the NLB decrypts and re-encrypts, no hop is plaintext. The
      NLB does not validate the pod's certificate ("The load balancer does not validate these
      certificates", https://docs.aws.amazon.com/elasticloadbalancing/latest/network/create-tls-listener.html),
      so the cluster CA serves for that hop.

    Health checks are HTTPS to vLLM's ``/health`` in both modes (an HTTPS health check fails
    on a target that offers only TLS 1.3, same page; uvicorn's default context offers 1.2 too).

    :param public: internet-facing instead of internal; needs a certificate, explicit
        ``source_ranges`` and an API key. Default: ``False``.
    :param certificate_arn: ACM certificate the NLB terminates TLS with (the name clients
        see); it re-encrypts to vLLM. Default: none; the NLB passes vLLM's TLS through.
    :param tls_dns_names: further names for the leader's certificate, the ones clients use
        without ``certificate_arn`` (e.g. a Route 53 alias of the load balancer). Default: the
        Service's in-cluster names and the load balancer's hostname only.
    :param source_ranges: client CIDRs the load balancer admits (the AWS Load Balancer
        Controller turns ``spec.loadBalancerSourceRanges`` into the NLB security group's
        inbound rules: https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/#lb-source-ranges).
        Default: the cluster VPC's CIDR.
    """

    public: bool = False
    certificate_arn: str | None = None
    source_ranges: tuple[str, ...] | None = None
    tls_dns_names: tuple[str, ...] = ()

    @property
    def port(self) -> int:
        return HTTPS_PORT

    @property
    def scheme(self) -> str:
        return "https"

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
        prefix = "service.beta.kubernetes.io/aws-load-balancer"
        annotations = {
            f"{prefix}-type": "external",
            f"{prefix}-nlb-target-type": "ip",
            f"{prefix}-scheme": "internet-facing" if self.public else "internal",
            f"{prefix}-healthcheck-path": VLLM_HEALTH_PATH,
            f"{prefix}-healthcheck-protocol": "HTTPS",
        }
        if self.certificate_arn:
            annotations[f"{prefix}-ssl-cert"] = self.certificate_arn
            annotations[f"{prefix}-ssl-ports"] = str(HTTPS_PORT)
            annotations[f"{prefix}-ssl-negotiation-policy"] = TLS_LISTENER_POLICY
            annotations[f"{prefix}-backend-protocol"] = "ssl"
        return annotations


#: The router's own liveness route (vllm-project/router: ``/liveness``, 200 while it runs).
ROUTER_LIVENESS_PATH = "/liveness"
#: Suffix of the load-balanced Service's name: ``<name>-api``. LeaderWorkerSet creates its
#: headless Service under the LWS's own name, and only if no Service of that name exists
#: (kubernetes-sigs/lws ``pkg/utils/controller/controller_utils.go``
#: ``CreateHeadlessServiceIfNotExists``); the pods' ``LWS_LEADER_ADDRESS``
#: (``<lws>-<group>.<lws>.<namespace>``) resolves only through that headless Service (pod A
#: records exist for headless Services only: Kubernetes DNS specification,
#: https://github.com/kubernetes/dns/blob/master/docs/specification.md). So the API's Service
#: must not take the LWS's name.
API_SERVICE_SUFFIX = "-api"
#: A Service name is an RFC 1035 label of at most 63 characters
#: (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#rfc-1035-label-names).
SERVICE_NAME_MAX = 63


def api_service_name(name: str) -> str:
    """The load-balanced Service of the multi-node service ``name``: ``<name>-api``."""
    return f"{name}{API_SERVICE_SUFFIX}"


@dataclass(frozen=True)
class MultiNodeWorkload:
    """What the multi-node service's objects are rendered from.

    :param name: the LeaderWorkerSet name (the ``app.kubernetes.io/name`` label); the
        load-balanced Service is ``<name>-api`` (``api_service_name``), so LeaderWorkerSet's
        headless Service keeps ``<name>``.
    :param namespace: where every object lives.
    :param service_account: the leader's service account (its Pod Identity reads the weights
        when streaming and the API key).
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
    :param load_balancer_subnets: subnet IDs the load balancer is placed in
        (``service.beta.kubernetes.io/aws-load-balancer-subnets``). Default: none; the AWS Load
        Balancer Controller discovers the subnets by tag.
    :param router_labels: the labels of the prefix-aware router's pods (``prefix_routing``):
        the load-balanced Service selects them, on ``router_port``, instead of the leaders.
        Default: none; the Service selects the leaders.
    :param router_port: the routers' TLS port (with ``router_labels``).
    :param worker_service_account: the workers' service account, whose Pod Identity (if any)
        reads the weights only: workers never mount the API key (issue 32). Default:
        ``service_account``.
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
    router_labels: tuple[tuple[str, str], ...] = ()
    router_port: int | None = None
    worker_service_account: str | None = None

    @property
    def nodes(self) -> int:
        return self.placement.nodes

    @property
    def service_name(self) -> str:
        """The load-balanced Service's name (``<name>-api``)."""
        return api_service_name(self.name)

    def labels(self) -> dict[str, str]:
        return {APP_NAME_LABEL: self.name, PART_OF_LABEL: PART_OF_VALUE}

    def leader_labels(self) -> dict[str, str]:
        return {**self.labels(), ROLE_LABEL: LEADER_POD_ROLE}

    def pod_template(
        self, role: str, image: str, command: list[str], args: list[str], claim_name: str | None
    ) -> dict[str, Any]:
        """A pod of a replica: the vLLM container, on a healthy node of the GPU group."""
        container = self._container(image, command, args)
        volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
        if claim_name is not None:
            container["volumeMounts"].append(
                {"name": "weights", "mountPath": WEIGHTS_MOUNT, "readOnly": True}
            )
            volumes.append(
                {
                    "name": "weights",
                    "persistentVolumeClaim": {"claimName": claim_name, "readOnly": True},
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
        return {
            "metadata": {"labels": {**self.labels(), ROLE_LABEL: role}},
            "spec": {
                "serviceAccountName": self.service_account
                if role == LEADER_POD_ROLE
                else self.worker_service_account or self.service_account,
                **pod_security(),
                "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
                **self._scheduling(),
                "containers": [container],
                "volumes": volumes,
            },
        }

    def _container(self, image: str, command: list[str], args: list[str]) -> dict[str, Any]:
        """The vLLM container: the node's GPUs and EFA devices, Guaranteed CPU and memory."""
        environment = {**efa_environment(), **_NCCL_ENVIRONMENT}
        resources = self.placement.resources
        return {
            "name": "vllm",
            "image": image,
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

    def leader_worker_set(
        self,
        image: str | None = None,
        startup: Startup | None = None,
        claim_name: str | None = None,
    ) -> dict[str, Any]:
        """The LeaderWorkerSet: ``replicas`` groups of ``nodes`` pods; only the leader serves.

        ``image``, ``startup`` and ``claim_name`` default to the workload's own.
        """
        image = image or self.image
        startup = startup or self.startup
        claim_name = claim_name if claim_name is not None else self.claim_name
        # Only the leader serves the API: the TLS flags go on its command line alone.
        leader_flags = {**self.config.extra_flags, **tls_flags()}
        if self.router_labels:
            # vLLM's router tokenizes through /v1/chat/completions/render for its cache-aware
            # decisions; vLLM 0.32 answers it 403 unless --enable-scale-out
            # (vllm/entrypoints/scale_out/factories.py register_scale_out_api_routers). Its other
            # route, /inference/v1/generate, stays closed by the route guard (not under /v1).
            leader_flags["enable-scale-out"] = True
        leader_config = self.config.with_changes(extra_flags=leader_flags)
        # vLLM serves /v1 (key-checked), /health and /metrics only: route_guard.py.
        leader = with_route_guard(leader_command(leader_config, self.nodes, startup))
        worker = worker_command(self.config, self.nodes, startup)
        if self.api_key_class is not None:
            leader = with_api_key_file(leader, API_KEY_FILE)
        template: dict[str, Any] = {
            "size": self.nodes,
            "restartPolicy": "RecreateGroupOnPodRestart",
            "workerTemplate": self.pod_template(
                WORKER_POD_ROLE, image, worker.command, worker.args, claim_name
            ),
        }
        leader_template = self.pod_template(
            LEADER_POD_ROLE, image, leader.command, leader.args, claim_name
        )
        # One node per replica: the leader is the whole group, in the worker template.
        template["leaderTemplate" if self.nodes > 1 else "workerTemplate"] = leader_template
        return {
            "apiVersion": LWS_API_VERSION,
            "kind": "LeaderWorkerSet",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels()},
            "spec": {
                "replicas": self.placement.replicas,
                "startupPolicy": "LeaderCreated",
                "rolloutStrategy": self.placement.rollout_strategy,
                "leaderWorkerTemplate": template,
            },
        }

    def service_manifest(self) -> dict[str, Any]:
        """The Service on the leaders (or on their router), behind the load balancer
        ``exposure`` describes.

        Named ``<name>-api`` (``api_service_name``): the LWS's own name is its headless
        Service's, which the workers find the leader through.
        """
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
                "selector": dict(self.router_labels) or self.leader_labels(),
                "ports": [
                    {
                        "name": self.exposure.scheme,
                        "port": self.exposure.port,
                        "targetPort": self.router_port if self.router_labels else VLLM_API_PORT,
                        "protocol": "TCP",
                    }
                ],
            },
        }

    def _load_balancer_annotations(self) -> dict[str, str]:
        """The exposure's annotations, and the subnets when the service names them.

        ``aws-load-balancer-subnets`` takes subnet IDs or Name tags, comma-separated; the
        controller then uses exactly those instead of discovering subnets by tag
        (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/#subnets).
        """
        annotations = self.exposure._render()
        if self.router_labels:
            # The router's ``/health`` answers 503 while any listed leader is absent, and the
            # router lists every leader the group has room for: the targets would never turn
            # healthy (and, with the readiness gate, the routers never Ready). ``/liveness``
            # answers while the router runs; leader health is the router's own check
            # (vllm-router 0.1.17, measured in the deploy review).
            annotations["service.beta.kubernetes.io/aws-load-balancer-healthcheck-path"] = (
                ROUTER_LIVENESS_PATH
            )
        if self.load_balancer_subnets:
            annotations["service.beta.kubernetes.io/aws-load-balancer-subnets"] = ",".join(
                self.load_balancer_subnets
            )
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


#: The NLB target group's deregistration delay when the Service sets none: 300 s (ELB user
#: guide, "Target groups for your Network Load Balancers", Deregistration delay,
#: https://docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-target-groups.html#deregistration-delay).
NLB_DEREGISTRATION_DELAY_SECONDS = 300
#: The AWS Load Balancer Controller's default NLB health-check interval: 10 s
#: (``service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval``,
#: https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/#healthcheck-interval).
NLB_HEALTH_CHECK_INTERVAL_SECONDS = 10
#: What vLLM gets after its preStop hook to stop (SIGTERM to SIGKILL).
STOP_MARGIN_SECONDS = 30


def drain_before_stop(spec: dict[str, Any]) -> dict[str, int]:
    """Make every pod of the LeaderWorkerSet ``spec`` outlive its load-balancer target.

    When a pod is deleted, the kubelet runs its preStop hook and only then sends SIGTERM,
    within ``terminationGracePeriodSeconds`` counted from the deletion ("Termination of Pods",
    https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination). The
    terminating leader leaves the Service's ready endpoints at once and the AWS Load Balancer
    Controller deregisters its IP target; the NLB stops opening connections to it and lets
    open ones run for the deregistration delay (see ``NLB_DEREGISTRATION_DELAY_SECONDS``;
    the controller's "Pod readiness gate" page describes the same race for rollouts,
    https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/pod_readiness_gate/).
    So each pod sleeps in preStop for the deregistration delay plus one health-check
    interval (the native ``sleep`` action, on by default since Kubernetes 1.30,
    https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/#hook-handler-implementations),
    serving its in-flight requests meanwhile, and then has ``STOP_MARGIN_SECONDS`` to stop.
    The workers sleep as long as the leader: LeaderWorkerSet scales in by deleting a whole
    group, leader and workers together (kubernetes-sigs/lws
    ``pkg/controllers/leaderworkerset_controller.go``: the leader StatefulSet's replicas
    drop, and each worker StatefulSet is owned by its leader pod), and a leader whose
    workers stopped first fails the requests it still holds. A request longer than the
    deregistration delay may be cut: the longest expected request must fit in it.

    Behind the wake proxy (scale to zero's ``WakeOnConnect``, ``wake_proxy``) the leaders are
    no NLB targets: clients' connections reach them through the proxy and a ClusterIP Service.
    The same sleep holds there: a terminating leader's endpoint turns ``ready: false``
    (``terminating: true``; https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/#conditions)
    and gets no new connection, while the proxy's open connections to it keep going until
    they end, within ``longest_request``, well inside the sleep.

    Returns the timings set (``pre_stop_seconds``, ``grace_seconds``).
    """
    pre_stop = NLB_DEREGISTRATION_DELAY_SECONDS + NLB_HEALTH_CHECK_INTERVAL_SECONDS
    grace = pre_stop + STOP_MARGIN_SECONDS
    template = spec["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        pod = template.get(key)
        if pod is None:
            continue
        pod["spec"]["terminationGracePeriodSeconds"] = grace
        for container in pod["spec"]["containers"]:
            container["lifecycle"] = {"preStop": {"sleep": {"seconds": pre_stop}}}
    return {"pre_stop_seconds": pre_stop, "grace_seconds": grace}

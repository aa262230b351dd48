"""``VllmMultiNodeService``: one model served by vLLM across several HyperPod nodes.

A LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``) whose groups are one replica each
(group size = nodes per replica, from the planner unless given), a Service on the
leaders behind an internal load balancer (public only when asked, TLS with a
certificate), serving the OpenAI-compatible API (``/v1/chat/completions`` with
streaming, ``/v1/models``) and Prometheus ``/metrics``.

The vLLM command line comes from ``VllmConfig`` (the same builder the SageMaker path
uses), with tensor parallelism over each node's GPUs, pipeline parallelism over the
group's nodes, expert parallelism for MoE, and the quantization of the weight format.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations, CfnOutput, Duration
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from .._cdk.role_grants import ExecutionRoleGrants
from .._cdk.template_limits import check_template_limits
from .._cdk.validation import check_at_least
from ..errors import Problems
from ..model_sources import ModelData
from ..planning.catalog import Catalog, InstanceSpec, default_catalog
from ..planning.cold_start import estimate_cold_start
from ..planning.models import ModelSpec, preset, weight_format
from ..planning.sizing import Plan, PlanningError, plan
from ..vllm.config import VllmConfig, VllmConfigError
from ..vllm.hardware import check_on_hardware
from ..vllm.multinode import MULTINODE_FLAGS, Startup, leader_command, worker_command
from .addons import HyperPodServingAddons
from .constants import (
    APP_NAME_LABEL,
    DEFAULT_VLLM_IMAGE,
    EFA_RESOURCE,
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    GROUP_LABEL,
    INSTANCE_TYPE_LABEL,
    LEADER_POD_ROLE,
    LWS_API_VERSION,
    NODE_HEALTH_LABEL,
    NODE_HEALTHY,
    PART_OF_LABEL,
    PART_OF_VALUE,
    POD_IDENTITY_PRINCIPAL,
    ROLE_LABEL,
    VLLM_API_PORT,
    VLLM_HEALTH_PATH,
    WORKER_POD_ROLE,
)
from .instance_group import HyperPodInstanceGroup
from .interfaces import IHyperPodCluster
from .model_store import FsxModelStore

__all__ = ["Exposure", "VllmMultiNodeService"]

_WEIGHTS_MOUNT = "/models"
_EFA_ENVIRONMENT = {
    "FI_PROVIDER": "efa",
    "FI_EFA_USE_DEVICE_RDMA": "1",
    "FI_EFA_FORK_SAFE": "1",
    "NCCL_DEBUG": "WARN",
}
_PROBE_PERIOD_SECONDS = 10


@dataclass(frozen=True)
class Exposure:
    """How clients reach the leaders: an internal NLB by default.

    :param public: internet-facing instead of internal. Default: ``False``.
    :param certificate_arn: ACM certificate: TLS on 443. Default: plain HTTP on 80.
    """

    public: bool = False
    certificate_arn: str | None = None

    @property
    def port(self) -> int:
        return 443 if self.certificate_arn else 80

    @property
    def scheme(self) -> str:
        return "https" if self.certificate_arn else "http"

    def validate(self, problems: Problems, prop: str) -> None:
        """Nothing to refuse: any combination deploys (the certificate is checked by ACM)."""

    def _render(self) -> dict[str, str]:
        """The Service annotations the AWS Load Balancer Controller reads for this exposure."""
        prefix = "service.beta.kubernetes.io/aws-load-balancer"
        annotations = {
            f"{prefix}-type": "external",
            f"{prefix}-nlb-target-type": "ip",
            f"{prefix}-scheme": "internet-facing" if self.public else "internal",
            f"{prefix}-healthcheck-path": VLLM_HEALTH_PATH,
            f"{prefix}-healthcheck-protocol": "HTTP",
        }
        if self.certificate_arn:
            annotations[f"{prefix}-ssl-cert"] = self.certificate_arn
            annotations[f"{prefix}-ssl-ports"] = "443"
        return annotations


class VllmMultiNodeService(Construct):
    """Deploy ``config`` for ``model`` onto the cluster's GPU group.

    :param cluster: the HyperPod cluster (``HyperPodEksCluster`` or an imported one).
    :param addons: its serving add-ons (the LeaderWorkerSet CRD and the load balancer controller).
    :param model_store: FSx store holding the weights (mounted read-only at ``/models``).
        Default: none; then ``stream_from`` is required.
    :param stream_from: stream the weights from this S3 prefix instead (vLLM's Run:ai model
        streamer, ``--load-format runai_streamer``); the pods get an EKS Pod Identity role that
        reads that prefix only.
    :param model: the model's figures (``ModelSpec`` or preset) for the planner.
    :param quantization: the weight format on the store (``nvfp4``, ``fp8``, ``bf16``, ...).
    :param config: served name, context, parsers, speculative decoding, ... Parallelism,
        quantization and the model path are set here.
    :param image: the vLLM image. Default: ``vllm/vllm-openai:v0.33.0``.
    :param gpu_group: the instance group to run on. Default: the cluster's first GPU group.
    :param replicas: model replicas (LeaderWorkerSet groups). Default: 1.
    :param nodes_per_replica: group size. Default: the planner's node count.
    :param startup: ``native`` or ``ray`` (see ``vllm.multinode``). Default: ``native``.
    :param exposure: load balancer settings. Default: internal, HTTP.
    :param namespace: Default: the model store's namespace.
    :param name: the LeaderWorkerSet / Service name. Default: the served model name.
    :param catalog: the planner's instance catalog. Default: ``default_catalog()``.
    """

    group: HyperPodInstanceGroup
    instance: InstanceSpec

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: IHyperPodCluster,
        addons: HyperPodServingAddons,
        model_store: FsxModelStore | None = None,
        stream_from: ModelData | None = None,
        model: ModelSpec | str,
        quantization: str,
        config: VllmConfig,
        image: str = DEFAULT_VLLM_IMAGE,
        gpu_group: str | None = None,
        replicas: int = 1,
        nodes_per_replica: int | None = None,
        startup: Startup = "native",
        exposure: Exposure = Exposure(),
        namespace: str | None = None,
        name: str | None = None,
        catalog: Catalog | None = None,
    ) -> None:
        super().__init__(scope, id)
        check_template_limits(self)
        self.cluster, self.addons, self.exposure = cluster, addons, exposure
        self.catalog = catalog or default_catalog()
        self.spec = preset(model) if isinstance(model, str) else model
        self.stream_from = stream_from
        problems = Problems(f"VllmMultiNodeService '{self.node.path}'")
        self._resolve_weights_source(problems, model_store, namespace)
        self._resolve_group(problems, gpu_group)
        self._resolve_plan(problems, quantization, config, nodes_per_replica)
        self.replicas = replicas
        self.name = name or (config.served_model_name or self.spec.name)
        self._validate_placement(problems, quantization)
        self.config = self._configure(config, quantization, model_store, problems)
        if stream_from is not None:
            stream_from.validate(problems, "stream_from")
        exposure.validate(problems, "exposure")
        problems.raise_if_any()

        path = "fsx_lustre" if model_store is not None else "s3_streaming"
        self.cold_start = estimate_cold_start(
            self.plan.weight_bytes if self.plan else 0.0, path, self.nodes
        )
        self.service_account = f"{self.name}-weights" if stream_from is not None else None
        prerequisites = (
            [model_store.manifest] if model_store is not None else self._streaming_identity()
        )
        self.lws = self.leader_worker_set(
            image, startup, model_store.claim_name if model_store else None
        )
        self.service = self.service_manifest()
        self._render_workload(prerequisites)
        self._render_base_url()

    # -- resolve -------------------------------------------------------------------------

    def _resolve_weights_source(
        self, problems: Problems, model_store: FsxModelStore | None, namespace: str | None
    ) -> None:
        """Exactly one of an FSx store and an S3 prefix; the namespace follows the store."""
        if (model_store is None) == (self.stream_from is None):
            problems.add(
                "model_store / stream_from",
                (model_store is not None, self.stream_from is not None),
                "give exactly one: an FSx model store or an S3 prefix to stream from",
            )
            problems.raise_if_any()
        self.namespace = namespace or (model_store.namespace if model_store else "inference")

    def _resolve_group(self, problems: Problems, gpu_group: str | None) -> None:
        """The named GPU group, or the cluster's first; its catalog entry."""
        gpu_groups = self.cluster.gpu_groups
        groups = {group.name: group for group in gpu_groups}
        group = groups.get(gpu_group) if gpu_group else (gpu_groups[0] if gpu_groups else None)
        if group is None:
            problems.add(
                "gpu_group", gpu_group, f"must name a GPU group of the cluster: {', '.join(groups)}"
            )
            problems.raise_if_any()
            raise AssertionError("unreachable: raise_if_any raised")
        self.group = group
        self.instance = self.catalog.get(group.instance_type)

    def _resolve_plan(
        self,
        problems: Problems,
        quantization: str,
        config: VllmConfig,
        nodes_per_replica: int | None,
    ) -> None:
        """The planner's sizing for the group's type; nodes per replica default to it."""
        self.plan: Plan | None = None
        try:
            self.plan = plan(
                self.spec,
                quantization,
                self.group.instance_type,
                max_context=config.max_model_len,
                catalog=self.catalog,
            )
        except (PlanningError, KeyError) as error:
            problems.add(
                "model",
                self.spec.name,
                str(error) if isinstance(error, PlanningError) else error.args[0],
            )
        self.nodes = nodes_per_replica or (self.plan.nodes if self.plan else 1)

    # -- validate ------------------------------------------------------------------------

    def _validate_placement(self, problems: Problems, quantization: str) -> None:
        """Enough nodes per replica for the model, replicas that fit the group, EFA known."""
        group, nodes, replicas = self.group, self.nodes, self.replicas
        if self.plan is not None and nodes < self.plan.nodes:
            problems.add(
                "nodes_per_replica",
                nodes,
                f"the planner needs {self.plan.nodes} x {group.instance_type} per replica for {self.spec.name} in {quantization}",
            )
        check_at_least(problems, "replicas", replicas, 1)
        if replicas * nodes > group.count:
            problems.add(
                "replicas",
                replicas,
                f"{replicas} x {nodes} nodes exceed GPU group {group.name!r} ({group.count} nodes)",
            )
        if self.instance.efa_devices is None:
            problems.add(
                "gpu_group",
                group.instance_type,
                "the catalog has no EFA device count for this type; add it to the catalog",
            )

    # -- render --------------------------------------------------------------------------

    def _render_workload(self, prerequisites: Sequence[Construct]) -> None:
        """The LeaderWorkerSet and its Service, after the CRD, controller and weights."""
        eks_cluster = self.cluster.eks_cluster
        self.lws_manifest = eks.KubernetesManifest(
            self, "LeaderWorkerSet", cluster=eks_cluster, manifest=[self.lws], overwrite=True
        )
        self.lws_manifest.node.add_dependency(self.addons.leader_worker_set)
        for prerequisite in prerequisites:
            self.lws_manifest.node.add_dependency(prerequisite)
        self.service_resource = eks.KubernetesManifest(
            self, "Service", cluster=eks_cluster, manifest=[self.service], overwrite=True
        )
        if self.addons.load_balancer_controller is not None:
            self.service_resource.node.add_dependency(self.addons.load_balancer_controller)
        for prerequisite in prerequisites:
            self.service_resource.node.add_dependency(prerequisite)

    def _render_base_url(self) -> None:
        """The load balancer's hostname, once the controller has created it, as the base URL."""
        hostname = eks.KubernetesObjectValue(
            self,
            "LoadBalancerHostname",
            cluster=self.cluster.eks_cluster,
            object_type="service",
            object_name=self.name,
            object_namespace=self.namespace,
            json_path=".status.loadBalancer.ingress[0].hostname",
            timeout=Duration.minutes(10),
        )
        hostname.node.add_dependency(self.service_resource)
        self.base_url = f"{self.exposure.scheme}://{hostname.value}/v1"
        CfnOutput(
            self,
            "BaseUrl",
            value=self.base_url,
            description=f"OpenAI-compatible base URL of {self.config.served_model_name}",
        )

    # -- configuration -------------------------------------------------------------------

    def _streaming_identity(self) -> list[Construct]:
        """Namespace and service account for the pods, and a Pod Identity role that reads the prefix."""
        assert self.stream_from is not None and self.service_account is not None
        cluster = self.cluster
        role = iam.Role(
            self,
            "WeightsRole",
            assumed_by=iam.ServicePrincipal(POD_IDENTITY_PRINCIPAL).with_session_tags(),
            description=f"{self.name}: streams weights from S3",
        )
        grants = ExecutionRoleGrants(self, role)
        grants.model_data_read(self.stream_from)
        grants.acknowledge()
        manifest = eks.KubernetesManifest(
            self,
            "WeightsIdentity",
            cluster=cluster.eks_cluster,
            overwrite=True,
            manifest=[
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}},
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": self.service_account, "namespace": self.namespace},
                },
            ],
        )
        manifest.node.add_dependency(cluster.nodes_ready)
        association = eks.CfnPodIdentityAssociation(
            self,
            "WeightsAssociation",
            cluster_name=cluster.eks_cluster.cluster_name,
            namespace=self.namespace,
            service_account=self.service_account,
            role_arn=role.role_arn,
        )
        association.node.add_dependency(cluster.pod_identity_agent)
        return [manifest, association]

    def _configure(
        self, base: VllmConfig, quantization: str, store: FsxModelStore | None, problems: Problems
    ) -> VllmConfig:
        """The vLLM configuration this placement needs, checked against the hardware."""
        fmt = weight_format(quantization)
        streaming = store is None and self.stream_from is not None
        if streaming and base.load_format not in (None, "runai_streamer"):
            problems.add(
                "config.load_format", base.load_format, "streaming from S3 needs runai_streamer"
            )
        if self.stream_from is not None and store is None:
            model_path = self.stream_from.s3_uri
        else:
            assert store is not None  # _resolve_weights_source: exactly one source
            model_path = f"{_WEIGHTS_MOUNT}{store.mount_path}"
        config = base.with_changes(
            model=model_path,
            load_format="runai_streamer" if streaming else base.load_format,
            served_model_name=base.served_model_name or self.spec.name,
            tensor_parallel_size=self.instance.gpus,
            pipeline_parallel_size=self.nodes if self.nodes > 1 else None,
            enable_expert_parallel=self.spec.is_moe,
            quantization=fmt.vllm_quantization,
        )
        for flag in config.extra_flags:
            if flag in MULTINODE_FLAGS:
                problems.add(
                    f"config.extra_flags[{flag!r}]",
                    config.extra_flags[flag],
                    "set per pod by the multi-node launcher (vllm.multinode)",
                )
        try:
            config.validate()
        except VllmConfigError as error:
            for prop, value, allowed in error.problems:
                problems.add(f"config.{prop}", value, allowed)
            return config
        self._check_on_hardware(config, quantization, problems)
        return config

    def _check_on_hardware(self, config: VllmConfig, quantization: str, problems: Problems) -> None:
        """Problems the group's GPUs rule out; warnings for formats they emulate."""
        check = check_on_hardware(
            config,
            self.group.instance_type,
            model=self.spec,
            nodes=self.nodes,
            weight_format=quantization,
            catalog=self.catalog,
        )
        for prop, value, allowed in check.problems:
            problems.add(f"config.{prop}", value, allowed)
        for warning in check.warnings:
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:nonNativeWeightFormat", f"{self.group.instance_type}: {warning}"
            )

    # -- manifests -----------------------------------------------------------------------

    def labels(self) -> dict[str, str]:
        return {APP_NAME_LABEL: self.name, PART_OF_LABEL: PART_OF_VALUE}

    def pod_template(
        self, role: str, image: str, command: list[str], args: list[str], claim_name: str | None
    ) -> dict[str, Any]:
        """A pod of a replica: the vLLM container, on a healthy node of the GPU group."""
        container = self._container(image, command, args)
        volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
        if claim_name is not None:
            container["volumeMounts"].append(
                {"name": "weights", "mountPath": _WEIGHTS_MOUNT, "readOnly": True}
            )
            volumes.append(
                {
                    "name": "weights",
                    "persistentVolumeClaim": {"claimName": claim_name, "readOnly": True},
                }
            )
        if role == LEADER_POD_ROLE:
            self._serve_api(container)
        spec_extra = {"serviceAccountName": self.service_account} if self.service_account else {}
        return {
            "metadata": {"labels": {**self.labels(), ROLE_LABEL: role}},
            "spec": {
                **spec_extra,
                "terminationGracePeriodSeconds": 120,
                **self._scheduling(),
                "containers": [container],
                "volumes": volumes,
            },
        }

    def _container(self, image: str, command: list[str], args: list[str]) -> dict[str, Any]:
        """The vLLM container with all of the node's GPUs and EFA devices."""
        gpus, efa = self.instance.gpus, self.instance.efa_devices
        resources = {GPU_RESOURCE: str(gpus), EFA_RESOURCE: str(efa)}
        return {
            "name": "vllm",
            "image": image,
            "command": command,
            "args": args,
            "env": [{"name": key, "value": value} for key, value in _EFA_ENVIRONMENT.items()],
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        }

    def _serve_api(self, container: dict[str, Any]) -> None:
        """The leader serves the API: its port and probes (startup allows the cold start)."""
        failures = math.ceil(self.cold_start.startup_timeout_seconds / _PROBE_PERIOD_SECONDS)
        probe = {
            "httpGet": {"path": VLLM_HEALTH_PATH, "port": VLLM_API_PORT},
            "periodSeconds": _PROBE_PERIOD_SECONDS,
        }
        container["ports"] = [{"name": "http", "containerPort": VLLM_API_PORT}]
        container["startupProbe"] = {**probe, "failureThreshold": failures}
        container["readinessProbe"] = {**probe, "failureThreshold": 3}
        container["livenessProbe"] = {**probe, "periodSeconds": 30, "failureThreshold": 5}

    def _scheduling(self) -> dict[str, Any]:
        """Node selector, health affinity and GPU toleration of a serving pod."""
        healthy = {"key": NODE_HEALTH_LABEL, "operator": "In", "values": [NODE_HEALTHY]}
        return {
            "nodeSelector": {
                INSTANCE_TYPE_LABEL: self.group.instance_type,
                GROUP_LABEL: self.group.name,
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
        self, image: str, startup: Startup, claim_name: str | None
    ) -> dict[str, Any]:
        leader = leader_command(self.config, self.nodes, startup)
        worker = worker_command(self.config, self.nodes, startup)
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
                "replicas": self.replicas,
                "startupPolicy": "LeaderCreated",
                "leaderWorkerTemplate": template,
            },
        }

    def service_manifest(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": self.labels(),
                "annotations": self.exposure._render(),
            },
            "spec": {
                "type": "LoadBalancer",
                "selector": {**self.labels(), ROLE_LABEL: LEADER_POD_ROLE},
                "ports": [
                    {
                        "name": self.exposure.scheme,
                        "port": self.exposure.port,
                        "targetPort": VLLM_API_PORT,
                        "protocol": "TCP",
                    }
                ],
            },
        }

    def manifests(self) -> list[Mapping[str, Any]]:
        return [self.lws, self.service]

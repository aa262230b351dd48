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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations, CfnOutput, Duration
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from ..errors import Problems
from ..planning.catalog import Catalog, default_catalog
from ..planning.cold_start import estimate_cold_start
from ..planning.models import ModelSpec, preset, weight_format
from ..planning.sizing import Plan, PlanningError, plan
from ..vllm.config import VllmConfig, VllmConfigError
from ..vllm.hardware import check_on_hardware
from ..vllm.multinode import API_PORT, MULTINODE_FLAGS, Startup, leader_command, worker_command
from .execution_role_grants import ExecutionRoleGrants
from .fsx_model_store import FsxModelStore
from .model_sources import ModelData
from .hyperpod_eks_cluster import HyperPodEksCluster
from .hyperpod_instance_group import GPU_TAINT_KEY
from .hyperpod_serving_addons import HyperPodServingAddons

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
WEIGHTS_MOUNT = "/models"
EFA_ENVIRONMENT = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1", "NCCL_DEBUG": "WARN"}
PROBE_PERIOD_SECONDS = 10


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


class VllmMultiNodeService(Construct):
    """Deploy ``config`` for ``model`` onto the cluster's GPU group.

    :param cluster: the HyperPod cluster.
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

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: HyperPodEksCluster,
        addons: HyperPodServingAddons,
        model_store: FsxModelStore | None = None,
        stream_from: ModelData | None = None,
        model: ModelSpec | str,
        quantization: str,
        config: VllmConfig,
        image: str = "vllm/vllm-openai:v0.33.0",
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
        self.catalog = catalog or default_catalog()
        self.spec = preset(model) if isinstance(model, str) else model
        problems = Problems(f"VllmMultiNodeService '{self.node.path}'")
        if (model_store is None) == (stream_from is None):
            problems.add("model_store / stream_from", (model_store is not None, stream_from is not None), "give exactly one: an FSx model store or an S3 prefix to stream from")
            problems.raise_if_any()
        self.namespace = namespace or (model_store.namespace if model_store else "inference")
        self.stream_from = stream_from
        groups = {group.name: group for group in cluster.gpu_groups}
        group = groups.get(gpu_group) if gpu_group else (cluster.gpu_groups[0] if cluster.gpu_groups else None)
        if group is None:
            problems.add("gpu_group", gpu_group, f"must name a GPU group of the cluster: {', '.join(groups)}")
            problems.raise_if_any()
        assert group is not None
        self.group = group
        self.instance = self.catalog.get(group.instance_type)

        self.plan: Plan | None = None
        try:
            self.plan = plan(self.spec, quantization, group.instance_type, max_context=config.max_model_len, catalog=self.catalog)
        except (PlanningError, KeyError) as error:
            problems.add("model", self.spec.name, str(error) if isinstance(error, PlanningError) else error.args[0])
        nodes = nodes_per_replica or (self.plan.nodes if self.plan else 1)
        if self.plan is not None and nodes < self.plan.nodes:
            problems.add("nodes_per_replica", nodes, f"the planner needs {self.plan.nodes} x {group.instance_type} per replica for {self.spec.name} in {quantization}")
        if replicas < 1:
            problems.add("replicas", replicas, "must be at least 1")
        if replicas * nodes > group.count:
            problems.add("replicas", replicas, f"{replicas} x {nodes} nodes exceed GPU group {group.name!r} ({group.count} nodes)")
        if self.instance.efa_devices is None:
            problems.add("gpu_group", group.instance_type, "the catalog has no EFA device count for this type; add it to the catalog")
        self.nodes = nodes
        self.replicas = replicas
        self.name = name or (config.served_model_name or self.spec.name)

        self.config = self._configure(config, quantization, model_store, problems)
        if stream_from is not None:
            stream_from.validate(problems, "stream_from")
        problems.raise_if_any()

        path = "fsx_lustre" if model_store is not None else "s3_streaming"
        self.cold_start = estimate_cold_start(self.plan.weight_bytes if self.plan else 0.0, path, nodes)
        self.service_account = f"{self.name}-weights" if stream_from is not None else None
        prerequisites = [model_store.manifest] if model_store is not None else self._streaming_identity(cluster)
        self.exposure = exposure
        self.lws = self.leader_worker_set(image, startup, model_store.claim_name if model_store else None)
        self.service = self.service_manifest()
        self.lws_manifest = eks.KubernetesManifest(self, "LeaderWorkerSet", cluster=cluster.eks_cluster, manifest=[self.lws], overwrite=True)
        self.lws_manifest.node.add_dependency(addons.leader_worker_set)
        for prerequisite in prerequisites:
            self.lws_manifest.node.add_dependency(prerequisite)
        self.service_resource = eks.KubernetesManifest(self, "Service", cluster=cluster.eks_cluster, manifest=[self.service], overwrite=True)
        if addons.load_balancer_controller is not None:
            self.service_resource.node.add_dependency(addons.load_balancer_controller)
        for prerequisite in prerequisites:
            self.service_resource.node.add_dependency(prerequisite)

        hostname = eks.KubernetesObjectValue(
            self,
            "LoadBalancerHostname",
            cluster=cluster.eks_cluster,
            object_type="service",
            object_name=self.name,
            object_namespace=self.namespace,
            json_path=".status.loadBalancer.ingress[0].hostname",
            timeout=Duration.minutes(10),
        )
        hostname.node.add_dependency(self.service_resource)
        self.base_url = f"{exposure.scheme}://{hostname.value}/v1"
        CfnOutput(self, "BaseUrl", value=self.base_url, description=f"OpenAI-compatible base URL of {self.config.served_model_name}")

    # -- configuration -------------------------------------------------------------------

    def _streaming_identity(self, cluster: HyperPodEksCluster) -> list[Construct]:
        """Namespace and service account for the pods, and a Pod Identity role that reads the prefix."""
        assert self.stream_from is not None and self.service_account is not None
        role = iam.Role(
            self,
            "WeightsRole",
            assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com").with_session_tags(),
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
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": self.service_account, "namespace": self.namespace}},
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
        association.node.add_dependency(cluster.addons["Addon-eks-pod-identity-agent"])
        return [manifest, association]

    def _configure(self, base: VllmConfig, quantization: str, store: FsxModelStore | None, problems: Problems) -> VllmConfig:
        gpus = self.instance.gpus
        fmt = weight_format(quantization)
        streaming = store is None and self.stream_from is not None
        if streaming and base.load_format not in (None, "runai_streamer"):
            problems.add("config.load_format", base.load_format, "streaming from S3 needs runai_streamer")
        config = base.with_changes(
            model=self.stream_from.s3_uri if streaming else f"{WEIGHTS_MOUNT}{store.mount_path}",  # type: ignore[union-attr]
            load_format="runai_streamer" if streaming else base.load_format,
            served_model_name=base.served_model_name or self.spec.name,
            tensor_parallel_size=gpus,
            pipeline_parallel_size=self.nodes if self.nodes > 1 else None,
            enable_expert_parallel=self.spec.is_moe,
            quantization=fmt.vllm_quantization,
        )
        for flag in config.extra_flags:
            if flag in MULTINODE_FLAGS:
                problems.add(f"config.extra_flags[{flag!r}]", config.extra_flags[flag], "set per pod by the multi-node launcher (vllm.multinode)")
        try:
            config.validate()
        except VllmConfigError as error:
            for prop, value, allowed in error.problems:
                problems.add(f"config.{prop}", value, allowed)
            return config
        check = check_on_hardware(config, self.group.instance_type, model=self.spec, nodes=self.nodes, weight_format=quantization)
        for prop, value, allowed in check.problems:
            problems.add(f"config.{prop}", value, allowed)
        for warning in check.warnings:
            Annotations.of(self).add_warning_v2("cdk-llm-serving:nonNativeWeightFormat", f"{self.group.instance_type}: {warning}")
        return config

    # -- manifests -----------------------------------------------------------------------

    def labels(self) -> dict[str, str]:
        return {"app.kubernetes.io/name": self.name, "app.kubernetes.io/part-of": "cdk-llm-serving"}

    def pod_template(self, role: str, image: str, command: list[str], args: list[str], claim_name: str | None) -> dict[str, Any]:
        gpus, efa = self.instance.gpus, self.instance.efa_devices
        resources = {"nvidia.com/gpu": str(gpus), "vpc.amazonaws.com/efa": str(efa)}
        container: dict[str, Any] = {
            "name": "vllm",
            "image": image,
            "command": command,
            "args": args,
            "env": [{"name": key, "value": value} for key, value in EFA_ENVIRONMENT.items()],
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        }
        volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
        if claim_name is not None:
            container["volumeMounts"].append({"name": "weights", "mountPath": WEIGHTS_MOUNT, "readOnly": True})
            volumes.append({"name": "weights", "persistentVolumeClaim": {"claimName": claim_name, "readOnly": True}})
        if role == "leader":
            failures = math.ceil(self.cold_start.startup_timeout_seconds / PROBE_PERIOD_SECONDS)
            probe = {"httpGet": {"path": "/health", "port": API_PORT}, "periodSeconds": PROBE_PERIOD_SECONDS}
            container["ports"] = [{"name": "http", "containerPort": API_PORT}]
            container["startupProbe"] = {**probe, "failureThreshold": failures}
            container["readinessProbe"] = {**probe, "failureThreshold": 3}
            container["livenessProbe"] = {**probe, "periodSeconds": 30, "failureThreshold": 5}
        spec_extra = {"serviceAccountName": self.service_account} if self.service_account else {}
        return {
            "metadata": {"labels": {**self.labels(), "cdk-llm-serving/role": role}},
            "spec": {
                **spec_extra,
                "terminationGracePeriodSeconds": 120,
                "nodeSelector": {"node.kubernetes.io/instance-type": self.group.instance_type, "cdk-llm-serving/group": self.group.name},
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "sagemaker.amazonaws.com/node-health-status", "operator": "In", "values": ["Schedulable"]}]}
                            ]
                        }
                    }
                },
                "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [container],
                "volumes": volumes,
            },
        }

    def leader_worker_set(self, image: str, startup: Startup, claim_name: str | None) -> dict[str, Any]:
        leader = leader_command(self.config, self.nodes, startup)
        worker = worker_command(self.config, self.nodes, startup)
        template: dict[str, Any] = {
            "size": self.nodes,
            "restartPolicy": "RecreateGroupOnPodRestart",
            "workerTemplate": self.pod_template("worker", image, worker.command, worker.args, claim_name),
        }
        if self.nodes > 1:
            template["leaderTemplate"] = self.pod_template("leader", image, leader.command, leader.args, claim_name)
        else:
            template["workerTemplate"] = self.pod_template("leader", image, leader.command, leader.args, claim_name)
        return {
            "apiVersion": LWS_API_VERSION,
            "kind": "LeaderWorkerSet",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels()},
            "spec": {"replicas": self.replicas, "startupPolicy": "LeaderCreated", "leaderWorkerTemplate": template},
        }

    def service_manifest(self) -> dict[str, Any]:
        annotations: dict[str, str] = {
            "service.beta.kubernetes.io/aws-load-balancer-type": "external",
            "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
            "service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing" if self.exposure.public else "internal",
            "service.beta.kubernetes.io/aws-load-balancer-healthcheck-path": "/health",
            "service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol": "HTTP",
        }
        if self.exposure.certificate_arn:
            annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] = self.exposure.certificate_arn
            annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] = "443"
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels(), "annotations": annotations},
            "spec": {
                "type": "LoadBalancer",
                "selector": {**self.labels(), "cdk-llm-serving/role": "leader"},
                "ports": [{"name": self.exposure.scheme, "port": self.exposure.port, "targetPort": API_PORT, "protocol": "TCP"}],
            },
        }

    def manifests(self) -> list[Mapping[str, Any]]:
        return [self.lws, self.service]

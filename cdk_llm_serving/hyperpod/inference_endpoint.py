"""``HyperPodInferenceEndpoint``: a single-node model on HyperPod through AWS's inference operator.

One ``InferenceEndpointConfig`` (``inference.sagemaker.aws.amazon.com/v1``; the CRD is in
aws/sagemaker-hyperpod-cli ``helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd``):
the listed instance types in order of preference, one worker (AWS's SageMaker vLLM container fed
``SM_VLLM_*``, configured as for a SageMaker pool: every listed type must derive the same
configuration), the SageMaker endpoint it registers (``EndpointApi``), TLS, metrics, and the
operator's KV cache, routing and prefill/decode specs (``inference_features``). The KV cache and
prefix-aware routing are on unless turned off; the operator accepts routing only when an
endpoint is created (docs/design/hyperpod-cluster.md, "Inference endpoint")."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from aws_cdk import Annotations, CfnOutput, Stack
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from .._cdk.endpoint_names import claim_endpoint_name
from .._cdk.validation import kubernetes_name
from ..core.endpoint_api import EndpointApi
from ..errors import ConfigurationError, Problems, checked_props
from ..model_sources import ContainerImage, ModelData
from ..planning.catalog import Catalog, default_catalog
from ..planning.cold_start import estimate_cold_start
from ..planning.decode import Workload
from ..planning.instance_types import InstanceType
from ..planning.models import ModelSpec, WeightFormat
from ..planning.sizing import PlanningError
from ..planning.sizing import plan as plan_layout
from ..vllm.config import VllmConfig, VllmConfigError
from ..vllm.hardware import check_on_hardware
from ..vllm.pool_strategy import PoolVllmPlan, derive_pool_config, warn_tensor_parallel_cost
from .addons import HyperPodServingAddons
from .cluster import HyperPodEksCluster
from .constants import (
    APP_NAME_LABEL,
    EFA_RESOURCE,
    GPU_RESOURCE,
    INSTANCE_TYPE_LABEL,
    PART_OF_LABEL,
    PART_OF_VALUE,
)
from .device_plugins import node_in, required_node_affinity
from .inference_features import (
    InferenceAutoScaling,
    InferenceKvCache,
    InferencePrefillDecode,
    InferenceRouting,
)
from .inference_operator import HyperPodInferenceOperator
from .instance_group import HyperPodInstanceGroup
from .model_store import FsxModelStore

__all__ = ["HyperPodInferenceEndpoint", "InferenceAutoScaling"]

#: Where the operator mounts the model (CRD ``worker.modelVolumeMount.mountPath`` default) and
#: where AWS's SageMaker vLLM container reads it (``SM_VLLM_MODEL``).
MODEL_MOUNT_PATH = "/opt/ml/model"
#: AWS's SageMaker vLLM container serves on 8080 (aws/deep-learning-containers
#: vllm/build_artifacts/sagemaker_entrypoint.sh), with SageMaker's /invocations and /ping and
#: vLLM's OpenAI routes and /metrics on the same port.
SERVING_PORT = 8080
#: AWS's vLLM container for SageMaker (repository, tag): it turns each ``SM_VLLM_*`` variable into
#: the vLLM flag (https://aws.github.io/deep-learning-containers/vllm/configuration/), the
#: contract the worker's environment follows.
SAGEMAKER_VLLM_DLC = ("vllm", "server-sagemaker-cuda-v1")
#: ``pdSpec``'s key of each prefill/decode role (CRD).
_PD_SPEC_KEYS = {"prefill": "prefillSpec", "decode": "decodingSpec"}
#: CRD patterns of ``endpointName`` / ``modelName`` (SageMaker's name rule, at most 63).
_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
#: Kubernetes object names: RFC 1123 DNS labels (kubernetes.io/docs/concepts/overview/
#: working-with-objects/names/).
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class HyperPodInferenceEndpoint(Construct, EndpointApi):
    """Serve ``model`` on one node of the first available of ``instance_types``.

    :param addons: the cluster's serving add-ons; the inference operator is installed
        through them once (``HyperPodInferenceOperator.of``).
    :param model: the model's figures (``ModelSpec`` or preset name) for the planner.
    :param weight_format: the format of the weights (``WeightFormat`` or its name: ``bf16``,
        ``mxfp4``, ...).
    :param weights: an ``FsxModelStore`` or an S3 prefix (``ModelData``).
    :param config: what every copy shares (context, parsers, ...); parallelism, quantization,
        the served name's suffix and the model path are derived.
    :param instance_types: 1 or more HyperPod instance types (``InstanceType`` or names), most
        preferred first; each one of the cluster's GPU groups.
    :param image: a container that reads ``SM_VLLM_*`` like AWS's SageMaker vLLM container
        (``ContainerImage`` or an image reference). Default: that container in the stack's region.
    :param replicas: pods at deployment. Default: 1.
    :param auto_scaling: ``InferenceAutoScaling``. Default: none (fixed ``replicas``).
    :param endpoint_name: the SageMaker endpoint the operator registers. Default: ``name``.
    :param name: the Kubernetes object name. Default: the served name as a Kubernetes name
        (lower case, every run of other characters a '-': ``Qwen/Qwen3-8B`` -> ``qwen-qwen3-8b``).
    :param namespace: Default: the model store's namespace, else ``inference``.
    :param variant_name: the registered endpoint's variant (metrics, autoscaling). Default:
        ``AllTraffic`` (UNCONFIRMED, see ``assets/inference_operator.json``).
    :param catalog: the planner's instance catalog. Default: ``default_catalog()``.
    :param kv_cache: ``InferenceKvCache`` (``kvCacheSpec``), or ``False`` for none. Default:
        ``InferenceKvCache()`` (L1 CPU offload, L2 on the cluster's managed tiered storage,
        which this turns on), L1 only with a warning on an imported cluster without it.
    :param routing: ``InferenceRouting`` (``intelligentRoutingSpec``), or ``False`` for none;
        the operator rejects routing added to a deployed endpoint (deploy a new one and move
        traffic). Default: ``InferenceRouting()`` (prefix-aware).
    :param workload: the ``Workload`` the endpoint serves (tokens in and out, request rate), for
        the planner's decision whether prefill/decode disaggregation pays. Default: none.
    :param prefill_decode: ``InferencePrefillDecode`` (``pdSpec``), or ``False`` for none.
        Default: one prefill and one decode pod on the first listed type when
        ``plan(...).disaggregation.pays`` for ``workload`` (warned when its group lacks the two
        nodes or EFA); else none.
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        addons: HyperPodServingAddons,
        model: ModelSpec | str,
        weight_format: WeightFormat | str,
        weights: FsxModelStore | ModelData,
        config: VllmConfig,
        instance_types: Sequence[InstanceType | str],
        image: ContainerImage | str | None = None,
        replicas: int = 1,
        auto_scaling: InferenceAutoScaling | None = None,
        endpoint_name: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        variant_name: str | None = None,
        catalog: Catalog | None = None,
        kv_cache: InferenceKvCache | Literal[False] | None = None,
        routing: InferenceRouting | Literal[False] | None = None,
        workload: Workload | None = None,
        prefill_decode: InferencePrefillDecode | Literal[False] | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.addons, self.cluster = addons, addons.cluster
        self.catalog = catalog or default_catalog()
        self.spec = ModelSpec.of(model)
        self.weight_format = WeightFormat.of(weight_format)
        self.weights, self.replicas, self.auto_scaling = weights, replicas, auto_scaling
        self.workload = workload
        problems = Problems(f"HyperPodInferenceEndpoint '{self.node.path}'")
        self.instance_types = self._resolve_types(problems, instance_types)
        self.image = self._resolve_image(problems, image)
        self.groups = self._resolve_groups(problems)
        self.type_plans = self._derive(problems, config, self.weight_format.name)
        self.config = self._common_config(problems)
        self.name = name or kubernetes_name(self.config.served_model_name or self.spec.name)
        self.endpoint_name = endpoint_name or self.name
        self.kv_cache = self._resolve_kv_cache(problems, kv_cache)
        self.routing = InferenceRouting() if routing is None else routing or None
        self.prefill_decode = self._resolve_prefill_decode(problems, prefill_decode)
        self._validate(problems)
        problems.raise_if_any()
        if self.kv_cache is not None and self.kv_cache.uses_tiered_storage:
            #: The cluster's managed tiered storage this endpoint's L2 uses.
            self.tiered_storage = self.cluster.enable_tiered_storage()
        self._reserve_nodes()
        self.cluster.allow_image_pull(self._image_source)  # the worker's repository
        self.operator = HyperPodInferenceOperator.of(addons)
        self.namespace = namespace or (
            weights.namespace if isinstance(weights, FsxModelStore) else "inference"
        )
        self.variant_name = variant_name or self.operator.facts["variant_name"]
        self.endpoint_arn = Stack.of(self).format_arn(
            service="sagemaker", resource="endpoint", resource_name=self.endpoint_name.lower()
        )
        self.async_inference = None
        self.manifest = self.inference_endpoint_config()
        self._render()

    # -- resolve -------------------------------------------------------------------------

    def _resolve_image(self, problems: Problems, image: ContainerImage | str | None) -> str:
        """The worker's image reference; a DLC resolves to the stack's region's registry
        (kept as ``_image_source``, with its repository, for the node role's pull grant)."""
        if isinstance(image, str):
            if not image.strip():
                problems.add("image", image, "a container image that reads SM_VLLM_* variables")
            self._image_source: ContainerImage | str = image
            return image
        bound = (image or ContainerImage.from_dlc(*SAGEMAKER_VLLM_DLC)).bind(self)
        bound.validate(problems, "image")
        self._image_source = bound
        return bound.image_uri

    @staticmethod
    def _resolve_types(
        problems: Problems, instance_types: Sequence[InstanceType | str]
    ) -> tuple[InstanceType | str, ...]:
        """Each type checked once (``InstanceType``); unknown names stay as given, reported."""
        return tuple(
            InstanceType.parse(problems, f"instance_types[{index}]", value) or value
            for index, value in enumerate(instance_types)
        )

    def _resolve_groups(self, problems: Problems) -> list[HyperPodInstanceGroup]:
        """The GPU group of each listed type (each type must be one)."""
        by_type = {group.instance_type: group for group in self.cluster.gpu_groups}
        if not self.instance_types:
            problems.add("instance_types", [], "list at least one instance type")
        groups = []
        for index, instance_type in enumerate(self.instance_types):
            if not isinstance(instance_type, InstanceType):
                continue  # unknown name: reported by _resolve_types
            if instance_type not in by_type:
                problems.add(
                    f"instance_types[{index}]",
                    str(instance_type),
                    f"must be the type of one of the cluster's GPU groups: {', '.join(sorted(by_type)) or 'none'}",
                )
            elif instance_type in self.instance_types[:index]:
                problems.add(f"instance_types[{index}]", str(instance_type), "listed twice")
            else:
                groups.append(by_type[instance_type])
        return groups

    def _derive(
        self, problems: Problems, base: VllmConfig, weight_format: str
    ) -> dict[str, PoolVllmPlan]:
        """Each type's configuration, as for a SageMaker pool; checked on its hardware."""
        base = base.with_changes(model=MODEL_MOUNT_PATH)
        plans: dict[str, PoolVllmPlan] = {}
        for group in self.groups:
            prop = f"instance_types[{self.instance_types.index(group.instance_type)}]"
            try:
                planned = derive_pool_config(
                    base, self.spec, group.instance_type, [weight_format], catalog=self.catalog
                )
            except VllmConfigError as error:
                problems.absorb(error, "config")
                continue
            except ConfigurationError as error:  # PlanningError: no layout fits on the type
                problems.add(prop, str(group.instance_type), str(error))
                continue
            check = check_on_hardware(
                planned.config,
                group.instance_type,
                model=self.spec,
                weight_format=weight_format,
                catalog=self.catalog,
            )
            problems.extend(check.problems, f"{prop}.config")
            warn_tensor_parallel_cost(self, planned)
            plans[group.instance_type] = planned
        return plans

    def _common_config(self, problems: Problems) -> VllmConfig:
        """The one configuration the operator's single worker runs on every listed type."""
        if not self.type_plans:
            problems.raise_if_any()
        configs = {t: p.config for t, p in self.type_plans.items()}
        first_type, first = next(iter(configs.items()))
        for instance_type, config in configs.items():
            gpus = self.catalog.get(instance_type).gpus
            if config != first or gpus != self.catalog.get(first_type).gpus:
                problems.add(
                    "instance_types",
                    [str(t) for t in self.instance_types],
                    "the operator runs one worker on every listed type, but "
                    f"{first_type} ({self.catalog.get(first_type).gpus} GPUs, "
                    f"{first.served_model_name}) and {instance_type} ({gpus} GPUs, "
                    f"{config.served_model_name}) need different configurations: list types "
                    "that share one, or deploy one endpoint per configuration",
                )
        return first

    def _resolve_kv_cache(
        self, problems: Problems, given: InferenceKvCache | Literal[False] | None
    ) -> InferenceKvCache | None:
        """The KV cache asked for, or the default; tiered storage the cluster cannot turn on is
        refused when asked for and dropped (L1 only, warned) when it was the default."""
        if given is False:
            return None
        cache = given or InferenceKvCache()
        if (
            not cache.uses_tiered_storage
            or self.cluster.tiered_storage is not None
            or isinstance(self.cluster, HyperPodEksCluster)  # turns it on
        ):
            return cache
        if given is not None:  # an imported cluster that did not declare it
            problems.add(
                "kv_cache.l2_backend",
                str(cache.l2_backend),
                "managed tiered storage on the cluster (TieredStorageConfig Mode "
                "Enable): declare it with HyperPodEksCluster.from_cluster_attributes("
                "tiered_storage=TieredStorage(...)), or use KvCacheL2Backend.REDIS or "
                "InferenceKvCache.l1_only()",
            )
            return cache
        Annotations.of(self).add_warning_v2(
            "cdk-llm-serving:kvCacheTieredStorageUnavailable",
            "The KV cache's L2 tier needs the cluster's managed tiered storage, which "
            "this imported cluster does not declare (from_cluster_attributes("
            "tiered_storage=...)): the endpoint offloads to CPU memory only (L1).",
        )
        return InferenceKvCache.l1_only()

    def _resolve_prefill_decode(
        self, problems: Problems, given: InferencePrefillDecode | Literal[False] | None
    ) -> InferencePrefillDecode | None:
        """The P/D asked for (warned when the planner says it does not pay for ``workload``);
        by default, the planner's verdict for ``workload`` on the first type (one pod per role),
        if its group has the two nodes and EFA."""
        #: The planner's verdict on prefill/decode disaggregation for ``workload`` (``None``
        #: without a workload).
        self.disaggregation = self._disaggregation_verdict(problems)
        verdict = self.disaggregation
        if given is not None:
            if given and verdict is not None and not verdict.pays:
                Annotations.of(self).add_warning_v2(
                    "cdk-llm-serving:prefillDecodeDoesNotPay",
                    f"prefill_decode is set, but for the declared workload {verdict.reason} "
                    f"({verdict.source}): the roles take two nodes where one serves.",
                )
            return given or None
        if verdict is None or not verdict.pays:
            return None
        first = self.groups[0]
        efa = self.catalog.get(first.instance_type).efa_devices
        if first.count < 2 or not efa:
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:prefillDecodeNotPlaced",
                f"Disaggregated prefill and decode would pay for the workload ({verdict.reason}; "
                f"{verdict.source}), but group {first.name} has {first.count} node(s) "
                f"{'with' if efa else 'without'} EFA: it needs two (one prefill, one decode) "
                "and EFA for the KV transfer. Serving colocated; give prefill_decode= to choose.",
            )
            return None
        return InferencePrefillDecode(
            prefill_instance_type=first.instance_type, decode_instance_type=first.instance_type
        )

    def _disaggregation_verdict(self, problems: Problems) -> Any:
        """``plan(...).disaggregation`` for ``workload`` on the first listed type, at the
        tensor-parallel size the worker runs; ``None`` without a workload or a plan (a workload
        the planner refuses is a problem of ``workload``)."""
        if self.workload is None or not self.groups:
            return None
        first = self.groups[0]
        planned = self.type_plans.get(first.instance_type)
        try:
            return plan_layout(
                self.spec,
                self.weight_format,
                first.instance_type,
                workload=self.workload,
                single_instance=True,
                tensor_parallel=planned.config.tensor_parallel_size if planned else None,
                catalog=self.catalog,
            ).disaggregation
        except PlanningError as error:
            problems.add(
                "workload", self.workload, f"a workload {first.instance_type} can plan: {error}"
            )
            return None
        except ConfigurationError as error:
            problems.absorb(error, "workload")
            return None

    # -- validate ------------------------------------------------------------------------

    def capacity(self) -> int:
        """Nodes of the listed GPU groups: at most one worker pod per node."""
        return sum(group.count for group in self.groups)

    def _validate(self, problems: Problems) -> None:
        if isinstance(self.weights, ModelData):
            self.weights.validate(problems, "weights")
        for prop, value in (("endpoint_name", self.endpoint_name), ("name", self.name)):
            if not _NAME.match(value):
                problems.add(prop, value, "1-63 letters, digits and single hyphens (SageMaker)")
        if not _DNS_LABEL.match(self.name):
            problems.add("name", self.name, "a Kubernetes DNS label (lower case)")
        claim_endpoint_name(self, problems, "endpoint_name", self.endpoint_name)
        capacity = self.capacity()
        if self.replicas < 1 or self.replicas > capacity:
            problems.add(
                "replicas",
                self.replicas,
                f"1 to {capacity} (one pod per node of the GPU groups {', '.join(g.name for g in self.groups)})",
            )
        if self.kv_cache is not None:
            self.kv_cache.validate(problems, "kv_cache")
        if self.routing is not None:
            self.routing.validate(problems, "routing")
        if self.prefill_decode is not None:
            self._validate_prefill_decode(problems, self.prefill_decode)
        if self.auto_scaling is not None:
            self.auto_scaling.validate(problems, "auto_scaling")
            if self.auto_scaling.max_replicas > capacity:
                problems.add(
                    "auto_scaling.max_replicas",
                    self.auto_scaling.max_replicas,
                    f"at most {capacity}: the nodes of the listed GPU groups",
                )

    def _role_groups(self) -> dict[str, HyperPodInstanceGroup]:
        """The GPU group of each P/D role's instance type (roles on unknown types left out)."""
        if self.prefill_decode is None:
            return {}
        by_type = {group.instance_type: group for group in self.groups}
        return {
            role: by_type[instance_type]
            for role, (instance_type, _, _) in self.prefill_decode.roles().items()
            if instance_type in by_type
        }

    def _validate_prefill_decode(self, problems: Problems, pd: InferencePrefillDecode) -> None:
        """Each role on a listed type with EFA; the roles' pods fit their groups' nodes."""
        pd.validate(problems, "prefill_decode")
        if SAGEMAKER_VLLM_DLC[1] in self.image:
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:prefillDecodeImage",
                "Disaggregated prefill and decode needs a worker image with vLLM, LMCache, NIXL "
                "and the EFA libfabric provider; AWS lists public.ecr.aws/deep-learning-containers/"
                "vllm:server-hyperpod-cuda-v1.1 and LMCache's image "
                "(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-dpd.html), "
                f"not {SAGEMAKER_VLLM_DLC[0]}:{SAGEMAKER_VLLM_DLC[1]}: give image= one of them.",
            )
        if self.auto_scaling is not None:
            problems.add(
                "auto_scaling",
                "InferenceAutoScaling(...)",
                "none with prefill_decode: the operator scales the roles on their own "
                "(prefill_decode.prefill_auto_scaling / decode_auto_scaling)",
            )
        listed = [str(t) for t in self.instance_types]
        groups = self._role_groups()
        for role, (instance_type, _, _) in pd.roles().items():
            prop = f"prefill_decode.{role}_instance_type"
            if str(instance_type) not in listed:
                problems.add(
                    prop, str(instance_type), f"one of instance_types: {', '.join(listed)}"
                )
            elif role in groups and not self.catalog.get(groups[role].instance_type).efa_devices:
                problems.add(
                    prop,
                    str(instance_type),
                    "an instance type with EFA: the operator moves the KV cache between prefill "
                    "and decode over EFA (GPU-Direct RDMA)",
                )
        need = self._role_nodes()
        for group in {g.name: g for g in groups.values()}.values():
            if need[group.name] > group.count:
                problems.add(
                    "prefill_decode",
                    {role: pd.ceiling(role) for role, g in groups.items() if g is group},
                    f"at most {group.count} pod(s) on group {group.name}: one pod per node",
                )

    # -- render --------------------------------------------------------------------------

    def _render(self) -> None:
        """Grants, then the resource after the operator and the weights."""
        prerequisites: list[IConstruct] = [
            self.operator.addon,
            self.cluster.kubernetes_namespace(self.namespace),
        ]
        if isinstance(self.weights, FsxModelStore):
            # The files must be linked before the operator mounts the file system.
            prerequisites += [self.weights.manifest, self.weights.association]
        else:
            self.operator.add_model_source(self.weights)
        if self.auto_scaling is not None:
            self.operator.enable_cloudwatch_scaling()
        objects = self.manifests()
        self.resource = eks.KubernetesManifest(
            self, "Resource", cluster=self.cluster.eks_cluster, manifest=objects, overwrite=True
        )
        for prerequisite in prerequisites:
            self.resource.node.add_dependency(prerequisite)
        CfnOutput(
            self,
            "OpenAiBaseUrl",
            value=self.openai_base_url,
            description=f"smoke --base-url (--model {self.config.served_model_name} --sagemaker-region <region>)",
        )

    def _role_nodes(self) -> dict[str, int]:
        """Group name -> the P/D roles' pods on it at their ceilings (one pod per node)."""
        need: dict[str, int] = {}
        for role, group in self._role_groups().items():
            assert self.prefill_decode is not None  # roles exist only with it
            need[group.name] = need.get(group.name, 0) + self.prefill_decode.ceiling(role)
        return need

    def _reserve_nodes(self) -> None:
        """Each listed group may host up to the ceiling of pods (which one serves is decided at
        run time, by capacity), so each reserves that many of its nodes in the cluster's ledger."""
        need = (
            self._role_nodes()
            if self.prefill_decode is not None
            else {g.name: min(self.replicas_ceiling(), g.count) for g in self.groups}
        )
        for name, nodes in need.items():
            self.cluster.reserve_gpu_nodes(self, name, nodes)

    def replicas_ceiling(self) -> int:
        """The most pods this endpoint runs: the autoscaling maximum, else ``replicas``."""
        return self.auto_scaling.max_replicas if self.auto_scaling else self.replicas

    def labels(self) -> dict[str, str]:
        return {APP_NAME_LABEL: self.name, PART_OF_LABEL: PART_OF_VALUE}

    def _model_source(self) -> dict[str, Any]:
        """``modelSourceConfig`` of the FSx store or the S3 prefix."""
        if isinstance(self.weights, FsxModelStore):
            fs = self.weights.file_system
            return {
                "modelSourceType": "fsx",
                "fsxStorage": {
                    "fileSystemId": fs.file_system_id,
                    "dnsName": fs.dns_name,
                    "mountName": fs.mount_name,
                },
                "modelLocation": self.weights.mount_path.strip("/"),
            }
        return {
            "modelSourceType": "s3",
            "s3Storage": {"bucketName": self.weights.bucket_name, "region": Stack.of(self).region},
            "modelLocation": self.weights.key_prefix.rstrip("/"),
        }

    def _worker(self) -> dict[str, Any]:
        """The operator's worker: the node's GPUs, no CPU or memory request (so a group's
        ``threads_per_core`` cannot leave it Pending)."""
        gpus = str(self.catalog.get(self.instance_types[0]).gpus)
        environment = self.config.to_sagemaker_environment()
        return {
            "image": self.image,
            "modelInvocationPort": {"containerPort": SERVING_PORT, "name": "http"},
            "modelVolumeMount": {"name": "model-weights", "mountPath": MODEL_MOUNT_PATH},
            "resources": {
                "requests": {GPU_RESOURCE: gpus},
                "limits": {GPU_RESOURCE: gpus},
            },
            "environmentVariables": [
                {"name": key, "value": value} for key, value in environment.items()
            ],
        }

    def inference_endpoint_config(self) -> dict[str, Any]:
        """The ``InferenceEndpointConfig`` this endpoint applies."""
        weight_bytes = next(iter(self.type_plans.values())).plan.weight_bytes
        cold_start = estimate_cold_start(
            weight_bytes,
            "fsx_lustre" if isinstance(self.weights, FsxModelStore) else "s3_streaming",
        )
        startup = cold_start.startup_timeout_seconds
        if isinstance(self.weights, FsxModelStore):  # the first read hydrates from S3
            startup = self.weights.startup_timeout_seconds(cold_start, weight_bytes)
        spec: dict[str, Any] = {
            "modelName": self.endpoint_name,
            "endpointName": self.endpoint_name,
            "instanceTypes": [str(t) for t in self.instance_types],
            "replicas": self.replicas,
            "modelSourceConfig": self._model_source(),
            "worker": self._worker(),
            "invocationEndpoint": "invocations",
            "loadBalancer": {"healthCheckPath": "/ping"},
            "metrics": {
                "enabled": True,
                "modelMetrics": {"port": SERVING_PORT, "path": "/metrics"},
            },
            "tlsConfig": {
                "tlsCertificateOutputS3Uri": f"s3://{self.operator.tls_bucket.bucket_name}/{self.name}/"
            },
            "maxDeployTimeInSeconds": max(3600, int(startup) * 2),
        }
        if self.auto_scaling is not None:
            spec["autoScalingSpec"] = self.auto_scaling._render(
                self.endpoint_name, self.variant_name
            )
        if self.kv_cache is not None:
            spec["kvCacheSpec"] = self.kv_cache.render()
        if self.routing is not None:
            spec["intelligentRoutingSpec"] = self.routing.render()
        if self.prefill_decode is not None:
            spec["pdSpec"] = self._pd_spec(self.prefill_decode)
        return {
            "apiVersion": self.operator.facts["api_version"],
            "kind": "InferenceEndpointConfig",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels()},
            "spec": spec,
        }

    def _role_resources(self, instance_type: InstanceType | str) -> dict[str, Any]:
        """A P/D role's pods: the node's GPUs ("must include GPU resource requests for DPD to
        function", CRD) and its EFA devices (the KV transfer runs over EFA)."""
        instance = self.catalog.get(instance_type)
        amounts = {GPU_RESOURCE: str(instance.gpus)}
        if instance.efa_devices:
            amounts[EFA_RESOURCE] = str(instance.efa_devices)
        return {"requests": dict(amounts), "limits": dict(amounts)}

    def _pd_spec(self, pd: InferencePrefillDecode) -> dict[str, Any]:
        """``pdSpec``: both roles (CRD: ``prefillSpec`` and ``decodingSpec`` required)."""
        scaling = {"prefill": "prefillAutoScaling", "decode": "decodingAutoScaling"}
        spec: dict[str, Any] = {
            "routingThreshold": pd.routing_threshold,
            "topologySpec": {"sameAZ": pd.same_availability_zone},
        }
        auto_scaling: dict[str, Any] = {}
        for role, (instance_type, replicas, role_scaling) in pd.roles().items():
            spec[_PD_SPEC_KEYS[role]] = {
                "replicas": replicas,
                "nodeSelector": {INSTANCE_TYPE_LABEL: str(instance_type)},
                "resources": self._role_resources(instance_type),
            }
            if role_scaling is not None:
                rendered = role_scaling._render(self.endpoint_name, self.variant_name)
                rendered["cloudWatchTrigger"]["name"] = (
                    f"{self.endpoint_name}-{role}-{role_scaling.metric_name}".lower()[:63]
                )
                auto_scaling[scaling[role]] = rendered
        if auto_scaling:
            spec["autoScalingSpec"] = auto_scaling
        return spec

    def manifests(self) -> list[Mapping[str, Any]]:
        """The objects applied: the config (its namespace is the cluster's,
        ``IHyperPodCluster.kubernetes_namespace``)."""
        return [self.manifest]

    # -- placement -----------------------------------------------------------------------

    def worker_pod_template(self) -> dict[str, Any]:
        """The worker pod as the operator schedules it, for placement checks.

        Our model of the operator's documented rendering: a required node affinity on the
        listed types plus preferred terms with descending weights, the worker's GPU request,
        and the toleration EKS's ``ExtendedResourceToleration`` admission plugin adds for
        ``nvidia.com/gpu`` (https://docs.aws.amazon.com/eks/latest/userguide/platform-versions.html).
        """
        affinity = _instance_type_affinity(self.instance_types, len(self.instance_types))
        resources = self.manifest["spec"]["worker"]["resources"]
        return self._pod("worker", resources, {"affinity": {"nodeAffinity": affinity}})

    def _pod(
        self, name: str, resources: dict[str, Any], placement: dict[str, Any]
    ) -> dict[str, Any]:
        """A pod of one container ``name``, placed by ``placement``, with the toleration
        ``ExtendedResourceToleration`` adds per extended resource it requests."""
        tolerations = [
            {"key": resource, "operator": "Exists", "effect": "NoSchedule"}
            for resource in sorted(resources["requests"])
        ]
        ports = [{"name": "http", "containerPort": SERVING_PORT}]
        container = {"name": name, "image": self.image, "resources": resources, "ports": ports}
        return {
            "metadata": {"labels": self.labels()},
            "spec": {**placement, "tolerations": tolerations, "containers": [container]},
        }

    def role_pod_templates(self) -> dict[str, dict[str, Any]]:
        """Under ``prefill_decode``, each role's pod as the operator schedules it (our model:
        the role's ``nodeSelector`` and ``resources``, and the toleration
        ``ExtendedResourceToleration`` adds per extended resource requested); else none."""
        if self.prefill_decode is None:
            return {}
        pd_spec = self.manifest["spec"]["pdSpec"]
        return {
            role: self._pod(
                role,
                pd_spec[key]["resources"],
                {"nodeSelector": dict(pd_spec[key]["nodeSelector"])},
            )
            for role, key in _PD_SPEC_KEYS.items()
        }

    def pod_templates(self) -> dict[str, dict[str, Any]]:
        """Every pod this endpoint brings: the operator's controller and the worker (under
        ``prefill_decode``, the prefill and decode pods instead)."""
        roles = self.role_pod_templates()
        return {
            "inference-operator": self.operator.controller_pod_template(),
            **(roles or {"worker": self.worker_pod_template()}),
        }


def _instance_type_affinity(instance_types: Sequence[str], count: int) -> dict[str, Any]:
    """Required: one of the types; preferred: earlier types weigh more (100, 99, ...)."""
    return {
        **required_node_affinity(node_in(INSTANCE_TYPE_LABEL, instance_types)),
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100 - index,
                "preference": {"matchExpressions": [node_in(INSTANCE_TYPE_LABEL, [instance_type])]},
            }
            for index, instance_type in enumerate(instance_types[:count])
        ],
    }

"""``VllmMultiNodeService``: one model served by vLLM across several HyperPod nodes.

A LeaderWorkerSet whose groups are one replica each (group size = nodes per replica, from the
planner unless given), a Service on the leaders behind an internal load balancer on 443 (public
only when asked; TLS end to end: vLLM's own, or re-encrypted after an ACM certificate), serving
the OpenAI-compatible API and Prometheus ``/metrics``; vLLM's other routes are closed on the
leader (``vllm/route_guard.py``). The vLLM command line comes from ``VllmConfig`` with the
planner's layout; across nodes a MoE model runs data parallel with its experts sharded over
every GPU, vLLM's documented multi-node layout (``docs/serving/data_parallel_deployment.md``).

Split by job: ``multi_node_placement`` decides where the replicas run, ``multi_node_manifests``
renders the Kubernetes objects, ``prefix_routing`` the router in front, ``serving_security``
and ``serving_tls`` the API key, NetworkPolicies and certificates; the construct here wires
them into the cluster. Other constructs change the service only through its methods
(``hand_replicas_to``, ``set_healthy_threshold``, ``add_front``), as ``eks.Cluster`` offers
``add_manifest``. Sources and history: ``docs/design/multi-node-service.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import jsii
from aws_cdk import Annotations, CfnOutput, Duration, IStableAnyProducer, Lazy, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct, IValidation

from .._cdk.arns import ACM_CERTIFICATE, check_arn
from .._cdk.pod_identity import pod_identity_role
from .._cdk.role_grants import ExecutionRoleGrants
from .._cdk.template_limits import check_template_limits
from .._cdk.validation import check_kubernetes_name, kubernetes_name
from ..errors import Problems, checked_props
from ..model_sources import ModelData, warn_if_tag_only
from ..planning.catalog import Catalog, InstanceSpec, default_catalog
from ..planning.cold_start import ColdStart, estimate_cold_start
from ..planning.models import ModelSpec, WeightFormat
from ..planning.sizing import Layout, Plan
from ..vllm.config import VllmConfig, VllmConfigError
from ..vllm.hardware import check_on_hardware, speculation_with_pipeline_note
from ..vllm.multinode import MULTINODE_FLAGS, Startup
from ..vllm.pool_strategy import TENSOR_PARALLEL_WARNING_ID
from ._input_checks import check_service_options
from .addons import HyperPodServingAddons
from .constants import LWS_API_VERSION
from .instance_group import HyperPodInstanceGroup
from .model_store import FsxModelStore
from .multi_node_manifests import (
    API_SERVICE_SUFFIX,
    SERVICE_NAME_MAX,
    TERMINATION_GRACE_SECONDS,
    WEIGHTS_MOUNT,
    Exposure,
    MultiNodeWorkload,
    ServiceFront,
)
from .multi_node_placement import MultiNodePlacement, place_replicas
from .pod_spec import MIN_KV_OFFLOAD_GIB, kv_offload_budget_gib, memory_gib
from .prefix_routing import PrefixRouting, RouterDeployment, leader_wildcard, service_account
from .serving_image import IMAGE_WITHOUT_EFA_WARNING, ServingImage, default_vllm_image
from .serving_security import (
    generated_api_key,
    restrict_api_key_readers,
    secret_provider_class,
    secrets_store_addon,
)
from .serving_tls import (
    TLS_FLAGS,
    ca_manifests,
    service_dns_names,
    serving_certificate,
    serving_secret_name,
)

__all__ = [
    "Exposure",
    "ServiceFront",
    "ServingImage",
    "VllmMultiNodeService",
]


@jsii.implements(IStableAnyProducer)
class _Rendered:
    """A value computed when the template is synthesized (``Lazy.any``)."""

    def __init__(self, render: Callable[[], Any]) -> None:
        self._render = render

    def produce(self) -> Any:
        return self._render()

    @classmethod
    def of(cls, render: Callable[[], Any]) -> Any:
        return Lazy.any(cls(render))


@jsii.implements(IValidation)
class _TierCheck:
    """Fails the synth when the cluster's tiered storage was turned on (e.g. by a
    ``HyperPodInferenceEndpoint`` with the tiered L2, ``enable_tiered_storage``) after the
    service sized its KV offload buffer without it: the buffer would take the tier's share."""

    def __init__(self, service: VllmMultiNodeService) -> None:
        self._service = service

    def validate(self) -> list[str]:
        service = self._service
        if service.cluster.tiered_storage == service.tiered_storage_at_sizing:
            return []
        return [
            f"kv_offload: the cluster's tiered storage ({service.cluster.tiered_storage}) was "
            "turned on after this service sized --kv-offloading-size without it; create the "
            "construct that turns it on (HyperPodInferenceEndpoint with the tiered L2) before "
            "the service, or give the cluster tiered_storage=TieredStorage(...)"
        ]


#: The default exposure: internal, TLS passed through to vLLM on 443.
_INTERNAL = Exposure()


class VllmMultiNodeService(Construct):
    """Deploy ``config`` for ``model`` onto the cluster's GPU group.

    :param addons: the cluster's serving add-ons (the LeaderWorkerSet CRD, the load balancer
        controller, cert-manager); the service runs on their cluster (``addons.cluster``).
    :param model: the model's figures (``ModelSpec`` or preset) for the planner.
    :param weight_format: the planner's weight format of the weights (``WeightFormat`` or its
        name: ``nvfp4``, ``fp8``, ``bf16``, ...), as on ``HyperPodInferenceEndpoint``.
    :param weights: where the weights come from: an ``FsxModelStore`` (mounted read-only at
        ``/models``) or an S3 prefix (``ModelData``) streamed with vLLM's Run:ai model streamer
        (the pods get an EKS Pod Identity role that reads that prefix only).
    :param config: served name, context, parsers, speculative decoding, ... Parallelism,
        quantization and the model path are set here.
    :param image: the vLLM image: a reference (an image without EFA) or
        ``ServingImage(uri, efa=True)``. Default: AWS's vLLM container for EC2/EKS with EFA
        (``assets/vllm_image.json``) from the region's deep-learning-container account.
    :param api_key: the Secrets Manager secret whose value clients send as
        ``Authorization: Bearer <key>``; one key per line, each accepted (two while a key
        rotates, README). ``False``: no API key (refused with a public ``exposure``).
        Default: a generated secret (``self.api_key``).
    :param gpu_group: the instance group to run on. Default: the cluster's first GPU group.
    :param replicas: model replicas (LeaderWorkerSet groups). Default: 1.
    :param nodes_per_replica: group size. Default: the planner's node count.
    :param startup: ``native`` or ``ray`` (see ``vllm.multinode``). Default: ``native``.
    :param exposure: load balancer settings. Default: internal, TLS passed through to vLLM on 443.
    :param namespace: Default: the model store's namespace, else ``inference``.
    :param name: the LeaderWorkerSet name; the load-balanced Service is ``<name>-api``, so at
        most 59 characters. Default: the served model name.
    :param catalog: the planner's instance catalog. Default: ``default_catalog()``.
    :param kv_offload: keep prefix-cache blocks evicted from GPU memory in host memory (vLLM's
        native offloading, ``--kv-offloading-size``), sized from what the node's pod memory
        leaves (``pod_spec.kv_offload_budget_gib``; ``config.kv_offloading_size`` sets it by
        hand and must fit). It costs start-up time, no instance. ``True`` refuses a node with
        less than ``MIN_KV_OFFLOAD_GIB`` (64 GiB) per engine to spare; ``False`` turns it off.
        Default: on when a node has that much to spare.
    :param routing: vLLM's prefix-aware router in front of the replicas (``PrefixRouting``;
        ``True``: ``PrefixRouting()``); the load-balanced Service then selects the routers.
        Two small pods on the system nodes and one TLS hop; it pays when requests share
        prefixes. Default: on at ``replicas`` > 1 (one replica has nothing to choose from);
        give it when an autoscaler adds the replicas (``VllmReplicaAutoScaling``).
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
        image: ServingImage | str | None = None,
        api_key: secretsmanager.ISecret | Literal[False] | None = None,
        gpu_group: str | None = None,
        replicas: int = 1,
        nodes_per_replica: int | None = None,
        startup: Startup = "native",
        exposure: Exposure = _INTERNAL,
        namespace: str | None = None,
        name: str | None = None,
        catalog: Catalog | None = None,
        kv_offload: bool | None = None,
        routing: PrefixRouting | bool | None = None,
    ) -> None:
        super().__init__(scope, id)
        check_template_limits(self)
        problems = Problems(f"VllmMultiNodeService '{self.node.path}'")
        check_service_options(problems, startup)
        self.cluster, self.addons, self.exposure = addons.cluster, addons, exposure
        self.startup, self.kv_offload_requested = startup, kv_offload
        self.catalog = catalog or default_catalog()
        self.spec: ModelSpec = ModelSpec.of(model)
        self.weight_format: WeightFormat = _parse_weight_format(problems, weight_format)
        #: Where the weights come from: the FSx store or the S3 prefix streamed from.
        self.weights: FsxModelStore | ModelData = weights
        self.placement: MultiNodePlacement = self._place(
            problems, config, gpu_group, nodes_per_replica, replicas
        )
        self._name_objects(problems, name, config.served_model_name, namespace)
        self.config, config_valid = self._configure(problems, config)
        self._check_access(problems, api_key)
        self.image, self.image_efa = self._image(problems, image)
        self.vpc_cidr = self._vpc_cidr(problems)
        self._estimate_start()
        #: The prefix-aware router in front of the leaders, ``None`` when off (``routing``).
        self.router: RouterDeployment | None = self._router(problems, routing)
        #: The renderers of this service's Kubernetes objects (pure; ``multi_node_manifests``).
        self.workload: MultiNodeWorkload = self._workload(authenticate=api_key is not False)
        #: What sets the replica count when not the manifest (``hand_replicas_to``).
        self.replicas_owner: Construct | None = None
        #: The LeaderWorkerSet; rendering it runs the multi-node launcher's own checks.
        self.lws: dict[str, Any] = self._render_lws(problems) if config_valid else {}
        problems.raise_if_any()
        self._reserve_and_warn()
        #: The API key's secret; ``None`` with ``api_key=False``.
        self.api_key: secretsmanager.ISecret | None = (
            None if api_key is False else api_key or generated_api_key(self, self.name)
        )
        self.service: dict[str, Any] = self.workload.service_manifest()
        self.network_policies: list[dict[str, Any]] = self.workload.network_policies()
        self._deploy()

    # -- what other constructs may change -------------------------------------------------

    def hand_replicas_to(self, autoscaler: Construct, *, max_replicas: int) -> None:
        """Let ``autoscaler`` (e.g. ``VllmReplicaAutoScaling``'s KEDA ScaledObject) set the
        replica count through the LeaderWorkerSet's scale subresource, up to ``max_replicas``.

        The manifest then leaves ``spec.replicas`` out (a stated count would be put back at
        every stack update; design note, "Handing the replicas over"), and every pod sleeps in
        preStop until its load-balancer target has drained (``DRAIN_PRE_STOP_SECONDS``), so a
        scale-in finishes the requests in flight. Warns when a rollout at ``max_replicas``
        would wait for nodes.
        """
        self._rerender(scaled=True)
        self.replicas_owner = autoscaler
        self._warn_rollout_at(max_replicas)

    def set_healthy_threshold(self, checks: int) -> None:
        """The NLB health check's healthy threshold (the controller's
        ``healthcheck-healthy-threshold`` annotation), 2-10 as the NLB takes."""
        if not 2 <= checks <= 10:
            problems = Problems(f"VllmMultiNodeService '{self.node.path}'")
            problems.add("checks", checks, "the NLB's healthy threshold: 2 to 10")
            problems.raise_if_any()
        self._rerender(healthy_threshold=checks)

    def add_front(self, front: ServiceFront, objects: Construct) -> None:
        """Put ``front``'s pods before the leaders: the load-balanced Service selects them on
        their port, with their health check. ``objects`` (the manifest that creates them) is
        applied after this service's NetworkPolicies and before its Service. One front per
        service: the router (``routing``) is one."""
        if self.workload.front is not None:
            problems = Problems(f"VllmMultiNodeService '{self.node.path}'")
            problems.add(
                "front", dict(front.labels), "one front per service: the Service selects it"
            )
            problems.raise_if_any()
        self._rerender(front=front)
        objects.node.add_dependency(self.network_policy_resource)
        self.service_resource.node.add_dependency(objects)

    @property
    def scale_target(self) -> dict[str, str]:
        """The LeaderWorkerSet as an autoscaler's ``scaleTargetRef``."""
        return {"apiVersion": LWS_API_VERSION, "kind": "LeaderWorkerSet", "name": self.name}

    def _rerender(self, **changes: Any) -> None:
        """The workload with ``changes``; the manifests read the new objects at synth."""
        self.workload = dataclasses.replace(self.workload, **changes)
        self.lws = self.workload.leader_worker_set()
        self.service = self.workload.service_manifest()

    # -- derived views: the weights source, the placement -----------------------------------

    @property
    def model_store(self) -> FsxModelStore | None:
        """``weights`` when it is an FSx model store."""
        return self.weights if isinstance(self.weights, FsxModelStore) else None

    @property
    def stream_from(self) -> ModelData | None:
        """``weights`` when it is an S3 prefix streamed from."""
        return self.weights if isinstance(self.weights, ModelData) else None

    @property
    def service_name(self) -> str:
        """The load-balanced Service's name, ``<name>-api`` (the LWS's headless Service is
        ``<name>``)."""
        return self.workload.service_name

    @property
    def replicas(self) -> int:
        """Model replicas (LeaderWorkerSet groups)."""
        return self.placement.replicas

    @property
    def rollout_strategy(self) -> dict[str, Any]:
        """LeaderWorkerSet's rolling update for the group, replica size and count."""
        return self.placement.rollout_strategy

    @property
    def group(self) -> HyperPodInstanceGroup:
        """The GPU group the replicas run on."""
        return self.placement.group

    @property
    def instance(self) -> InstanceSpec:
        """The group's type in the planner's catalog."""
        return self.placement.instance

    @property
    def plan(self) -> Plan | None:
        """The planner's sizing for the group's type."""
        return self.placement.plan

    @property
    def nodes(self) -> int:
        """Nodes per replica."""
        return self.placement.nodes

    @property
    def layout(self) -> Layout:
        """The parallelism a replica runs: the plan's when it spans ``nodes``, else the planner's
        layout rule for that many nodes (``nodes_per_replica`` above the plan's)."""
        return self.placement.layout

    @property
    def resources(self) -> dict[str, str]:
        """Each pod's requests and limits."""
        return dict(self.placement.resources)

    # -- manifests (rendered by ``workload``) ---------------------------------------------

    def labels(self) -> dict[str, str]:
        return self.workload.labels()

    def manifests(self) -> list[Mapping[str, Any]]:
        return [self.lws, self.service, *self.network_policies]

    # -- inputs ---------------------------------------------------------------------------

    def _place(
        self,
        problems: Problems,
        config: VllmConfig,
        gpu_group: str | None,
        nodes_per_replica: int | None,
        replicas: int,
    ) -> MultiNodePlacement:
        """The group, plan, nodes per replica and resources (``multi_node_placement``)."""
        return place_replicas(
            problems,
            cluster=self.cluster,
            catalog=self.catalog,
            spec=self.spec,
            weight_format=self.weight_format,
            max_context=config.max_model_len,
            gpu_group=gpu_group,
            nodes_per_replica=nodes_per_replica,
            replicas=replicas,
            tensor_parallel=config.tensor_parallel_size,
        )

    def _name_objects(
        self, problems: Problems, name: str | None, served: str | None, namespace: str | None
    ) -> None:
        """The LeaderWorkerSet's name (``<name>-api`` must be a Service name too), the
        namespace and the pods' service accounts. Workers (replicas of several nodes) run as
        their own account: no role that reads the API key, only the weights when streaming."""
        limit = SERVICE_NAME_MAX - len(API_SERVICE_SUFFIX)
        self.name = name or kubernetes_name(served or self.spec.name, max_length=limit)
        self.namespace = namespace or (
            self.model_store.namespace if self.model_store else "inference"
        )
        check_kubernetes_name(problems, "name", self.name)
        if len(self.name) > limit:
            problems.add(
                "name",
                self.name,
                f"at most {limit} characters, so that the load balancer's Service "
                f"'<name>{API_SERVICE_SUFFIX}' is a Service name (at most {SERVICE_NAME_MAX})",
            )
        check_kubernetes_name(problems, "namespace", self.namespace, namespace=True)
        self.service_account = f"{self.name}-vllm"
        #: ``None``: one-node replicas, whose only pod is the leader.
        self.worker_service_account: str | None = (
            f"{self.name}-vllm-worker" if self.nodes > 1 else None
        )

    def _check_access(
        self, problems: Problems, api_key: secretsmanager.ISecret | Literal[False] | None
    ) -> None:
        """The S3 prefix, the exposure and its certificate; a public service needs its key."""
        if self.stream_from is not None:
            self.stream_from.validate(problems, "weights")
        exposure = self.exposure
        exposure.validate(problems, "exposure")
        check_arn(
            problems, "exposure.certificate_arn", exposure.certificate_arn, ACM_CERTIFICATE, self
        )
        if api_key is True:
            problems.add("api_key", True, "a secretsmanager.ISecret, False (no key) or None")
        if exposure.public and api_key is False:
            problems.add("api_key", False, "public=True needs the API key")

    def _image(self, problems: Problems, image: ServingImage | str | None) -> tuple[str, bool]:
        """The image reference and whether it is EFA-capable (the default image is)."""
        if isinstance(image, ServingImage):
            return image.uri, image.efa
        if image is None:
            return default_vllm_image(self, problems), True
        return image, False

    def _estimate_start(self) -> None:
        """The planner's cold start and the leader's startup-probe budget: the cold start, or
        the first read of the weights from S3 into the FSx store if that takes longer."""
        store = self.model_store
        self.cold_start: ColdStart = estimate_cold_start(
            self.plan.weight_bytes if self.plan else 0.0,
            "fsx_lustre" if store is not None else "s3_streaming",
            self.nodes,
        )
        self.startup_timeout_seconds: int = (
            store.startup_timeout_seconds(self.cold_start, self.plan.weight_bytes)
            if store is not None and self.plan is not None
            else self.cold_start.startup_timeout_seconds
        )

    def _workload(self, *, authenticate: bool) -> MultiNodeWorkload:
        return MultiNodeWorkload(
            name=self.name,
            namespace=self.namespace,
            service_account=self.service_account,
            worker_service_account=self.worker_service_account,
            image=self.image,
            config=self.config,
            startup=self.startup,
            placement=self.placement,
            startup_timeout_seconds=self.startup_timeout_seconds,
            api_key_class=f"{self.name}-api-key" if authenticate else None,
            claim_name=self.model_store.claim_name if self.model_store else None,
            exposure=self.exposure,
            vpc_cidr=self.vpc_cidr,
            load_balancer_subnets=self._load_balancer_subnets(self.exposure),
            front=self.router.front() if self.router else None,
            routed=self.router is not None,
        )

    def _max_num_seqs(self, base: VllmConfig) -> int | None:
        """The configured ``max_num_seqs``, else the planner's chosen batch per engine when the
        replica runs the plan's layout (its latency figures hold at that batch; vLLM's own
        default, 1024 on GPUs of 70 GiB or more, would batch past them), else vLLM's default."""
        planned = self.plan
        if base.max_num_seqs is not None or planned is None or planned.performance is None:
            return base.max_num_seqs
        return planned.performance.max_num_seqs if planned.nodes == self.nodes else None

    @property
    def kv_offload_budget_gib(self) -> int | None:
        """GiB of a node's pod memory free for KV offload buffers (``pod_spec``), ``None``
        when the catalog does not give the pod's memory."""
        memory = memory_gib(self.resources)
        if memory is None:
            return None
        weights = self.plan.weight_bytes / self.nodes / 2**30 if self.plan else 0.0
        return kv_offload_budget_gib(
            memory, self.instance.gpus, weights, tier_gib=self.tiered_storage_gib
        )

    @property
    def tiered_storage_gib(self) -> float:
        """GiB of each GPU node the cluster's managed tiered storage takes (``TieredStorage``,
        ``memory_percentage`` of the instance's memory), 0 without it: the KV offload budget
        leaves it out (``pod_spec.kv_offload_budget_gib``)."""
        tier = self.cluster.tiered_storage
        return tier.memory_gib(self.instance.host_memory_gib) if tier is not None else 0.0

    @property
    def engines_per_node(self) -> int:
        """vLLM engines with a rank on each node: each pins its own whole offload buffer there
        (``pod_spec``), so a node holds ``engines_per_node`` buffers."""
        layout = self.layout
        ranks = layout.tensor_parallel * max(layout.pipeline_parallel, 1)
        return max(1, self.instance.gpus // ranks)

    def _kv_offloading_size(self, problems: Problems, base: VllmConfig) -> float | None:
        """``--kv-offloading-size`` (one engine's GiB): the configured size if it fits the
        node's budget, else the budget shared by the node's engines (``kv_offload``)."""
        given, wanted = base.kv_offloading_size, self.kv_offload_requested
        #: The cluster's tiered storage when the offload buffer was sized (``_TierCheck``).
        self.tiered_storage_at_sizing = self.cluster.tiered_storage
        if base.kv_offloading_backend == "lmcache":
            problems.add(
                "config.kv_offloading_backend",
                "lmcache",
                "native only: the lmcache backend needs a separately run LMCache server "
                "(vllm/config/vllm.py _post_init_kv_transfer_config), which the service does not run",
            )
        if wanted is False:
            if given is not None:
                problems.add(
                    "kv_offload",
                    False,
                    f"config.kv_offloading_size={given:g} turns offloading on; drop one of them",
                )
            return None
        budget, engines = self.kv_offload_budget_gib, self.engines_per_node
        if given is not None:
            if budget is not None and given * engines > budget:
                problems.add(
                    "config.kv_offloading_size",
                    given,
                    f"at most {budget // engines} GiB per engine: a {self.instance.instance_type} "
                    f"pod's memory ({self.resources.get('memory')}) less the vLLM processes' own "
                    f"and the node's share of the weights leaves {budget} GiB for the "
                    f"{engines} engine(s) on each node (pod_spec.kv_offload_budget_gib)",
                )
            return given
        if budget is None or budget < MIN_KV_OFFLOAD_GIB * engines:
            if wanted:
                problems.add(
                    "kv_offload",
                    True,
                    f"a {self.instance.instance_type} node has {budget or 0} GiB of pod memory to "
                    f"spare for KV offload; at least {MIN_KV_OFFLOAD_GIB} GiB per engine needed",
                )
            return None
        return float(budget // engines)

    def _check_layout_kept(self, problems: Problems, base: VllmConfig) -> None:
        """The replica runs the placement's layout (``multi_node_placement``); a pipeline or
        data parallel size given that differs would be replaced by it, so it is refused."""
        layout = self.layout
        given = {"pipeline_parallel_size": (base.pipeline_parallel_size, layout.pipeline_parallel)}
        if self.nodes > 1:  # one node: a configured data parallel size is rendered as given
            given["data_parallel_size"] = (base.data_parallel_size, layout.data_parallel)
        for name, (value, placed) in given.items():
            if value is not None and value != placed:
                problems.add(
                    f"config.{name}",
                    value,
                    f"the replica is placed as tensor {layout.tensor_parallel} x pipeline "
                    f"{layout.pipeline_parallel} x data {layout.data_parallel} on {self.nodes} "
                    f"node(s) and would run that instead; leave it out, or choose the layout "
                    "with tensor_parallel_size and nodes_per_replica",
                )

    def _check_store_holds_weights(self, problems: Problems) -> None:
        """The FSx store must hold the weights it is linked to (the plan's size)."""
        if self.model_store is not None and self.plan is not None:
            capacity = self.model_store.storage_capacity_gib
            weights = self.plan.weight_bytes / 2**30
            if weights > capacity:
                problems.add(
                    "weights",
                    f"{capacity} GiB FSx store",
                    f"the weights take {weights:.0f} GiB: give the FsxModelStore a "
                    "storage_capacity_gib that holds them (1200, 2400 or a multiple of 2400)",
                )

    def _configure(self, problems: Problems, base: VllmConfig) -> tuple[VllmConfig, bool]:
        """The vLLM configuration this placement needs, checked against the hardware, and
        whether vLLM's own checks passed (the launcher's run when the workload renders)."""
        stream, store = self.stream_from, self.model_store
        if stream is not None and base.load_format not in (None, "runai_streamer"):
            problems.add(
                "config.load_format", base.load_format, "streaming from S3 needs runai_streamer"
            )
        model_path = (
            stream.s3_uri if stream else f"{WEIGHTS_MOUNT}{store.mount_path if store else ''}"
        )
        layout = self.layout
        pipeline = layout.pipeline_parallel if layout.pipeline_parallel > 1 else None
        across = self.nodes > 1 and layout.data_parallel > 1
        data = layout.data_parallel if across else base.data_parallel_size
        self._check_layout_kept(problems, base)
        self._check_store_holds_weights(problems)
        config = base.with_changes(
            model=model_path,
            load_format="runai_streamer" if stream else base.load_format,
            served_model_name=base.served_model_name or self.spec.name,
            tensor_parallel_size=layout.tensor_parallel,
            pipeline_parallel_size=pipeline,
            data_parallel_size=data,
            enable_expert_parallel=self.spec.is_moe,
            quantization=self.weight_format.vllm_quantization,
            max_num_seqs=self._max_num_seqs(base),
        )
        config = config.with_changes(kv_offloading_size=self._kv_offloading_size(problems, base))
        _check_flags_kept(problems, config)
        try:
            config.validate()
        except VllmConfigError as error:
            problems.absorb(error, "config")
            return config, False
        self._check_on_hardware(config, problems)
        return config, True

    def _render_lws(self, problems: Problems) -> dict[str, Any]:
        """The LeaderWorkerSet, or ``{}`` with the multi-node launcher's problems (one rank per
        node, native start for data parallelism, ...) added to ``problems``."""
        try:
            return self.workload.leader_worker_set()
        except VllmConfigError as error:
            for problem in error.problems:
                if problem.property.startswith("extra_flags"):
                    continue  # reported by _configure
                problems.extend([problem], "" if problem.property == "startup" else "config")
            return {}

    def _router(
        self, problems: Problems, routing: PrefixRouting | bool | None
    ) -> RouterDeployment | None:
        """The router's renderer when ``routing`` (or its default, at more than one replica)
        asks for one."""
        if routing is None:
            routing = self.replicas > 1
        if routing is False:
            return None
        settings = PrefixRouting() if routing is True else routing
        if not isinstance(settings, PrefixRouting):
            problems.add("routing", routing, "a PrefixRouting, True, False or None (the default)")
            return None
        settings.validate(problems, "routing")
        return RouterDeployment(
            routing=settings,
            name=self.name,
            namespace=self.namespace,
            # Every replica the GPU group has room for, the rollout's surge included.
            ceiling=max(self.replicas, self.group.capacity // max(self.nodes, 1)),
            startup_timeout_seconds=self.startup_timeout_seconds,
            vpc_cidr=self.vpc_cidr,
        )

    def _check_on_hardware(self, config: VllmConfig, problems: Problems) -> None:
        """Problems the group's GPUs rule out; warnings for formats they emulate."""
        check = check_on_hardware(
            config,
            self.group.instance_type,
            model=self.spec,
            nodes=self.nodes,
            weight_format=self.weight_format.name,
            catalog=self.catalog,
        )
        problems.extend(check.problems, "config")
        for warning in check.warnings:
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:nonNativeWeightFormat", f"{self.group.instance_type}: {warning}"
            )
        note = speculation_with_pipeline_note(config)
        if note is not None:
            Annotations.of(self).add_warning_v2("cdk-llm-serving:speculationWithPipeline", note)

    def _load_balancer_subnets(self, exposure: Exposure) -> tuple[str, ...]:
        """The GPU subnets, when the GPU groups sit outside the cluster's private subnets
        (``gpu_availability_zone_id``): an NLB routes only to targets in its zones, so the
        Service names them (design note, "Load balancer subnets"). An internet-facing exposure
        keeps discovery (it needs public subnets) and warns."""
        cluster = self.cluster
        private = {subnet.subnet_id for subnet in cluster.private_subnets}
        gpu = [subnet.subnet_id for subnet in cluster.gpu_subnets]
        if not gpu or set(gpu) <= private:
            return ()
        if exposure.public:
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:publicLoadBalancerGpuZone",
                "the GPU groups run in their own subnet (gpu_availability_zone_id): an "
                "internet-facing load balancer is placed in the public subnets the AWS Load "
                "Balancer Controller discovers by tag, and routes to the leaders only if one "
                "of them is in the GPU subnet's zone; make sure a tagged public subnet is there.",
            )
            return ()
        return tuple(gpu)

    def _vpc_cidr(self, problems: Problems) -> str:
        """The cluster VPC's CIDR: the API's allowed source inside the cluster, LB default."""
        try:
            return self.cluster.vpc.vpc_cidr_block
        except RuntimeError:  # an imported VPC given without its CIDR
            problems.add(
                "cluster.vpc",
                self.cluster.vpc.vpc_id,
                "its CIDR is needed for the load balancer's source ranges and the NetworkPolicy; "
                "import the VPC with vpc_cidr_block",
            )
            return ""

    # -- warnings -------------------------------------------------------------------------

    def _reserve_and_warn(self) -> None:
        """The GPU nodes taken from the group, the image pull, and what the user should know."""
        if self.config.kv_offloading_size is not None:
            self.node.add_validation(_TierCheck(self))
        self.cluster.reserve_gpu_nodes(self, self.group.name, self.placement.gpu_nodes)
        self._warn_about_image()
        if self.placement.tensor_parallel_warning is not None:  # tokens per dollar below half
            Annotations.of(self).add_warning_v2(
                TENSOR_PARALLEL_WARNING_ID, self.placement.tensor_parallel_warning
            )
        warn_if_tag_only(self, "image", self.image)
        if self.router is not None:
            for field_name in ("image", "proxy_image"):
                warn_if_tag_only(
                    self,
                    f"routing.{field_name}",
                    getattr(self.router.routing, field_name),
                    pin=f"routing = PrefixRouting({field_name}='<repository>:<tag>@sha256:<digest>')",
                )
        self.cluster.allow_image_pull(self.image)
        self._warn_about_rollout()

    def _warn_about_image(self) -> None:
        """An image without EFA support turns cross-node NCCL into TCP on EFA instances."""
        if self.nodes > 1 and self.instance.efa_devices and not self.image_efa:
            Annotations.of(self).add_warning_v2(
                IMAGE_WITHOUT_EFA_WARNING,
                f"{self.image} is not declared EFA-capable (ServingImage(uri, efa=True)): NCCL between the "
                f"{self.nodes} nodes of a replica falls back to TCP on {self.group.instance_type}. "
                "Use the default image (AWS's vLLM container with EFA) or one with libfabric "
                "and aws-ofi-nccl.",
            )

    def _warn_about_rollout(self) -> None:
        """A single replica without room to surge stops serving during an update: the old
        pods' termination grace, then a replica's start (``cold_start``)."""
        if self.placement.can_surge or self.replicas != 1:
            return
        outage = self.cold_start.total_seconds + TERMINATION_GRACE_SECONDS
        needed = (self.replicas + 1) * self.nodes
        Annotations.of(self).add_warning_v2(
            "cdk-llm-serving:rolloutWithoutSurge",
            f"GPU group {self.group.name!r} ({self.group.capacity} nodes) has no room for a second "
            f"replica of {self.nodes} nodes: every change of the LeaderWorkerSet's pods replaces the "
            f"only replica, and the service does not serve for about {round(outage / 60)} "
            f"minutes (old pods' {TERMINATION_GRACE_SECONDS} s grace, then the new replica's "
            f"start: {round(self.cold_start.total_seconds / 60)} minutes estimated, up to the "
            f"startup probe's {round(self.startup_timeout_seconds / 60)}-minute budget). Way out: "
            f"give the group {needed} nodes (HyperPodInstanceGroup count={needed}); the update then "
            "starts the new replica before it removes the old one (maxSurge 1). Or acknowledge "
            "this warning and update in a maintenance window.",
        )

    def _warn_rollout_at(self, max_replicas: int) -> None:
        """Warn when a rollout at ``max_replicas`` waits for nodes: LWS adds the surge replica
        before it removes an old one (kubernetes-sigs/lws
        ``pkg/controllers/leaderworkerset_controller.go``), which a full group leaves Pending."""
        if not self.placement.can_surge:
            return  # one replica at a time (maxUnavailable 1): never waits for nodes
        needed = (max_replicas + 1) * self.placement.nodes
        if self.group.capacity >= needed:
            return
        Annotations.of(self).add_warning_v2(
            "cdk-llm-serving:rolloutStallsAtMaxReplicas",
            f"at {max_replicas} replicas the GPU group {self.group.name!r} ({self.group.capacity} "
            f"nodes) has no room for the surge replica of {self.placement.nodes} nodes: a change "
            "of the pods waits (the old replicas keep serving, the new one stays Pending) until "
            f"the autoscaler scales below {max_replicas}. Way out: give the group {needed} nodes, "
            "or acknowledge this warning and update outside peak load.",
        )

    # -- constructs -----------------------------------------------------------------------

    def _deploy(self) -> None:
        """Identity and key first, then the isolated workload, its Service and base URL, then
        the certificates, the router and the CA."""
        prerequisites = self._prerequisites()
        self.tls_issuers = self._tls_issuers(prerequisites[0])
        self._deploy_workload(prerequisites)
        #: The load balancer's hostname, once the controller has created it.
        self.load_balancer_hostname = self._load_balancer_hostname()
        self.base_url = f"https://{self.load_balancer_hostname}/v1"
        self._outputs()
        #: The leader certificate's names: in-cluster, the load balancer's, ``exposure``'s.
        self.tls_dns_names = [
            *service_dns_names(self.workload.service_name, self.namespace),
            self.load_balancer_hostname,
            *self.exposure.tls_dns_names,
        ]
        # With the router, the leaders are dialled by their own names (prefix_routing).
        leader_names = [leader_wildcard(self.name, self.namespace)] if self.router else []
        self.certificate = serving_certificate(
            self.name, self.namespace, self.labels(), [*self.tls_dns_names, *leader_names]
        )
        self.certificate_resource = self._serving_certificate()
        #: The router's Kubernetes objects (``None`` without ``routing``).
        self.router_resource = self._router_resources(prerequisites[0])
        #: Base64 of the PEM CA certificate that signs the leader's certificate (public).
        self.ca_certificate = self._ca_certificate()

    def _prerequisites(self) -> list[Construct]:
        """What the workload waits for: the model store, the pods' identities, the key's
        provider class; the first is the namespace's earliest object."""
        identity = self._pod_identity()
        prerequisites: list[Construct] = [*identity]
        if self.model_store is not None:
            identity[0].node.add_dependency(self.model_store.manifest)
            prerequisites[:0] = [self.model_store.manifest, self.model_store.association]
        if self.api_key is not None:
            prerequisites.append(self._api_key_provider(identity[0]))
        return prerequisites

    def _deploy_workload(self, prerequisites: list[Construct]) -> None:
        """The LeaderWorkerSet, its Service and NetworkPolicies. Their specs (and the Service's
        annotations) are read at synth, so the methods above still shape them."""
        lws_object = {**self.lws, "spec": _Rendered.of(lambda: self.lws["spec"])}
        self.lws_manifest = self._manifest("LeaderWorkerSet", [lws_object])
        self.lws_manifest.node.add_dependency(self.addons.leader_worker_set, *prerequisites)
        metadata = self.service["metadata"]
        service_object = {
            **self.service,
            "metadata": {
                **metadata,
                "annotations": _Rendered.of(lambda: self.service["metadata"]["annotations"]),
            },
            "spec": _Rendered.of(lambda: self.service["spec"]),
        }
        self.service_resource = self._manifest("Service", [service_object])
        if self.addons.load_balancer_controller is not None:
            self.service_resource.node.add_dependency(self.addons.load_balancer_controller)
        self.service_resource.node.add_dependency(*prerequisites)
        self.network_policy_resource = self._manifest("NetworkPolicies", self.network_policies)
        self.network_policy_resource.node.add_dependency(prerequisites[0])
        self.lws_manifest.node.add_dependency(self.network_policy_resource)

    def _pod_identity(self) -> list[Construct]:
        """Service accounts of the pods and their Pod Identity roles (design note, "Pod
        identities"): the leader's reads the S3 prefix when streaming and the API key, whose
        resource policy names that role alone; the workers' role, only when streaming, reads
        the weights and nothing else. From the FSx store no role needs AWS credentials."""
        role = self._pod_role(
            "WeightsRole",
            self.service_account,
            f"{self.name}: the vLLM leader's identity (weights, API key)",
            "ExecutionRolePolicy",
        )
        if self.api_key is not None:
            self.api_key.grant_read(role)
            restrict_api_key_readers(self.api_key, role)
        identity: list[Construct] = [
            self._service_accounts(),
            self._association("WeightsAssociation", self.service_account, role),
        ]
        if self.worker_service_account is not None and self.stream_from is not None:
            worker_role = self._pod_role(
                "WorkerWeightsRole",
                self.worker_service_account,
                f"{self.name}: the vLLM workers' identity (weights only)",
                "WorkerWeightsPolicy",
            )
            identity.append(
                self._association(
                    "WorkerWeightsAssociation", self.worker_service_account, worker_role
                )
            )
        return identity

    def _service_accounts(self) -> eks.KubernetesManifest:
        """The pods' service accounts, without tokens, in the cluster's namespace."""
        accounts = [self.service_account]
        if self.worker_service_account is not None:
            accounts.append(self.worker_service_account)
        manifest = self._manifest(
            "WeightsIdentity",
            [
                service_account({"name": account, "namespace": self.namespace})
                for account in accounts
            ],
        )
        manifest.node.add_dependency(
            self.cluster.nodes_ready, self.cluster.kubernetes_namespace(self.namespace)
        )
        return manifest

    def _pod_role(
        self, id: str, service_account: str, description: str, policy_id: str
    ) -> iam.Role:
        """A Pod Identity role for ``service_account`` that reads the streamed weights, if any
        (in its own policy ``policy_id``)."""
        role = pod_identity_role(
            self,
            id,
            cluster_arn=self.cluster.eks_cluster.cluster_arn,
            namespace=self.namespace,
            service_account=service_account,
            description=description,
        )
        grants = ExecutionRoleGrants(self, role, policy_id)
        if self.stream_from is not None:
            grants.model_data_read(self.stream_from)
        grants.acknowledge()
        return role

    def _association(
        self, id: str, service_account: str, role: iam.IRole
    ) -> eks.CfnPodIdentityAssociation:
        association = eks.CfnPodIdentityAssociation(
            self,
            id,
            cluster_name=self.cluster.eks_cluster.cluster_name,
            namespace=self.namespace,
            service_account=service_account,
            role_arn=role.role_arn,
        )
        association.node.add_dependency(self.cluster.pod_identity_agent)
        return association

    def _api_key_provider(self, after: Construct) -> Construct:
        """The SecretProviderClass for the key, once the CSI driver (its CRD) is installed."""
        assert self.api_key is not None and self.workload.api_key_class is not None
        region = Stack.of(self).region
        provider = self._manifest(
            "ApiKeyProvider",
            [
                secret_provider_class(
                    self.workload.api_key_class, self.namespace, self.api_key, region
                )
            ],
        )
        provider.node.add_dependency(secrets_store_addon(self, self.cluster), after)
        return provider

    def _manifest(self, id: str, manifest: Sequence[Mapping[str, Any]]) -> eks.KubernetesManifest:
        return eks.KubernetesManifest(
            self, id, cluster=self.cluster.eks_cluster, manifest=list(manifest), overwrite=True
        )

    def _tls_issuers(self, namespace: Construct) -> eks.KubernetesManifest:
        """The service's CA and its Issuers, once cert-manager's webhook serves."""
        issuers = self._manifest(
            "TlsIssuers", ca_manifests(self.name, self.namespace, self.labels())
        )
        issuers.node.add_dependency(self.addons.enable_cert_manager_webhook(), namespace)
        return issuers

    def _load_balancer_hostname(self) -> str:
        """The Service's load balancer hostname, read once the controller has created it."""
        return self._object_value(
            "LoadBalancerHostname",
            "service",
            self.workload.service_name,
            ".status.loadBalancer.ingress[0].hostname",
            self.service_resource,
        )

    def _object_value(
        self, id: str, object_type: str, object_name: str, json_path: str, after: Construct
    ) -> str:
        """``json_path`` of a Kubernetes object of this namespace, read after ``after``."""
        value = eks.KubernetesObjectValue(
            self,
            id,
            cluster=self.cluster.eks_cluster,
            object_type=object_type,
            object_name=object_name,
            object_namespace=self.namespace,
            json_path=json_path,
            timeout=Duration.minutes(10),
        )
        value.node.add_dependency(after)
        return value.value

    def _outputs(self) -> None:
        """The base URL and, with an API key, its secret's ARN."""
        CfnOutput(
            self,
            "BaseUrl",
            value=self.base_url,
            description=f"OpenAI-compatible base URL of {self.config.served_model_name}",
        )
        if self.api_key is not None:
            CfnOutput(
                self,
                "ApiKeySecretArn",
                value=self.api_key.secret_arn,
                description="Secrets Manager secret holding the API key (Authorization: Bearer)",
            )

    def _serving_certificate(self) -> eks.KubernetesManifest:
        """The leader's certificate, after its Issuers; the leader starts after it."""
        resource = self._manifest("ServingCertificate", [self.certificate])
        resource.node.add_dependency(self.tls_issuers, self.addons.enable_cert_manager_webhook())
        self.lws_manifest.node.add_dependency(resource)
        return resource

    def _router_resources(self, namespace: Construct) -> eks.KubernetesManifest | None:
        """The router's certificate (the load balancer's names, the service's CA) and its
        objects, once the Issuers are there; the Service's targets follow."""
        if self.router is None:
            return None
        certificate = self._manifest(
            "RouterCertificate", [self.router.certificate(self.tls_dns_names)]
        )
        certificate.node.add_dependency(self.tls_issuers)
        router = self._manifest("Router", self.router.manifests())
        router.node.add_dependency(certificate, namespace)
        return router

    def _ca_certificate(self) -> str:
        """The CA of the leader's certificate, read from its secret, and output."""
        ca = self._object_value(
            "CaCertificateValue",
            "secret",
            serving_secret_name(self.name),
            ".data.ca\\.crt",
            self.certificate_resource,
        )
        CfnOutput(
            self,
            "CaCertificate",
            value=ca,
            description="Base64 PEM of the CA the leader's TLS certificate chains to (base64 -d > ca.crt)",
        )
        return ca


def _parse_weight_format(problems: Problems, given: WeightFormat | str) -> WeightFormat:
    """The weight format; refused at once when unknown (the planner and vLLM's flags both
    need it)."""
    fmt = WeightFormat.parse(problems, "weight_format", given)
    if fmt is None:
        problems.raise_if_any()
        raise AssertionError("unreachable: raise_if_any raised")
    return fmt


def _check_flags_kept(problems: Problems, config: VllmConfig) -> None:
    """Flags the multi-node launcher sets per pod, or the service for TLS, cannot be given."""
    for flag, value in config.extra_flags.items():
        if flag in MULTINODE_FLAGS:
            problems.add(
                f"config.extra_flags[{flag!r}]",
                value,
                "set per pod by the multi-node launcher (vllm.multinode)",
            )
        elif flag in TLS_FLAGS:
            problems.add(
                f"config.extra_flags[{flag!r}]",
                value,
                "set by the service: vLLM serves TLS with the cert-manager certificate (serving_tls)",
            )

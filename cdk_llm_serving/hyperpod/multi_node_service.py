"""``VllmMultiNodeService``: one model served by vLLM across several HyperPod nodes.

A LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``) whose groups are one replica each
(group size = nodes per replica, from the planner unless given), a Service on the
leaders behind an internal load balancer on 443 (public only when asked; TLS end to end:
vLLM's own, or re-encrypted after an ACM certificate), serving the OpenAI-compatible API
(``/v1/chat/completions`` with streaming, ``/v1/models``) and Prometheus ``/metrics``; vLLM's
other routes are closed on the leader (``vllm/route_guard.py``).

The vLLM command line comes from ``VllmConfig`` (the same builder the SageMaker path
uses), with the planner's layout (``Plan.layout``, or ``planning.sizing.layout_across_nodes``
when ``nodes_per_replica`` exceeds the plan's nodes): tensor parallelism over each node's GPUs,
and the quantization of the weight format. Across nodes, a MoE model runs data parallel (one rank per node) with its experts
sharded over every GPU (``--enable-expert-parallel``): vLLM's documented multi-node layout
for MoE (``docs/serving/data_parallel_deployment.md``). Whether MTP speculative decoding
starts with pipeline parallelism > 1 on vLLM 0.33's default model runner could not be
verified from its source (vllm/config/vllm.py only routes EAGLE-3 + PP to the V1 runner), so
MoE replicas avoid pipeline parallelism; dense models still use it across nodes.

Pods are Guaranteed (``pod_spec``), restricted and isolated by NetworkPolicies; the leader
needs an API key from Secrets Manager (``serving_security``) and serves HTTPS itself with a
certificate from cert-manager (``serving_tls``): no hop between a client and vLLM is plaintext.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations, CfnOutput, Duration, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from .._cdk.pod_identity import pod_identity_role
from .._cdk.role_grants import ExecutionRoleGrants
from .._cdk.template_limits import check_template_limits
from .._cdk.validation import check_at_least, check_kubernetes_name, kubernetes_name
from ..errors import Problems, checked_props
from ..model_sources import ModelData, warn_if_tag_only
from ..planning.catalog import Catalog, InstanceSpec, default_catalog
from ..planning.cold_start import estimate_cold_start
from ..planning.models import ModelSpec, preset, weight_format
from ..planning.sizing import (
    Layout,
    Plan,
    PlanningError,
    layout_across_nodes,
    plan,
    tensor_parallel_options,
)
from ..vllm.config import VllmConfig, VllmConfigError
from ..vllm.hardware import check_on_hardware, speculation_with_pipeline_note
from ..vllm.multinode import (
    MULTINODE_FLAGS,
    Startup,
    leader_command,
    with_api_key_file,
    with_route_guard,
    worker_command,
)
from ._input_checks import check_service_options
from .addons import HyperPodServingAddons
from .constants import (
    APP_NAME_LABEL,
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
    ROLE_LABEL,
    VLLM_API_PORT,
    VLLM_HEALTH_PATH,
    WORKER_POD_ROLE,
)
from .instance_group import HyperPodInstanceGroup
from .interfaces import IHyperPodCluster
from .model_store import FsxModelStore
from .pod_spec import (
    can_surge,
    container_security_context,
    guaranteed_cpu_memory,
    pod_security,
    rollout_strategy,
)
from .serving_image import IMAGE_WITHOUT_EFA_WARNING, default_vllm_image, efa_environment
from .serving_security import (
    API_KEY_FILE,
    API_KEY_MOUNT,
    api_key_volume,
    generated_api_key,
    network_policies,
    secret_provider_class,
    secrets_store_addon,
)
from .serving_tls import (
    TLS_FLAGS,
    ca_manifests,
    service_dns_names,
    serving_certificate,
    serving_secret_name,
    tls_flags,
    tls_mount,
    tls_volume,
)

__all__ = ["Exposure", "VllmMultiNodeService"]

#: A DNS name for a certificate: labels of letters, digits and hyphens; an optional leading ``*.``.
_DNS_NAME = re.compile(
    r"(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
)

_WEIGHTS_MOUNT = "/models"
_NCCL_ENVIRONMENT = {"NCCL_DEBUG": "WARN"}
_PROBE_PERIOD_SECONDS = 10
#: The load balancer's listener port: TLS always (vLLM's own, or the NLB's with an ACM
#: certificate); there is no plain-HTTP listener.
HTTPS_PORT = 443
#: The NLB's TLS listener policy with an ACM certificate: TLS 1.3 and 1.2 only (the policy AWS
#: recommends, https://docs.aws.amazon.com/elasticloadbalancing/latest/network/describe-ssl-policies.html).
TLS_LISTENER_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"


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
    :param image: the vLLM image. Default: AWS's vLLM container for EC2/EKS with EFA
        (``assets/vllm_image.json``) from the region's deep-learning-container account.
    :param image_efa: ``image`` carries libfabric and aws-ofi-nccl (NCCL over EFA).
        Default: ``True`` for the default image, ``False`` for any other; a multi-node
        service on EFA instances whose image is not EFA-capable gets a synth warning.
    :param api_key: the Secrets Manager secret whose value clients send as
        ``Authorization: Bearer <key>``; one key per line, each accepted (two while a key
        rotates, README). Default: a generated secret (``self.api_key``).
    :param authenticate: require the API key. Default: ``True``; ``public`` exposure needs it.
    :param gpu_group: the instance group to run on. Default: the cluster's first GPU group.
    :param replicas: model replicas (LeaderWorkerSet groups). Default: 1.
    :param nodes_per_replica: group size. Default: the planner's node count.
    :param startup: ``native`` or ``ray`` (see ``vllm.multinode``). Default: ``native``.
    :param exposure: load balancer settings. Default: internal, TLS passed through to vLLM on 443.
    :param namespace: Default: the model store's namespace.
    :param name: the LeaderWorkerSet / Service name. Default: the served model name.
    :param catalog: the planner's instance catalog. Default: ``default_catalog()``.
    """

    group: HyperPodInstanceGroup
    instance: InstanceSpec

    @checked_props
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
        image: str | None = None,
        image_efa: bool | None = None,
        api_key: secretsmanager.ISecret | None = None,
        authenticate: bool = True,
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
        check_service_options(problems, startup, quantization)
        self._resolve_weights_source(problems, model_store, namespace)
        self._resolve_group(problems, gpu_group)
        self._resolve_plan(problems, quantization, config, nodes_per_replica)
        self.replicas, self.startup = replicas, startup
        self.name = name or kubernetes_name(config.served_model_name or self.spec.name)
        check_kubernetes_name(problems, "name", self.name)
        check_kubernetes_name(problems, "namespace", self.namespace, namespace=True)
        self._validate_placement(problems, quantization)
        self.config = self._configure(config, quantization, model_store, problems)
        if stream_from is not None:
            stream_from.validate(problems, "stream_from")
        exposure.validate(problems, "exposure")
        if exposure.public and not authenticate:
            problems.add("authenticate", False, "public=True needs the API key (authenticate=True)")
        self.image = image or default_vllm_image(self, problems)
        self.image_efa = image_efa if image_efa is not None else image is None
        self.resources = self._resources(problems)
        self.vpc_cidr = self._vpc_cidr(problems)
        problems.raise_if_any()
        cluster.reserve_gpu_nodes(self, self.group.name, self.replicas * self.nodes)
        self._warn_about_image()
        warn_if_tag_only(self, "image", self.image)

        path = "fsx_lustre" if model_store is not None else "s3_streaming"
        self.cold_start = estimate_cold_start(
            self.plan.weight_bytes if self.plan else 0.0, path, self.nodes
        )
        self.service_account = f"{self.name}-vllm"
        self.api_key = (api_key or generated_api_key(self, self.name)) if authenticate else None
        self._render(model_store)

    def _render(self, model_store: FsxModelStore | None) -> None:
        """Identity and key first, then the isolated workload, its Service and base URL."""
        identity = self._pod_identity(with_namespace=model_store is None)
        prerequisites = [*identity]
        if model_store is not None:
            identity[0].node.add_dependency(model_store.manifest)
            prerequisites[:0] = [model_store.manifest, model_store.association]
        if self.api_key is not None:
            prerequisites.append(self._api_key_provider(identity[0]))
        self.tls_issuers = self._render_tls_issuers(prerequisites[0])
        self.lws = self.leader_worker_set(
            self.image, self.startup, model_store.claim_name if model_store else None
        )
        self.service = self.service_manifest()
        self.network_policies = network_policies(
            self.name,
            self.namespace,
            self.labels(),
            {**self.labels(), ROLE_LABEL: LEADER_POD_ROLE},
            VLLM_API_PORT,
            self.vpc_cidr,
        )
        self._render_workload(prerequisites)
        self._render_base_url()
        self._render_serving_certificate()

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
        """The planner's sizing for the group's type, each node's GPUs one tensor-parallel group
        (the layout this service runs); nodes per replica default to it."""
        self.plan: Plan | None = None
        try:
            self.plan = plan(
                self.spec,
                quantization,
                self.group.instance_type,
                max_context=config.max_model_len,
                catalog=self.catalog,
                tensor_parallel=self._node_tensor_parallel,
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

    def _resources(self, problems: Problems) -> dict[str, str]:
        """Whole-node GPUs and EFA devices; Guaranteed CPU and memory sized from the type."""
        resources = {
            GPU_RESOURCE: str(self.instance.gpus),
            EFA_RESOURCE: str(self.instance.efa_devices),
        }
        try:
            return {**guaranteed_cpu_memory(self.instance), **resources}
        except KeyError as error:
            problems.add("gpu_group", self.group.instance_type, f"{error.args[0]}; add it")
            return resources

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

    def _warn_about_image(self) -> None:
        """An image without EFA support turns cross-node NCCL into TCP on EFA instances."""
        if self.nodes > 1 and self.instance.efa_devices and not self.image_efa:
            Annotations.of(self).add_warning_v2(
                IMAGE_WITHOUT_EFA_WARNING,
                f"{self.image} is not declared EFA-capable (image_efa=True): NCCL between the "
                f"{self.nodes} nodes of a replica falls back to TCP on {self.group.instance_type}. "
                "Use the default image (AWS's vLLM container with EFA) or one with libfabric "
                "and aws-ofi-nccl.",
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
        self.network_policy_resource = eks.KubernetesManifest(
            self,
            "NetworkPolicies",
            cluster=eks_cluster,
            manifest=self.network_policies,
            overwrite=True,
        )
        self.network_policy_resource.node.add_dependency(prerequisites[0])
        self.lws_manifest.node.add_dependency(self.network_policy_resource)

    def _render_tls_issuers(self, namespace: Construct) -> eks.KubernetesManifest:
        """The service's CA and its Issuers, once cert-manager's webhook serves."""
        issuers = eks.KubernetesManifest(
            self,
            "TlsIssuers",
            cluster=self.cluster.eks_cluster,
            manifest=ca_manifests(self.name, self.namespace, self.labels()),
            overwrite=True,
        )
        issuers.node.add_dependency(self.addons.enable_cert_manager_webhook())
        issuers.node.add_dependency(namespace)
        return issuers

    def _render_serving_certificate(self) -> None:
        """The leader's certificate, for the in-cluster names, the load balancer's hostname and
        ``exposure.tls_dns_names``; the leader starts after it. Its CA as an output."""
        self.tls_dns_names = [
            *service_dns_names(self.name, self.namespace),
            self.load_balancer_hostname,
            *self.exposure.tls_dns_names,
        ]
        self.certificate = serving_certificate(
            self.name, self.namespace, self.labels(), self.tls_dns_names
        )
        self.certificate_resource = eks.KubernetesManifest(
            self,
            "ServingCertificate",
            cluster=self.cluster.eks_cluster,
            manifest=[self.certificate],
            overwrite=True,
        )
        self.certificate_resource.node.add_dependency(self.tls_issuers)
        self.certificate_resource.node.add_dependency(self.addons.enable_cert_manager_webhook())
        self.lws_manifest.node.add_dependency(self.certificate_resource)
        ca = eks.KubernetesObjectValue(
            self,
            "CaCertificateValue",
            cluster=self.cluster.eks_cluster,
            object_type="secret",
            object_name=serving_secret_name(self.name),
            object_namespace=self.namespace,
            json_path=".data.ca\\.crt",
            timeout=Duration.minutes(10),
        )
        ca.node.add_dependency(self.certificate_resource)
        #: Base64 of the PEM CA certificate that signs the leader's certificate (public).
        self.ca_certificate = ca.value
        CfnOutput(
            self,
            "CaCertificate",
            value=self.ca_certificate,
            description="Base64 PEM of the CA the leader's TLS certificate chains to (base64 -d > ca.crt)",
        )

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
        self.load_balancer_hostname = hostname.value
        self.base_url = f"{self.exposure.scheme}://{hostname.value}/v1"
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

    # -- configuration -------------------------------------------------------------------

    def _pod_identity(self, with_namespace: bool) -> list[Construct]:
        """Service account of the pods and its Pod Identity role: reads the S3 prefix when
        streaming, the API key's secret when authenticating. The namespace comes with it when
        no model store creates it."""
        cluster = self.cluster
        role = pod_identity_role(
            self,
            "WeightsRole",
            cluster_arn=cluster.eks_cluster.cluster_arn,
            namespace=self.namespace,
            service_account=self.service_account,
            description=f"{self.name}: the vLLM pods' identity (weights, API key)",
        )
        grants = ExecutionRoleGrants(self, role)
        if self.stream_from is not None:
            grants.model_data_read(self.stream_from)
        grants.acknowledge()
        if self.api_key is not None:
            self.api_key.grant_read(role)
        namespace = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        ]
        manifest = eks.KubernetesManifest(
            self,
            "WeightsIdentity",
            cluster=cluster.eks_cluster,
            overwrite=True,
            manifest=[
                *(namespace if with_namespace else []),
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": self.service_account, "namespace": self.namespace},
                    "automountServiceAccountToken": False,
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

    def _api_key_provider(self, after: Construct) -> Construct:
        """The SecretProviderClass for the key, once the CSI driver (its CRD) is installed."""
        assert self.api_key is not None
        provider = eks.KubernetesManifest(
            self,
            "ApiKeyProvider",
            cluster=self.cluster.eks_cluster,
            overwrite=True,
            manifest=[
                secret_provider_class(
                    self._api_key_class, self.namespace, self.api_key, Stack.of(self).region
                )
            ],
        )
        provider.node.add_dependency(secrets_store_addon(self, self.cluster))
        provider.node.add_dependency(after)
        return provider

    @property
    def _api_key_class(self) -> str:
        return f"{self.name}-api-key"

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
        layout = self.layout
        config = base.with_changes(
            model=model_path,
            load_format="runai_streamer" if streaming else base.load_format,
            served_model_name=base.served_model_name or self.spec.name,
            tensor_parallel_size=layout.tensor_parallel,
            pipeline_parallel_size=layout.pipeline_parallel
            if layout.pipeline_parallel > 1
            else None,
            data_parallel_size=layout.data_parallel
            if self.nodes > 1 and layout.data_parallel > 1
            else base.data_parallel_size,
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
            elif flag in TLS_FLAGS:
                problems.add(
                    f"config.extra_flags[{flag!r}]",
                    config.extra_flags[flag],
                    "set by the service: vLLM serves TLS with the cert-manager certificate (serving_tls)",
                )
        try:
            config.validate()
        except VllmConfigError as error:
            for prop, value, allowed in error.problems:
                problems.add(f"config.{prop}", value, allowed)
            return config
        self._check_on_hardware(config, quantization, problems)
        try:  # the launcher's own checks (one rank per node, native start for DP, ...)
            leader_command(config, self.nodes, self.startup)
        except VllmConfigError as error:
            for prop, value, allowed in error.problems:
                if not prop.startswith("extra_flags"):  # reported above
                    problems.add(prop if prop == "startup" else f"config.{prop}", value, allowed)
        return config

    @property
    def layout(self) -> Layout:
        """The parallelism a replica runs: the plan's when it spans ``nodes``, else the planner's
        layout rule for that many nodes (``nodes_per_replica`` above the plan's)."""
        if self.plan is not None and self.plan.nodes == self.nodes:
            return self.plan.layout
        return layout_across_nodes(self.spec, self._node_tensor_parallel, self.nodes)

    @property
    def _node_tensor_parallel(self) -> int:
        """Each node's GPUs as one tensor-parallel group (the widest size vLLM accepts)."""
        return tensor_parallel_options(self.spec, self.instance.gpus)[-1]

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
        note = speculation_with_pipeline_note(config)
        if note is not None:
            Annotations.of(self).add_warning_v2("cdk-llm-serving:speculationWithPipeline", note)

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
            container["volumeMounts"].append(tls_mount())
            volumes.append(tls_volume(serving_secret_name(self.name)))
            if self.api_key is not None:
                container["volumeMounts"].append(
                    {"name": "api-key", "mountPath": API_KEY_MOUNT, "readOnly": True}
                )
                volumes.append(api_key_volume(self._api_key_class))
        return {
            "metadata": {"labels": {**self.labels(), ROLE_LABEL: role}},
            "spec": {
                "serviceAccountName": self.service_account,
                **pod_security(),
                "terminationGracePeriodSeconds": 120,
                **self._scheduling(),
                "containers": [container],
                "volumes": volumes,
            },
        }

    def _container(self, image: str, command: list[str], args: list[str]) -> dict[str, Any]:
        """The vLLM container: the node's GPUs and EFA devices, Guaranteed CPU and memory."""
        environment = {**efa_environment(), **_NCCL_ENVIRONMENT}
        return {
            "name": "vllm",
            "image": image,
            "command": command,
            "args": args,
            "env": [{"name": key, "value": value} for key, value in environment.items()],
            "resources": {"requests": dict(self.resources), "limits": dict(self.resources)},
            "securityContext": container_security_context(),
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        }

    def _serve_api(self, container: dict[str, Any]) -> None:
        """The leader serves the API over HTTPS: its port and probes (startup allows the cold
        start; the kubelet does not verify the certificate, ``serving_tls``)."""
        failures = math.ceil(self.cold_start.startup_timeout_seconds / _PROBE_PERIOD_SECONDS)
        probe = {
            "httpGet": {"path": VLLM_HEALTH_PATH, "port": VLLM_API_PORT, "scheme": "HTTPS"},
            "periodSeconds": _PROBE_PERIOD_SECONDS,
        }
        container["ports"] = [{"name": "https", "containerPort": VLLM_API_PORT}]
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
        # Only the leader serves the API: the TLS flags go on its command line alone.
        leader_config = self.config.with_changes(
            extra_flags={**self.config.extra_flags, **tls_flags()}
        )
        # vLLM serves /v1 (key-checked), /health and /metrics only: route_guard.py.
        leader = with_route_guard(leader_command(leader_config, self.nodes, startup))
        worker = worker_command(self.config, self.nodes, startup)
        if self.api_key is not None:
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
        self.rollout_strategy = rollout_strategy(self.group.count, self.nodes, self.replicas)
        if not can_surge(self.rollout_strategy) and self.replicas == 1:
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:rolloutWithoutSurge",
                f"GPU group {self.group.name!r} ({self.group.count} nodes) has no room for a second "
                f"replica of {self.nodes} nodes: an update replaces the only replica, and the "
                "service does not serve until the new one is ready.",
            )
        return {
            "apiVersion": LWS_API_VERSION,
            "kind": "LeaderWorkerSet",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels()},
            "spec": {
                "replicas": self.replicas,
                "startupPolicy": "LeaderCreated",
                "rolloutStrategy": self.rollout_strategy,
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
                "loadBalancerSourceRanges": list(self.exposure.source_ranges or [self.vpc_cidr]),
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
        return [self.lws, self.service, *self.network_policies]

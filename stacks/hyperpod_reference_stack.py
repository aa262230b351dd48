"""Reference: a HyperPod EKS cluster sized for the 2.4T-parameter, 95B-active MoE in NVFP4."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_llm_serving.hyperpod.addons import HelmChartSource, HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.dashboard import VllmDashboard
from cdk_llm_serving.hyperpod.inference_endpoint import (
    HyperPodInferenceEndpoint,
    InferenceAutoScaling,
)
from cdk_llm_serving.hyperpod.inference_features import (
    InferenceKvCache,
    InferenceRouting,
    RoutingStrategy,
)
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
from cdk_llm_serving.hyperpod.model_store import FsxModelStore
from cdk_llm_serving.hyperpod.multi_node_service import VllmMultiNodeService
from cdk_llm_serving.hyperpod.node_autoscaling import NodeAutoScaling
from cdk_llm_serving.hyperpod.observability import VllmObservability
from cdk_llm_serving.hyperpod.prefix_routing import PrefixRouting
from cdk_llm_serving.hyperpod.replica_autoscaling import (
    ScaleToZero,
    VllmReplicaAutoScaling,
    WakeOnConnect,
)
from cdk_llm_serving.hyperpod.tiered_storage import TieredStorage
from cdk_llm_serving.model_sources import ModelData
from cdk_llm_serving.planning.decode import Workload
from cdk_llm_serving.planning.sizing import plan
from cdk_llm_serving.vllm import MtpSpeculation, VllmConfig

REFERENCE_MODEL = "reference-2.4t-a95b"
REFERENCE_FORMAT = "nvfp4"
REFERENCE_CONTEXT = 131072
#: The single-node model the inference-operator variant adds, and its types in priority order.
SINGLE_NODE_MODEL = "gpt-oss-120b"
SINGLE_NODE_TYPES = ("ml.p5en.48xlarge", "ml.p5.48xlarge")
#: The dense model the inference-operator variant serves with disaggregated prefill/decode
#: (AWS's own example of a model DPD helps: "70B+ parameters (for example, Llama 3.3 70B)",
#: https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-dpd.html),
#: its type (8 x A100 80 GiB, EFA with GPU-Direct RDMA for the KV transfer; the model's 141 GB
#: of bf16 weights fit one node. A type no other group of the variant uses, so its two nodes
#: are the P/D endpoint's alone; HyperPod offers it in us-west-2, cfn-lint's region list; p5e
#: is not there) and the workload
#: it is declared for: long documents in (8K tokens), 512 tokens out, 4 requests/s sustained:
#: every condition of AWS's "When DPD helps" holds, so the planner turns P/D on.
LONG_CONTEXT_MODEL = "llama-3.3-70b"
LONG_CONTEXT_TYPE = "ml.p4de.24xlarge"
LONG_CONTEXT_WORKLOAD = Workload(input_tokens=8192, output_tokens=512, request_rate=4.0)
#: AWS's worker image for DPD (vLLM, LMCache, NIXL and the EFA libfabric provider), as the DPD
#: page lists it.
DPD_WORKER_IMAGE = "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1"


@dataclass(frozen=True)
class HyperPodSettings:
    weights_uri: str
    gpu_instance_type: str = "ml.p6-b200.48xlarge"
    replicas: int = 1
    #: Above ``replicas``, the GPU group holds this many replicas and KEDA scales between them.
    max_replicas: int = 1
    #: With KEDA (``max_replicas`` above ``replicas``): scale to zero replicas and nodes when
    #: idle, woken by a client's connection through the wake proxy (``WakeOnConnect``).
    scale_to_zero: bool = False
    #: With KEDA: vLLM's prefix-aware router in front of the replicas (``PrefixRouting``).
    #: Off by default: the router restarts while no leader is healthy (README "Prefix-aware
    #: routing across replicas").
    prefix_routing: bool = False
    admin_role_arns: tuple[str, ...] = ()
    hyperpod_chart_dir: str | None = None
    #: ``None``: AWS's vLLM container with EFA for the stack's region.
    vllm_image: str | None = None
    #: Opt-in variant: gpt-oss-120b through AWS's inference operator on two more GPU groups,
    #: and Llama 3.3 70B with disaggregated prefill/decode on a third (two nodes).
    inference_operator: bool = False
    single_node_weights_uri: str = ""
    long_context_weights_uri: str = ""
    #: AZ ID of the GPU capacity (e.g. ``usw2-az2``): the GPU subnet and FSx go there.
    gpu_availability_zone_id: str | None = None
    #: How long the deployment waits for the HyperPod nodes (``HyperPodEksCluster``'s
    #: ``nodes_ready_timeout``). ``None``: the library's budget from group sizes and deep
    #: health checks.
    nodes_ready_minutes: int | None = None


class HyperPodReferenceStack(Stack):
    """EKS + HyperPod + serving add-ons + FSx weights store + multi-node vLLM for the reference MoE.

    The GPU group's size comes from the planner: nodes per replica (2 x p6-b200 for the
    2.4T NVFP4 model at 128k context) times replicas.
    """

    def __init__(
        self, scope: Construct, id: str, *, settings: HyperPodSettings, **kwargs: Any
    ) -> None:
        super().__init__(scope, id, **kwargs)
        #: The inference-operator variant's endpoints (``settings.inference_operator``): the
        #: colocated MoE one and the disaggregated dense one.
        self.single_node: HyperPodInferenceEndpoint | None = None
        self.long_context: HyperPodInferenceEndpoint | None = None
        self.plan = plan(
            REFERENCE_MODEL,
            REFERENCE_FORMAT,
            settings.gpu_instance_type,
            max_context=REFERENCE_CONTEXT,
        )
        self._add_cluster(settings)
        self._add_serving(settings)
        self._add_monitoring_and_scaling(settings)
        if settings.inference_operator:
            self._add_single_node_endpoint(settings)
            self._add_long_context_endpoint(settings)
        CfnOutput(self, "EksClusterName", value=self.cluster.eks_cluster.cluster_name)
        CfnOutput(self, "HyperPodClusterArn", value=self.cluster.cfn_cluster.attr_cluster_arn)
        CfnOutput(
            self,
            "WeightsClaim",
            value=f"{self.model_store.namespace}/{self.model_store.claim_name}",
        )

    def _add_cluster(self, settings: HyperPodSettings) -> None:
        """The cluster, its GPU group sized for the most replicas, the add-ons.

        The KEDA variant (``max_replicas`` above ``replicas``) turns cluster node autoscaling
        on: the GPU group starts with 0 nodes (AWS's advice for Karpenter-managed groups) and
        may grow to the nodes of ``max_replicas`` replicas; Karpenter adds whole nodes for the
        replicas KEDA asks for and removes them once empty.
        """
        scaled = settings.max_replicas > settings.replicas
        most_nodes = self.plan.nodes * max(settings.replicas, settings.max_replicas)
        single_node_groups = (
            [
                HyperPodInstanceGroup.gpu("gpu-h200", SINGLE_NODE_TYPES[0], 1),
                HyperPodInstanceGroup.gpu("gpu-h100", SINGLE_NODE_TYPES[1], 1),
                # One prefill and one decode node of the P/D endpoint.
                HyperPodInstanceGroup.gpu("gpu-pd", LONG_CONTEXT_TYPE, 2),
            ]
            if settings.inference_operator
            else []
        )
        self.cluster = HyperPodEksCluster(
            self,
            "HyperPod",
            instance_groups=[
                HyperPodInstanceGroup.system(instance_type="ml.m5.4xlarge", count=2),
                HyperPodInstanceGroup.gpu(
                    self._gpu_group_name(single_node_groups),
                    settings.gpu_instance_type,
                    0 if scaled else most_nodes,
                    ebs_volume_gb=1000,
                    # One replica's nodes more than the maximum: the LeaderWorkerSet rolls with
                    # a surge of one group, which at the maximum needs nodes of its own.
                    max_count=most_nodes + self.plan.nodes if scaled else None,
                ),
                *single_node_groups,
            ],
            admin_role_arns=settings.admin_role_arns,
            # The operator variant's tiered KV cache needs the cluster's managed tiered storage
            # (5 % of every node's memory); declared here, before the multi-node service, so
            # that its KV offload buffer leaves the tier's share out.
            tiered_storage=TieredStorage() if settings.inference_operator else None,
            gpu_availability_zone_id=settings.gpu_availability_zone_id,
            nodes_ready_timeout=(
                Duration.minutes(settings.nodes_ready_minutes)
                if settings.nodes_ready_minutes is not None
                else None
            ),
            # In EKS standard support to 2027-03-27; the default, 1.33, costs extended support.
            kubernetes_version="1.35",
            node_auto_scaling=NodeAutoScaling() if scaled else None,
        )
        chart = (
            HelmChartSource.from_directory(settings.hyperpod_chart_dir)
            if settings.hyperpod_chart_dir
            else None
        )
        self.addons = HyperPodServingAddons(
            self, "ServingAddons", cluster=self.cluster, hyperpod_chart=chart
        )

    def _gpu_group_name(self, others: list[HyperPodInstanceGroup]) -> str:
        """The serving group named after the GPU it holds (``gpu-b200``, ``gpu-h200``), with
        ``-moe`` when a single-node group holds the same GPU (review finding M6)."""
        gpu = self.plan.instance_spec.gpu.name.lower()
        name = f"gpu-{gpu}"
        return f"{name}-moe" if name in {group.name for group in others} else name

    def _add_serving(self, settings: HyperPodSettings) -> None:
        """Weights on FSx and the multi-node vLLM service of the reference model."""
        weights = ModelData.from_s3_uri(settings.weights_uri)
        self.model_store = FsxModelStore(
            self,
            "ModelStore",
            cluster=self.cluster,
            weights_bucket=s3.Bucket.from_bucket_name(self, "WeightsBucket", weights.bucket_name),
            weights_prefix=weights.prefix,
        )
        self.service = VllmMultiNodeService(
            self,
            "Serving",
            addons=self.addons,
            weights=self.model_store,
            model=REFERENCE_MODEL,
            weight_format=REFERENCE_FORMAT,
            image=settings.vllm_image,
            replicas=settings.replicas,
            # Prefix-cache blocks evicted from GPU memory kept in the pods' host memory; refused
            # rather than dropped if a node had too little memory to spare.
            kv_offload=True,
            # vLLM's prefix-aware router in front of the replicas only when asked: the router
            # restarts while no leader is healthy (README "Prefix-aware routing across replicas").
            routing=PrefixRouting() if settings.prefix_routing else False,
            config=VllmConfig(
                model="set-by-the-service",
                served_model_name="reference-moe-nvfp4",
                max_model_len=REFERENCE_CONTEXT,
                gpu_memory_utilization=0.9,
                speculative=MtpSpeculation(num_speculative_tokens=1),
                reasoning_parser="qwen3",
                tool_call_parser="qwen3_coder",
            ),
        )

    def _add_monitoring_and_scaling(self, settings: HyperPodSettings) -> None:
        """Metrics, alerts and dashboard; KEDA scaling when ``max_replicas`` allows more."""
        self.observability = VllmObservability(self, "Observability", service=self.service)
        self.dashboard = VllmDashboard(self, "Dashboard", observability=self.observability)
        if settings.max_replicas > settings.replicas:
            self.auto_scaling = VllmReplicaAutoScaling(
                self,
                "ReplicaAutoscaling",
                service=self.service,
                observability=self.observability,
                min_replicas=0 if settings.scale_to_zero else settings.replicas,
                max_replicas=settings.max_replicas,
                scale_to_zero=ScaleToZero(wake=WakeOnConnect()) if settings.scale_to_zero else None,
            )
            self.dashboard.add_scaling_panels(self.auto_scaling)

    def _add_single_node_endpoint(self, settings: HyperPodSettings) -> None:
        """gpt-oss-120b on one H200 node, else one H100 node, registered as a SageMaker endpoint."""
        self.single_node = HyperPodInferenceEndpoint(
            self,
            "GptOss120b",
            addons=self.addons,
            model=SINGLE_NODE_MODEL,
            weight_format="mxfp4",
            weights=ModelData.from_s3_uri(settings.single_node_weights_uri),
            config=VllmConfig(
                model="set-by-the-endpoint",
                served_model_name=SINGLE_NODE_MODEL,
                max_model_len=131072,
                # vllm-project/vllm: vllm/reasoning/gptoss_reasoning_parser.py registers
                # "openai_gptoss"; the tool parser "openai" is openai_tool_parser.py.
                reasoning_parser="openai_gptoss",
                tool_call_parser="openai",
            ),
            instance_types=SINGLE_NODE_TYPES,
            auto_scaling=InferenceAutoScaling(min_replicas=1, max_replicas=2),
            # The operator's tiered KV cache (L1 CPU offload, L2 on the cluster's managed
            # tiered storage, which this turns on: 5 % of each node's memory) and its
            # prefix-aware router. No pdSpec: gpt-oss-120b is a MoE model, outside AWS's
            # guidance for disaggregated prefill/decode (dense 70B+), and each type has one node.
            kv_cache=InferenceKvCache(),
            routing=InferenceRouting(RoutingStrategy.PREFIX_AWARE),
        )
        CfnOutput(self, "GptOss120bEndpointName", value=self.single_node.endpoint_name)

    def _add_long_context_endpoint(self, settings: HyperPodSettings) -> None:
        """Llama 3.3 70B for long documents, prefill and decode on a node each.

        Nothing here asks for P/D: the endpoint declares its workload and the planner's rule
        (``plan(...).disaggregation``, AWS's "When DPD helps") turns ``pdSpec`` on, one prefill
        and one decode pod on ``gpu-pd``; a workload with short prompts would serve colocated
        on the same group. The worker is AWS's DPD image (LMCache and NIXL move the KV cache
        over EFA), with the tiered KV cache and the operator's KV-aware router in front.
        """
        self.long_context = HyperPodInferenceEndpoint(
            self,
            "Llama33",
            addons=self.addons,
            model=LONG_CONTEXT_MODEL,
            weight_format="bf16",
            weights=ModelData.from_s3_uri(settings.long_context_weights_uri),
            config=VllmConfig(
                model="set-by-the-endpoint",
                served_model_name=LONG_CONTEXT_MODEL,
                max_model_len=32768,
            ),
            instance_types=(LONG_CONTEXT_TYPE,),
            # Kubernetes and SageMaker names take no dots.
            name="llama-33-70b",
            image=DPD_WORKER_IMAGE,
            workload=LONG_CONTEXT_WORKLOAD,
            kv_cache=InferenceKvCache(),
            # Prefill already went to the prefill pod; among decoders, the one holding most of
            # the prompt's KV blocks (the CRD's kvaware).
            routing=InferenceRouting(RoutingStrategy.KV_AWARE),
        )
        CfnOutput(self, "Llama33EndpointName", value=self.long_context.endpoint_name)

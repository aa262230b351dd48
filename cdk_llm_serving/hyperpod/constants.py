"""The string contracts of the HyperPod path, each named once.

Labels, taints, ports, metric and rule names and images that one construct writes and
another (or an outside system: Kubernetes, HyperPod, vLLM, Prometheus, KEDA) reads. A
change here is a change of contract: the comment on each says who else depends on it.
"""

from __future__ import annotations

import re
from typing import Final

from ..vllm.multinode import API_PORT

# -- images ------------------------------------------------------------------------------

#: vLLM's OpenAI-compatible server image (Docker Hub vllm/vllm-openai), the tested default.
DEFAULT_VLLM_IMAGE: Final = "vllm/vllm-openai:v0.33.0"

# -- ports and paths ---------------------------------------------------------------------

#: vLLM's API and /metrics port; one value with the multi-node launcher (vllm.multinode).
VLLM_API_PORT: Final = API_PORT
#: vLLM's readiness endpoint (vLLM docs, "OpenAI-compatible server": GET /health).
VLLM_HEALTH_PATH: Final = "/health"
#: vLLM's Prometheus endpoint (vLLM docs, "Production metrics").
VLLM_METRICS_PATH: Final = "/metrics"

# -- Kubernetes labels -------------------------------------------------------------------

#: Well-known node label the kubelet sets (kubernetes.io/docs/reference/labels-annotations-taints).
INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"
#: Our node label naming the HyperPod instance group (set by HyperPodEksCluster).
GROUP_LABEL: Final = "cdk-llm-serving/group"
#: Our role label: ``system``/``gpu`` on nodes (instance groups), ``leader``/``worker`` on
#: serving pods; the scraper and the Service select leaders by it.
ROLE_LABEL: Final = "cdk-llm-serving/role"
#: Value of ``ROLE_LABEL`` on nodes of GPU groups (GroupRole "gpu").
GPU_NODE_ROLE: Final = "gpu"
#: Value of ``ROLE_LABEL`` on nodes of system groups (GroupRole "system").
SYSTEM_NODE_ROLE: Final = "system"
#: Value of ``ROLE_LABEL`` on the pod that serves the API (the LeaderWorkerSet leader).
LEADER_POD_ROLE: Final = "leader"
#: Value of ``ROLE_LABEL`` on the other pods of a replica.
WORKER_POD_ROLE: Final = "worker"
#: Recommended app label (kubernetes.io/docs/concepts/overview/working-with-objects/common-labels).
APP_NAME_LABEL: Final = "app.kubernetes.io/name"
#: Recommended label naming the higher-level application.
PART_OF_LABEL: Final = "app.kubernetes.io/part-of"
#: Value of ``PART_OF_LABEL`` on everything we deploy.
PART_OF_VALUE: Final = "cdk-llm-serving"
#: Node label HyperPod's health-monitoring agent maintains (SageMaker HyperPod EKS docs,
#: "resiliency: node health status labels"); serving pods require ``Schedulable``.
NODE_HEALTH_LABEL: Final = "sagemaker.amazonaws.com/node-health-status"
#: The ``NODE_HEALTH_LABEL`` value of a node that passed its health checks.
NODE_HEALTHY: Final = "Schedulable"

# -- taints and extended resources -------------------------------------------------------

#: Taint on GPU groups by default (NVIDIA's convention, github.com/NVIDIA/k8s-device-plugin),
#: so only pods that tolerate it (serving pods, device plugins) land there.
GPU_TAINT_KEY: Final = "nvidia.com/gpu"
#: Value of the default GPU taint.
GPU_TAINT_VALUE: Final = "present"
#: Extended resource the NVIDIA device plugin advertises (github.com/NVIDIA/k8s-device-plugin).
GPU_RESOURCE: Final = "nvidia.com/gpu"
#: Extended resource the EFA device plugin advertises (github.com/aws/eks-charts, aws-efa-k8s-device-plugin).
EFA_RESOURCE: Final = "vpc.amazonaws.com/efa"

# -- LeaderWorkerSet ---------------------------------------------------------------------

#: API group/version of the LeaderWorkerSet CRD (github.com/kubernetes-sigs/lws, chart >= 0.6).
LWS_API_VERSION: Final = "leaderworkerset.x-k8s.io/v1"

# -- vLLM metrics (vLLM docs, "Production metrics"; names as of vLLM 0.1x) ----------------

VLLM_TTFT_HISTOGRAM: Final = "vllm:time_to_first_token_seconds"
VLLM_INTER_TOKEN_HISTOGRAM: Final = "vllm:inter_token_latency_seconds"
VLLM_E2E_HISTOGRAM: Final = "vllm:e2e_request_latency_seconds"
VLLM_REQUESTS_WAITING: Final = "vllm:num_requests_waiting"
VLLM_REQUESTS_RUNNING: Final = "vllm:num_requests_running"
VLLM_KV_CACHE_USAGE: Final = "vllm:kv_cache_usage_perc"
VLLM_GENERATION_TOKENS: Final = "vllm:generation_tokens_total"
VLLM_PROMPT_TOKENS: Final = "vllm:prompt_tokens_total"
VLLM_SPEC_ACCEPTED_TOKENS: Final = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_SPEC_DRAFT_TOKENS: Final = "vllm:spec_decode_num_draft_tokens_total"

# -- our Prometheus recording rules (written by VllmObservability, read by the dashboard
# -- and by KEDA): renaming one breaks its readers ---------------------------------------

TTFT_P99_RULE: Final = "vllm:ttft_seconds:p99"
INTER_TOKEN_P99_RULE: Final = "vllm:inter_token_latency_seconds:p99"
E2E_P99_RULE: Final = "vllm:e2e_request_latency_seconds:p99"
#: Queue depth over all pods of the service: the alert's and KEDA's scaling metric.
QUEUE_DEPTH_RULE: Final = "vllm:requests_waiting"
REQUESTS_RUNNING_RULE: Final = "vllm:requests_running"
KV_CACHE_USAGE_RULE: Final = "vllm:kv_cache_usage"
GENERATION_TOKENS_RATE_RULE: Final = "vllm:generation_tokens_per_second"
PROMPT_TOKENS_RATE_RULE: Final = "vllm:prompt_tokens_per_second"
SPEC_ACCEPTANCE_RULE: Final = "vllm:spec_decode_acceptance_rate"

# -- Helm charts (keys of ``charts`` in assets/hyperpod.json; chart_versions takes these) --

NVIDIA_DEVICE_PLUGIN_CHART: Final = "nvidia-device-plugin"
EFA_DEVICE_PLUGIN_CHART: Final = "aws-efa-k8s-device-plugin"
LWS_CHART: Final = "lws"
KEDA_CHART: Final = "keda"
#: Our name for the user-supplied HyperPod dependencies chart (github.com/aws/sagemaker-hyperpod-cli).
HYPERPOD_DEPENDENCIES_CHART: Final = "hyperpod-dependencies"

# -- KEDA --------------------------------------------------------------------------------

#: Namespace the KEDA chart installs into (HyperPodServingAddons; kedacore/charts default).
KEDA_NAMESPACE: Final = "keda"
#: Service account of KEDA's operator (kedacore/charts default); its Pod Identity queries AMP.
KEDA_OPERATOR_ACCOUNT: Final = "keda-operator"
#: KEDA's CRD group/version (keda.sh docs, ScaledObject and TriggerAuthentication).
KEDA_API_VERSION: Final = "keda.sh/v1alpha1"

# -- AMP managed scraper -----------------------------------------------------------------

#: Kubernetes user the scraper's role maps to (AMP user guide, "Configuring your EKS cluster").
COLLECTOR_USER: Final = "aps-collector-user"
#: ClusterRole granting it discovery and /metrics reads (same guide).
COLLECTOR_CLUSTER_ROLE: Final = "aps-collector-role"
#: Its ClusterRoleBinding (same guide).
COLLECTOR_ROLE_BINDING: Final = "aps-collector-user-role-binding"

# -- EKS add-ons (names as EKS publishes them: ``aws eks describe-addon-versions``) --------

#: EKS Pod Identity agent: Pod Identity associations need it running.
POD_IDENTITY_AGENT_ADDON: Final = "eks-pod-identity-agent"
#: FSx for Lustre CSI driver: the model store's PersistentVolume needs it.
FSX_CSI_DRIVER_ADDON: Final = "aws-fsx-csi-driver"

# -- IAM ---------------------------------------------------------------------------------

#: Principal of EKS Pod Identity roles (EKS user guide, "Pod Identity").
POD_IDENTITY_PRINCIPAL: Final = "pods.eks.amazonaws.com"


def prometheus_pod_label(label: str) -> str:
    """Prometheus' Kubernetes discovery name of a pod label (non-alphanumerics become ``_``)."""
    return "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)

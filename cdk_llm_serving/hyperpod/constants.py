"""The string contracts of the HyperPod path, each named once.

Labels, taints, ports, metric and rule names and images that one construct writes and
another (or an outside system: Kubernetes, HyperPod, vLLM, Prometheus, KEDA) reads. A
change here is a change of contract: the comment on each says who else depends on it.
"""

from __future__ import annotations

import re
from typing import Final

from ..vllm.multinode import API_PORT

# -- ports and paths ---------------------------------------------------------------------

#: vLLM's API and /metrics port; one value with the multi-node launcher (vllm.multinode).
VLLM_API_PORT: Final = API_PORT
#: vLLM's readiness endpoint, GET /health
#: (https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html).
VLLM_HEALTH_PATH: Final = "/health"
#: vLLM's Prometheus endpoint (https://docs.vllm.ai/en/latest/usage/metrics.html).
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
#: Node label HyperPod's health-monitoring agent maintains; serving pods require ``Schedulable``
#: (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html).
NODE_HEALTH_LABEL: Final = "sagemaker.amazonaws.com/node-health-status"
#: The ``NODE_HEALTH_LABEL`` value of a node that passed its health checks.
NODE_HEALTHY: Final = "Schedulable"

# -- taints and extended resources -------------------------------------------------------

#: Taint on GPU groups by default, so only pods that tolerate it (serving pods, device plugins)
#: land there: the key NVIDIA/k8s-device-plugin's chart tolerates
#: (deployments/helm/nvidia-device-plugin/values.yaml, ``tolerations``).
GPU_TAINT_KEY: Final = "nvidia.com/gpu"
#: Value of the default GPU taint.
GPU_TAINT_VALUE: Final = "present"
#: Taint HyperPod puts on a node while its deep health checks run; every device plugin must
#: tolerate it (aws/sagemaker-hyperpod-cli ``helm_chart/readme.md``, "Tolerations").
NODE_HEALTH_TAINT_KEY: Final = NODE_HEALTH_LABEL
#: Value of ``NODE_HEALTH_TAINT_KEY`` while deep health checks run.
NODE_HEALTH_TAINT_VALUE: Final = "Unschedulable"
#: Key the NVIDIA chart tolerates by default (NVIDIA/k8s-device-plugin
#: deployments/helm/nvidia-device-plugin/values.yaml ``tolerations``) and the EFA chart always
#: adds (aws/eks-charts stable/aws-efa-k8s-device-plugin/templates/daemonset.yaml).
CRITICAL_ADDONS_ONLY_KEY: Final = "CriticalAddonsOnly"
#: Taint key of EFA nodes that AWS's charts tolerate (aws/sagemaker-hyperpod-cli
#: helm_chart/HyperPodHelmChart/values.yaml ``aws-efa-k8s-device-plugin.tolerations``).
EFA_TAINT_KEY: Final = "aws.amazon.com/efa"
#: Extended resource the NVIDIA device plugin advertises (NVIDIA/k8s-device-plugin README.md).
GPU_RESOURCE: Final = "nvidia.com/gpu"
#: Extended resource the EFA device plugin advertises
#: (https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html).
EFA_RESOURCE: Final = "vpc.amazonaws.com/efa"

# -- LeaderWorkerSet ---------------------------------------------------------------------

#: API group/version of the LeaderWorkerSet CRD (kubernetes-sigs/lws
#: config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml; tests check the copy in
#: shared/schemas).
LWS_API_VERSION: Final = "leaderworkerset.x-k8s.io/v1"

# -- vLLM metrics (https://docs.vllm.ai/en/latest/usage/metrics.html; defined in
# -- vllm-project/vllm vllm/v1/metrics/loggers.py, PrometheusStatLogger) ------------------

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
#: Our name for the user-supplied HyperPod dependencies chart, the key of
#: ``HyperPodServingAddons.charts`` and its Helm release name (as AWS's reference templates
#: install it, aws-samples/awsome-distributed-training).
HYPERPOD_DEPENDENCIES_CHART: Final = "hyperpod-dependencies"
#: ``name`` in that chart's Chart.yaml (helm_chart/HyperPodHelmChart/Chart.yaml).
HYPERPOD_CHART_NAME: Final = "hyperpod-helm-chart"
#: Helm release names (and ``fullnameOverride``) of the device-plugin charts: aws-cdk-lib's
#: derived 53-character name gives the NVIDIA chart's two DaemonSets one name (``trunc 63``).
NVIDIA_DEVICE_PLUGIN_RELEASE: Final = "nvidia-device-plugin"
EFA_DEVICE_PLUGIN_RELEASE: Final = "aws-efa-k8s-device-plugin"

# -- KEDA --------------------------------------------------------------------------------

#: Namespace HyperPodServingAddons installs the KEDA chart into (the ``namespace`` of its pin in
#: assets/hyperpod.json; kedacore/charts installs into the release namespace).
KEDA_NAMESPACE: Final = "keda"
#: Service account of KEDA's operator (kedacore/charts keda/values.yaml,
#: ``serviceAccount.operator.name``; tests read the pinned chart); its Pod Identity queries AMP.
KEDA_OPERATOR_ACCOUNT: Final = "keda-operator"
#: The operator's ``app`` pod label (kedacore/charts keda/values.yaml ``operator.name``,
#: ``templates/manager/deployment.yaml``); the scraper finds its metrics port by it.
KEDA_OPERATOR_NAME: Final = "keda-operator"
#: KEDA's CRD group/version (https://keda.sh/docs/2.17/reference/scaledobject-spec/; tests
#: validate against the CRDs of the pinned chart).
KEDA_API_VERSION: Final = "keda.sh/v1alpha1"

# -- AMP managed scraper -----------------------------------------------------------------

#: Kubernetes user the scraper's role maps to (AMP user guide, "Configuring your Amazon EKS
#: cluster", https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html).
COLLECTOR_USER: Final = "aps-collector-user"
#: ClusterRole granting it discovery and /metrics reads (same guide).
COLLECTOR_CLUSTER_ROLE: Final = "aps-collector-role"
#: Its ClusterRoleBinding (same guide).
COLLECTOR_ROLE_BINDING: Final = "aps-collector-user-role-binding"

# -- EKS add-ons (names as EKS publishes them, ``aws eks describe-addon-versions``;
# -- https://docs.aws.amazon.com/eks/latest/userguide/workloads-add-ons-available-eks.html) --

#: EKS Pod Identity agent: Pod Identity associations need it running
#: (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html).
POD_IDENTITY_AGENT_ADDON: Final = "eks-pod-identity-agent"
#: FSx for Lustre CSI driver: the model store's PersistentVolume needs it.
FSX_CSI_DRIVER_ADDON: Final = "aws-fsx-csi-driver"


def prometheus_pod_label(label: str) -> str:
    """Prometheus' Kubernetes discovery name of a pod label (non-alphanumerics become ``_``)."""
    return "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)


def prometheus_node_label(label: str) -> str:
    """Prometheus' Kubernetes discovery name of a node label (``role: node``; the same rule,
    https://prometheus.io/docs/prometheus/latest/configuration/configuration/#node)."""
    return "__meta_kubernetes_node_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)


#: The subnet tag the AWS Load Balancer Controller discovers internal load balancers' subnets
#: by (value ``1``; https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/subnet_discovery/).
INTERNAL_ELB_SUBNET_TAG: Final = "kubernetes.io/role/internal-elb"

"""Serving path 2: SageMaker HyperPod on EKS, for models that need several nodes.

``HyperPodEksCluster`` (VPC, private EKS, lifecycle script, HyperPod instance groups),
``HyperPodServingAddons`` (device plugins, LeaderWorkerSet, load balancer controller, and
once per cluster KEDA and the metrics scraper's cluster role),
``FsxModelStore`` (weights on FSx for Lustre), ``VllmMultiNodeService`` (multi-node vLLM),
``VllmObservability``, ``VllmDashboard`` and ``VllmReplicaAutoscaling``; for models that fit
one node, ``HyperPodInferenceEndpoint`` through AWS's inference operator
(``HyperPodInferenceOperator``, installed once per cluster). The serving
constructs take ``IHyperPodCluster``: a ``HyperPodEksCluster`` or
``HyperPodEksCluster.from_cluster_attributes(...)`` for a cluster created elsewhere. String
contracts (labels, taints, ports, metric and rule names, images) live in ``constants``.
"""

from .addons import HelmChartSource, HyperPodServingAddons, KedaInstallation
from .cluster import HyperPodEksCluster
from .dashboard import VllmDashboard
from .inference_dashboard import InferenceEndpointDashboard
from .inference_endpoint import HyperPodInferenceEndpoint, InferenceAutoScaling
from .inference_operator import HyperPodInferenceOperator
from .instance_group import HyperPodInstanceGroup, KubernetesTaint
from .interfaces import IHyperPodCluster
from .model_store import FsxModelStore
from .multi_node_service import Exposure, VllmMultiNodeService
from .observability import VllmObservability
from .replica_autoscaling import VllmReplicaAutoscaling

__all__ = [
    "Exposure",
    "FsxModelStore",
    "HelmChartSource",
    "HyperPodEksCluster",
    "HyperPodInferenceEndpoint",
    "HyperPodInferenceOperator",
    "HyperPodInstanceGroup",
    "HyperPodServingAddons",
    "IHyperPodCluster",
    "InferenceAutoScaling",
    "InferenceEndpointDashboard",
    "KedaInstallation",
    "KubernetesTaint",
    "VllmDashboard",
    "VllmMultiNodeService",
    "VllmObservability",
    "VllmReplicaAutoscaling",
]

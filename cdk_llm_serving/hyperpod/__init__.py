"""Serving path 2: SageMaker HyperPod on EKS, for models that need several nodes.

``HyperPodEksCluster`` (VPC, private EKS, lifecycle script, HyperPod instance groups),
``HyperPodServingAddons`` (device plugins, LeaderWorkerSet, load balancer controller, KEDA),
``FsxModelStore`` (weights on FSx for Lustre), ``VllmMultiNodeService`` (multi-node vLLM),
``VllmObservability``, ``VllmDashboard`` and ``VllmReplicaAutoscaling``.
"""

from .addons import HelmChartSource, HyperPodServingAddons
from .cluster import HyperPodEksCluster
from .dashboard import VllmDashboard
from .instance_group import HyperPodInstanceGroup, KubernetesTaint
from .model_store import FsxModelStore
from .multi_node_service import Exposure, VllmMultiNodeService
from .observability import VllmObservability
from .replica_autoscaling import VllmReplicaAutoscaling

__all__ = [
    "Exposure",
    "FsxModelStore",
    "HelmChartSource",
    "HyperPodEksCluster",
    "HyperPodInstanceGroup",
    "HyperPodServingAddons",
    "KubernetesTaint",
    "VllmDashboard",
    "VllmMultiNodeService",
    "VllmObservability",
    "VllmReplicaAutoscaling",
]

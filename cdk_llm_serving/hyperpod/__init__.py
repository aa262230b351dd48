"""Serving path 2: SageMaker HyperPod on EKS, for models that need several nodes.

``HyperPodEksCluster`` (or ``HyperPodEksCluster.from_cluster_attributes``), its serving add-ons,
``FsxModelStore``, ``VllmMultiNodeService`` with its observability and autoscaling; for models
that fit one node, ``HyperPodInferenceEndpoint`` through AWS's inference operator. String
contracts live in ``constants``. The kubectl/helm layers come with the ``hyperpod`` extra
(``pip install 'cdk-llm-serving[hyperpod]'``); without it, importing this package says so."""

from . import _needs_extra  # noqa: F401  (first: without the extra, say which to install)
from .addons import HelmChartSource, HyperPodServingAddons, KedaInstallation
from .capacity import GpuNodeLedger
from .cluster import HyperPodEksCluster
from .dashboard import VllmDashboard
from .inference_dashboard import InferenceEndpointAlarms, InferenceEndpointDashboard
from .inference_endpoint import HyperPodInferenceEndpoint, InferenceAutoScaling
from .inference_features import (
    InferenceKvCache,
    InferencePrefillDecode,
    InferenceRouting,
    KvCacheL2Backend,
    RoutingStrategy,
)
from .inference_operator import HyperPodInferenceOperator
from .instance_group import HyperPodInstanceGroup, KubernetesTaint
from .interfaces import IHyperPodCluster
from .kubernetes_version import KubernetesVersion
from .model_store import FsxModelStore
from .multi_node_manifests import MultiNodeWorkload
from .multi_node_placement import MultiNodePlacement
from .multi_node_service import Exposure, VllmMultiNodeService
from .node_autoscaling import NodeAutoScaling
from .node_readiness import HyperPodNodesReady
from .observability import VllmObservability
from .prefix_routing import PrefixRouting, RouterPolicy
from .replica_autoscaling import (
    ScaleToZero,
    VllmReplicaAutoScaling,
    WakeOnConnect,
    WakeSchedule,
    WakeTime,
)
from .serving_image import ServingImage
from .tiered_storage import TieredStorage

__all__ = [
    "Exposure",
    "FsxModelStore",
    "GpuNodeLedger",
    "HelmChartSource",
    "HyperPodEksCluster",
    "HyperPodInferenceEndpoint",
    "HyperPodInferenceOperator",
    "HyperPodInstanceGroup",
    "HyperPodNodesReady",
    "HyperPodServingAddons",
    "IHyperPodCluster",
    "InferenceAutoScaling",
    "InferenceEndpointAlarms",
    "InferenceEndpointDashboard",
    "InferenceKvCache",
    "InferencePrefillDecode",
    "InferenceRouting",
    "KedaInstallation",
    "KubernetesTaint",
    "KubernetesVersion",
    "KvCacheL2Backend",
    "MultiNodePlacement",
    "MultiNodeWorkload",
    "NodeAutoScaling",
    "PrefixRouting",
    "RouterPolicy",
    "RoutingStrategy",
    "ScaleToZero",
    "ServingImage",
    "TieredStorage",
    "VllmDashboard",
    "VllmMultiNodeService",
    "VllmObservability",
    "VllmReplicaAutoScaling",
    "WakeOnConnect",
    "WakeSchedule",
    "WakeTime",
]

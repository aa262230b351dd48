"""Reusable CDK constructs, one per module."""

from .async_inference import AsyncInference
from .endpoint_autoscaling import EndpointAutoScaling
from .endpoint_deployment import BlueGreenDeployment, CapacitySize, EndpointDeployment, RollingDeployment, TrafficShift
from .fsx_model_store import FsxModelStore
from .hyperpod_eks_cluster import HyperPodEksCluster
from .hyperpod_instance_group import HyperPodInstanceGroup, KubernetesTaint
from .hyperpod_serving_addons import HelmChartSource, HyperPodServingAddons
from .inference_component_on_pools import ComponentSpecification, InferenceComponentOnPools
from .instance_pool import InstancePool
from .instance_pool_endpoint import InstancePoolEndpoint
from .model_sources import ContainerImage, ModelData
from .pool_endpoint_alarms import PoolEndpointAlarms
from .pool_endpoint_dashboard import PoolEndpointDashboard
from .serving_model import VLLM_SERVED_MODEL_NAME_VARIABLE, ServingModel
from .vllm_dashboard import VllmDashboard
from .vllm_multi_node_service import Exposure, VllmMultiNodeService
from .vllm_observability import VllmObservability
from .vllm_pool_endpoint import VllmPool, VllmPoolEndpoint
from .vllm_replica_autoscaling import VllmReplicaAutoscaling

__all__ = sorted(name for name in dir() if name[:1].isupper())

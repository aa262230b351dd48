"""Reusable CDK constructs, one per module."""

from .async_inference import AsyncInference
from .endpoint_autoscaling import EndpointAutoScaling
from .endpoint_deployment import BlueGreenDeployment, CapacitySize, EndpointDeployment, RollingDeployment, TrafficShift
from .inference_component_on_pools import ComponentSpecification, InferenceComponentOnPools
from .instance_pool import InstancePool
from .instance_pool_endpoint import InstancePoolEndpoint
from .model_sources import ContainerImage, ModelData
from .pool_endpoint_alarms import PoolEndpointAlarms
from .pool_endpoint_dashboard import PoolEndpointDashboard
from .serving_model import VLLM_SERVED_MODEL_NAME_VARIABLE, ServingModel
from .vllm_pool_endpoint import VllmPool, VllmPoolEndpoint

__all__ = [
    "AsyncInference",
    "BlueGreenDeployment",
    "CapacitySize",
    "EndpointAutoScaling",
    "ContainerImage",
    "EndpointDeployment",
    "ComponentSpecification",
    "InferenceComponentOnPools",
    "InstancePool",
    "InstancePoolEndpoint",
    "ModelData",
    "PoolEndpointAlarms",
    "PoolEndpointDashboard",
    "RollingDeployment",
    "ServingModel",
    "TrafficShift",
    "VLLM_SERVED_MODEL_NAME_VARIABLE",
    "VllmPool",
    "VllmPoolEndpoint",
]

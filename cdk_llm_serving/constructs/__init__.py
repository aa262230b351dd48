"""Reusable CDK constructs, one per module."""

from .async_inference import AsyncInference
from .endpoint_deployment import BlueGreenDeployment, CapacitySize, EndpointDeployment, RollingDeployment, TrafficShift
from .instance_pool import InstancePool
from .instance_pool_endpoint import InstancePoolEndpoint
from .model_sources import ContainerImage, ModelData
from .serving_model import VLLM_SERVED_MODEL_NAME_VARIABLE, ServingModel

__all__ = [
    "AsyncInference",
    "BlueGreenDeployment",
    "CapacitySize",
    "ContainerImage",
    "EndpointDeployment",
    "InstancePool",
    "InstancePoolEndpoint",
    "ModelData",
    "RollingDeployment",
    "ServingModel",
    "TrafficShift",
    "VLLM_SERVED_MODEL_NAME_VARIABLE",
]

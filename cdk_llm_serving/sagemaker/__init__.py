"""Serving path 1: SageMaker real-time (or asynchronous) endpoints on instance pools.

A variant lists up to five instance types in priority order and SageMaker falls back down
the list when a type has no capacity; these constructs add per-pool models, weighted
autoscaling, alarms, dashboards, inference components and safe updates.
"""

from ..core.async_inference import AsyncInference
from ..core.endpoint_api import IPoolEndpoint
from ..core.endpoint_metrics import MetricOptions
from ..core.token_metrics import TokenMetricNames
from .alarms import PoolEndpointAlarms
from .autoscaling import AutoScalingOptions, EndpointAutoScaling
from .dashboard import PoolEndpointDashboard
from .deployment import (
    BlueGreenDeployment,
    CapacitySize,
    EndpointDeployment,
    RollingDeployment,
    TrafficShift,
)
from .endpoint_options import PoolEndpointProps
from .engine_batch import EngineBatch
from .inference_components import ComponentSpecification, InferenceComponentOnPools
from .instance_pool import InstancePool
from .pool_endpoint import InferenceComponentEndpoint, InstancePoolEndpoint
from .serving_model import VLLM_SERVED_MODEL_NAME_VARIABLE, ServingModel
from .staging_endpoints import EvalGate, StagingCopy, StagingEndpoints
from .update_rules import autoscaled_update_problems
from .vllm_pool_endpoint import VllmPool, VllmPoolEndpoint

__all__ = [
    "VLLM_SERVED_MODEL_NAME_VARIABLE",
    "AsyncInference",
    "AutoScalingOptions",
    "BlueGreenDeployment",
    "CapacitySize",
    "ComponentSpecification",
    "EndpointAutoScaling",
    "EndpointDeployment",
    "EngineBatch",
    "EvalGate",
    "InferenceComponentEndpoint",
    "InferenceComponentOnPools",
    "InstancePool",
    "InstancePoolEndpoint",
    "IPoolEndpoint",
    "MetricOptions",
    "PoolEndpointAlarms",
    "PoolEndpointDashboard",
    "PoolEndpointProps",
    "RollingDeployment",
    "ServingModel",
    "StagingCopy",
    "StagingEndpoints",
    "TokenMetricNames",
    "TrafficShift",
    "VllmPool",
    "VllmPoolEndpoint",
    "autoscaled_update_problems",
]

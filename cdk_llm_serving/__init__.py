"""cdk-llm-serving: AWS CDK constructs for production LLM serving on SageMaker and HyperPod.

Constructs load lazily (``from cdk_llm_serving import InstancePoolEndpoint``), so the
pure-Python planner and CLI start without loading the CDK's JavaScript runtime.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import ConfigurationError, Problem

__version__ = "0.1.0"

_CONSTRUCT_NAMES = (
    "AsyncInference",
    "BlueGreenDeployment",
    "CapacitySize",
    "ContainerImage",
    "EndpointAutoScaling",
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
)

__all__ = [*_CONSTRUCT_NAMES, "ConfigurationError", "Problem"]


def __getattr__(name: str) -> Any:
    if name in _CONSTRUCT_NAMES:
        return getattr(importlib.import_module(".constructs", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""cdk-llm-serving: AWS CDK constructs for production LLM serving on SageMaker and HyperPod.

Layout: ``sagemaker/`` (endpoints on instance pools) and ``hyperpod/`` (HyperPod on EKS)
hold the constructs, one package per serving path; ``planning/``, ``vllm/`` and ``ops/``
are plain Python (no CDK import); ``_cdk/`` is private plumbing. The construct packages
are not called ``constructs/`` because a package of that name would shadow the
``constructs`` library that aws-cdk-lib itself imports.

Names load lazily (``from cdk_llm_serving import InstancePoolEndpoint``), so the planner
and the command line start without the CDK's JavaScript runtime; type checkers see the
eager imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError, Problem

if TYPE_CHECKING:
    from .hyperpod import (
        Exposure,
        FsxModelStore,
        HelmChartSource,
        HyperPodEksCluster,
        HyperPodInstanceGroup,
        HyperPodServingAddons,
        KubernetesTaint,
        VllmDashboard,
        VllmMultiNodeService,
        VllmObservability,
        VllmReplicaAutoscaling,
    )
    from .model_sources import ContainerImage, ModelData
    from .planning import ModelSizing, default_catalog, plan
    from .sagemaker import (
        VLLM_SERVED_MODEL_NAME_VARIABLE,
        AsyncInference,
        BlueGreenDeployment,
        CapacitySize,
        ComponentSpecification,
        EndpointAutoScaling,
        EndpointDeployment,
        InferenceComponentOnPools,
        InstancePool,
        InstancePoolEndpoint,
        PoolEndpointAlarms,
        PoolEndpointDashboard,
        RollingDeployment,
        ServingModel,
        TrafficShift,
        VllmPool,
        VllmPoolEndpoint,
    )

__version__ = "0.1.0"

#: Public name -> the subpackage that defines it (imported on first access).
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        [
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
        ],
        ".hyperpod",
    ),
    **dict.fromkeys(["ContainerImage", "ModelData"], ".model_sources"),
    **dict.fromkeys(["ModelSizing", "default_catalog", "plan"], ".planning"),
    **dict.fromkeys(
        [
            "VLLM_SERVED_MODEL_NAME_VARIABLE",
            "AsyncInference",
            "BlueGreenDeployment",
            "CapacitySize",
            "ComponentSpecification",
            "EndpointAutoScaling",
            "EndpointDeployment",
            "InferenceComponentOnPools",
            "InstancePool",
            "InstancePoolEndpoint",
            "PoolEndpointAlarms",
            "PoolEndpointDashboard",
            "RollingDeployment",
            "ServingModel",
            "TrafficShift",
            "VllmPool",
            "VllmPoolEndpoint",
        ],
        ".sagemaker",
    ),
}

__all__ = [
    "AsyncInference",
    "BlueGreenDeployment",
    "CapacitySize",
    "ComponentSpecification",
    "ConfigurationError",
    "ContainerImage",
    "EndpointAutoScaling",
    "EndpointDeployment",
    "Exposure",
    "FsxModelStore",
    "HelmChartSource",
    "HyperPodEksCluster",
    "HyperPodInstanceGroup",
    "HyperPodServingAddons",
    "InferenceComponentOnPools",
    "InstancePool",
    "InstancePoolEndpoint",
    "KubernetesTaint",
    "ModelData",
    "ModelSizing",
    "PoolEndpointAlarms",
    "PoolEndpointDashboard",
    "Problem",
    "RollingDeployment",
    "ServingModel",
    "TrafficShift",
    "VLLM_SERVED_MODEL_NAME_VARIABLE",
    "VllmDashboard",
    "VllmMultiNodeService",
    "VllmObservability",
    "VllmPool",
    "VllmPoolEndpoint",
    "VllmReplicaAutoscaling",
    "default_catalog",
    "plan",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

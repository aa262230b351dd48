"""vLLM server configuration shared by the SageMaker and HyperPod paths (pure Python):
``VllmConfig``, its checks against the hardware and the per-pool derivation."""

from .config import (
    REMOVED_FLAGS,
    Eagle3Speculation,
    MtpSpeculation,
    NgramSpeculation,
    Speculation,
    VllmConfig,
    VllmConfigError,
    sagemaker_variable,
)
from .hardware import HardwareCheck, check_on_hardware
from .pool_strategy import Goal, PoolVllmPlan, derive_pool_config

__all__ = [
    "REMOVED_FLAGS",
    "Eagle3Speculation",
    "Goal",
    "HardwareCheck",
    "MtpSpeculation",
    "NgramSpeculation",
    "PoolVllmPlan",
    "Speculation",
    "VllmConfig",
    "VllmConfigError",
    "check_on_hardware",
    "derive_pool_config",
    "sagemaker_variable",
]

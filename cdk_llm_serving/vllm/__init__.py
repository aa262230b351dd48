"""vLLM server configuration shared by the SageMaker and HyperPod paths (pure Python).

What a user needs: ``VllmConfig`` (one typed server configuration, rendered as ``vllm serve``
arguments or SageMaker ``SM_VLLM_*`` variables), its speculative-decoding types, the
``VllmConfigError`` it raises (a ``ConfigurationError``), the checks against hardware
(``check_on_hardware``) and the per-pool derivation (``derive_pool_config``, with the library's
one ``Goal``).
"""

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

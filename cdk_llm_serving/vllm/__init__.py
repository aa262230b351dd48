"""vLLM server configuration shared by the SageMaker and HyperPod paths (pure Python)."""

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

__all__ = [
    "REMOVED_FLAGS",
    "Eagle3Speculation",
    "MtpSpeculation",
    "NgramSpeculation",
    "Speculation",
    "VllmConfig",
    "VllmConfigError",
    "sagemaker_variable",
]

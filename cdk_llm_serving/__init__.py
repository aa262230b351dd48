"""cdk-llm-serving: AWS CDK constructs for production LLM serving on SageMaker and HyperPod.

Construct names load lazily, so the planner and the command line start without the CDK's
JavaScript runtime; type checkers see them under ``TYPE_CHECKING``. Importing the package
changes nothing global: an app opts in to the error display (``install_error_display``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ``X as X``: explicit re-exports, so type checkers in strict mode see them too.
from ._extras import MissingExtraError
from .error_display import install_error_display as install_error_display
from .errors import ConfigurationError as ConfigurationError
from .errors import Problem as Problem
from .planning import InstanceType as InstanceType
from .planning import ModelSizing as ModelSizing
from .planning import ModelSpec as ModelSpec
from .planning import PlanningError as PlanningError
from .planning import WeightFormat as WeightFormat
from .planning import default_catalog as default_catalog
from .planning import plan as plan
from .vllm import Eagle3Speculation as Eagle3Speculation
from .vllm import MtpSpeculation as MtpSpeculation
from .vllm import NgramSpeculation as NgramSpeculation
from .vllm import VllmConfig as VllmConfig
from .vllm import VllmConfigError as VllmConfigError

if TYPE_CHECKING:
    from .hyperpod import *  # noqa: F403
    from .model_sources import *  # noqa: F403
    from .sagemaker import *  # noqa: F403

__version__ = "0.1.0"

#: Modules whose ``__all__`` this package re-exports on first access; each imports aws_cdk.
#: ``.hyperpod`` comes last: it needs the ``hyperpod`` extra, and names found before it
#: must not depend on that.
_CONSTRUCT_MODULES = (".sagemaker", ".model_sources", ".hyperpod")
_EAGER = [
    "ConfigurationError",
    "InstanceType",
    "ModelSizing",
    "ModelSpec",
    "PlanningError",
    "Problem",
    "WeightFormat",
    "Eagle3Speculation",
    "MtpSpeculation",
    "NgramSpeculation",
    "VllmConfig",
    "VllmConfigError",
    "default_catalog",
    "install_error_display",
    "plan",
]


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return sorted(_EAGER + [n for m in _CONSTRUCT_MODULES for n in _exports(m)])
    for module in _CONSTRUCT_MODULES:
        found = _module(module)
        if name in found.__all__:
            value = getattr(found, name)
            globals()[name] = value
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__getattr__("__all__")))


def _module(name: str) -> Any:
    return importlib.import_module(name, __name__)


def _exports(name: str) -> list[str]:
    """``name``'s ``__all__``; none for a part whose extra is not installed."""
    try:
        return list(_module(name).__all__)
    except MissingExtraError:
        return []

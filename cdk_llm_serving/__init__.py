"""cdk-llm-serving: AWS CDK constructs for production LLM serving on SageMaker and HyperPod.

Constructs load lazily (``from cdk_llm_serving import InstancePoolEndpoint``; every name
in ``cdk_llm_serving.constructs.__all__``), so the pure-Python planner and the CLI start
without loading the CDK's JavaScript runtime.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import ConfigurationError, Problem

__version__ = "0.1.0"
__all__ = ["ConfigurationError", "Problem"]


def __getattr__(name: str) -> Any:
    if name[:1].isupper():
        constructs = importlib.import_module(".constructs", __name__)
        if name in constructs.__all__:
            return getattr(constructs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

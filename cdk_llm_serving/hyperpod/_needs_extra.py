"""Importing the HyperPod constructs without the ``hyperpod`` extra fails here, naming it."""

from __future__ import annotations

from .._extras import EXTRA_MODULES, require_extra

for _module in EXTRA_MODULES["hyperpod"]:
    require_extra("hyperpod", _module, "cdk_llm_serving.hyperpod")

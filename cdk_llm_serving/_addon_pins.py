"""The EKS add-on pins of ``hyperpod/assets/*.json``, read without the CDK (private).

The HyperPod constructs (through ``hyperpod/_facts.py``) and ``cdk-llm-serving addons check``
(``ops/addon_check.py``) read the pins here, so the command checks exactly what the
constructs install.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, cast

__all__ = [
    "every_addon_pin",
    "hyperpod_facts",
    "inference_operator_facts",
    "supported_kubernetes_versions",
]


def _asset(name: str) -> dict[str, Any]:
    # Through the top-level package: importing ``cdk_llm_serving.hyperpod`` would load aws_cdk.
    path = resources.files("cdk_llm_serving").joinpath("hyperpod", "assets", name)
    return cast(dict[str, Any], json.loads(path.read_text()))


@functools.cache
def hyperpod_facts() -> dict[str, Any]:
    """``hyperpod/assets/hyperpod.json``: Kubernetes versions, cluster add-on pins, charts."""
    return _asset("hyperpod.json")


@functools.cache
def inference_operator_facts() -> dict[str, Any]:
    """``hyperpod/assets/inference_operator.json``: the operator add-on and its dependencies."""
    return _asset("inference_operator.json")


def supported_kubernetes_versions() -> tuple[str, ...]:
    return tuple(hyperpod_facts()["kubernetes_versions"])


def every_addon_pin(kubernetes_version: str) -> dict[str, str]:
    """Add-on name -> pinned version, for every EKS add-on a construct may install on a
    cluster of ``kubernetes_version``: the cluster's (``HyperPodEksCluster``,
    ``VllmMultiNodeService``), the inference operator's dependencies (cert-manager also by
    ``HyperPodServingAddons``) and the operator add-on itself. Empty for an unknown version."""
    cluster = hyperpod_facts()["addon_versions"].get(kubernetes_version)
    if cluster is None:
        return {}
    operator = inference_operator_facts()
    return {
        **cluster,
        **operator["dependencies"],
        operator["addon"]["name"]: operator["addon"]["version"],
    }

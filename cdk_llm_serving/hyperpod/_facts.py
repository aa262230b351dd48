"""Facts and pins the HyperPod constructs read from ``assets/*.json`` (private; the add-on
pins through the CDK-free ``cdk_llm_serving._addon_pins``, which the CLI also reads)."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, TypedDict, cast

from .._addon_pins import hyperpod_facts, inference_operator_facts, supported_kubernetes_versions

__all__ = [
    "addon_versions",
    "chart_pins",
    "cloudformation_enum",
    "hyperpod_facts",
    "inference_operator_facts",
    "supported_kubernetes_versions",
    "vllm_image_facts",
]


class ChartPin(TypedDict):
    """Where a published Helm chart comes from and the version we tested."""

    repository: str
    chart: str
    version: str
    namespace: str


def chart_pins() -> dict[str, ChartPin]:
    """Chart name -> pin, for every published chart the add-ons may install."""
    return cast(dict[str, ChartPin], hyperpod_facts()["charts"])


def addon_versions(kubernetes_version: str) -> dict[str, str | None]:
    """EKS add-on name -> the version pinned for ``kubernetes_version`` (none: unknown version)."""
    pins = hyperpod_facts()["addon_versions"].get(kubernetes_version, {})
    return cast(dict[str, "str | None"], dict(pins))


def cloudformation_enum(shape: str, botocore_enum: tuple[str, ...]) -> tuple[str, ...]:
    """``botocore_enum`` narrowed to what CloudFormation's resource schema allows for ``shape``.

    Only shapes recorded in ``cloudformation_enums`` narrow; the others pass unchanged.
    """
    narrower = hyperpod_facts().get("cloudformation_enums", {}).get(shape)
    if narrower is None:
        return botocore_enum
    return tuple(value for value in botocore_enum if value in narrower)


@functools.cache
def vllm_image_facts() -> dict[str, Any]:
    """The default vLLM image (AWS's EC2/EKS vLLM container with EFA) and its sources."""
    text = resources.files(__package__).joinpath("assets", "vllm_image.json").read_text()
    return cast(dict[str, Any], json.loads(text))

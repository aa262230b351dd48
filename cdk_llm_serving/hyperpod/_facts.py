"""Facts and pins the HyperPod constructs read from ``assets/hyperpod.json`` (private)."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, TypedDict, cast


class ChartPin(TypedDict):
    """Where a published Helm chart comes from and the version we tested."""

    repository: str
    chart: str
    version: str
    namespace: str


@functools.cache
def hyperpod_facts() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("assets", "hyperpod.json").read_text()
    return cast(dict[str, Any], json.loads(text))


def supported_kubernetes_versions() -> tuple[str, ...]:
    return tuple(hyperpod_facts()["kubernetes_versions"])


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


@functools.cache
def inference_operator_facts() -> dict[str, Any]:
    """``assets/inference_operator.json``: add-on, dependencies, names, each with its source.

    Read here (not in ``inference_operator``) because ``HyperPodServingAddons`` pins the
    cert-manager add-on it shares with the multi-node service from the same file.
    """
    text = resources.files(__package__).joinpath("assets", "inference_operator.json").read_text()
    return cast(dict[str, Any], json.loads(text))

"""Facts and pins the HyperPod constructs read from ``assets/*.json`` (private; the add-on
pins through the CDK-free ``cdk_llm_serving._addon_pins``, which the CLI also reads)."""

from __future__ import annotations

import datetime
import functools
import json
from importlib import resources
from typing import TypedDict, cast

from .._addon_pins import ChartPin
from .._addon_pins import hyperpod_facts as hyperpod_facts
from .._addon_pins import inference_operator_facts as inference_operator_facts
from .._addon_pins import supported_kubernetes_versions as supported_kubernetes_versions


class VllmImageFacts(TypedDict):
    """``hyperpod/assets/vllm_image.json``: the default vLLM image (each ``*_source`` cites)."""

    description: str
    repository: str
    tag: str
    vllm_version: str
    efa: bool
    efa_installer_version: str
    source: str
    account_source: str
    #: ``FI_*`` variables that make NCCL's aws-ofi-nccl plugin use EFA.
    efa_environment: dict[str, str]
    efa_environment_source: str


def chart_pins() -> dict[str, ChartPin]:
    """Chart name -> pin, for every published chart the add-ons may install."""
    return hyperpod_facts()["charts"]


def addon_versions(kubernetes_version: str) -> dict[str, str | None]:
    """EKS add-on name -> the version pinned for ``kubernetes_version`` (none: unknown version)."""
    return dict(hyperpod_facts()["addon_versions"].get(kubernetes_version, {}))


def cloudformation_enum(shape: str, botocore_enum: tuple[str, ...]) -> tuple[str, ...]:
    """``botocore_enum`` narrowed to what CloudFormation's resource schema allows for ``shape``.

    Only shapes recorded in ``cloudformation_enums`` narrow; the others pass unchanged.
    """
    narrower = hyperpod_facts()["cloudformation_enums"].get(shape)
    if narrower is None:
        return botocore_enum
    return tuple(value for value in botocore_enum if value in narrower)


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def extended_support_warning(kubernetes_version: str) -> str | None:
    """Why ``kubernetes_version`` costs EKS extended support, or ``None`` when it does not.

    Judged against ``hyperpod.json``'s ``eks_support_checked_on`` date, never today's clock
    (deterministic synth): a version whose standard support ended on or before that date, or
    ends within ``eks_extended_support_notice_days`` after it. Sources: ``eks_support_source``.
    """
    facts = hyperpod_facts()
    end = facts["eks_standard_support_ends"].get(kubernetes_version)
    if end is None:
        return None
    checked = datetime.date.fromisoformat(facts["eks_support_checked_on"])
    days_left = (datetime.date.fromisoformat(end) - checked).days
    if days_left > facts["eks_extended_support_notice_days"]:
        return None
    when = f"ended on {end}" if days_left <= 0 else f"ends on {end}"
    newer = [v for v in supported_kubernetes_versions() if _minor(v) > _minor(kubernetes_version)]
    path = " -> ".join([kubernetes_version, *newer])
    upgrade = (
        f"set kubernetes_version one minor version higher per deploy ({path}); "
        "EKS upgrades one minor version at a time and cannot downgrade"
        if newer
        else "no newer version is supported by this library yet"
    )
    return (
        f"Kubernetes {kubernetes_version}: EKS standard support {when} (as of "
        f"{facts['eks_support_checked_on']}); after it EKS bills extended support, "
        f"{facts['eks_extended_support_price']}. To upgrade, {upgrade}. "
        "Source: https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html, "
        "https://aws.amazon.com/eks/pricing/."
    )


@functools.cache
def vllm_image_facts() -> VllmImageFacts:
    """The default vLLM image (AWS's EC2/EKS vLLM container with EFA) and its sources."""
    text = resources.files(__package__).joinpath("assets", "vllm_image.json").read_text()
    return cast(VllmImageFacts, json.loads(text))

"""The EKS add-on pins of ``hyperpod/assets/*.json``, read without the CDK: the HyperPod
constructs and ``cdk-llm-serving addons check`` read the same pins. The files' shapes are typed.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, Literal, TypedDict, cast

#: The two lists of cluster add-ons in ``hyperpod.json``: installed before the nodes join, after.
AddonPhase = Literal["addons_before_nodes", "addons_after_nodes"]


class ChartPin(TypedDict):
    """Where a published Helm chart comes from and the version we tested."""

    repository: str
    chart: str
    version: str
    namespace: str


class SecretsStoreAddonConfiguration(TypedDict):
    """What the Secrets Store provider add-on's configuration schema accepts (``source`` cites it)."""

    #: Top-level keys (the provider's chart values).
    keys: list[str]
    #: Keys under ``secrets-store-csi-driver`` (the driver's chart).
    driver_keys: list[str]
    #: The driver chart's default tolerations (the add-on cannot set them).
    driver_default_tolerations: list[dict[str, str]]
    source: str


class HyperPodFacts(TypedDict):
    """``hyperpod/assets/hyperpod.json``: the keys code reads (each ``*_source`` key of the file
    cites its facts)."""

    description: str
    #: Kubernetes versions HyperPod supports and we ship a kubectl layer for, oldest first.
    kubernetes_versions: list[str]
    #: The date the support facts were read (warnings are judged against it, not the clock).
    eks_support_checked_on: str
    #: Version -> ISO date EKS standard support ends.
    eks_standard_support_ends: dict[str, str]
    eks_extended_support_notice_days: int
    eks_extended_support_price: str
    eks_support_source: str
    addons_before_nodes: list[str]
    addons_after_nodes: list[str]
    #: Kubernetes version -> EKS add-on name -> pinned version.
    addon_versions: dict[str, dict[str, str]]
    #: Chart name -> pin.
    charts: dict[str, ChartPin]
    #: The EKS add-on ``aws-secrets-store-csi-driver-provider``'s configuration keys.
    secrets_store_addon_configuration: SecretsStoreAddonConfiguration
    #: Botocore shape -> the values CloudFormation's schema allows (narrower than botocore).
    cloudformation_enums: dict[str, list[str]]


class OperatorAddon(TypedDict):
    """The inference operator's EKS add-on."""

    name: str
    version: str
    source: str


class InferenceOperatorFacts(TypedDict):
    """``hyperpod/assets/inference_operator.json``: the keys code reads (``*_source`` keys cite)."""

    description: str
    addon: OperatorAddon
    #: Dependency add-on name -> pinned version.
    dependencies: dict[str, str]
    namespace: str
    operator_service_account: str
    s3_csi_service_account: str
    s3_csi_namespace: str
    execution_role_prefix: str
    execution_role_managed_policy: str
    api_version: str
    variant_name: str


def _asset(name: str) -> dict[str, Any]:
    # Through the top-level package: importing ``cdk_llm_serving.hyperpod`` would load aws_cdk.
    path = resources.files("cdk_llm_serving").joinpath("hyperpod", "assets", name)
    return cast(dict[str, Any], json.loads(path.read_text()))


@functools.cache
def hyperpod_facts() -> HyperPodFacts:
    """``hyperpod/assets/hyperpod.json``: Kubernetes versions, cluster add-on pins, charts."""
    return cast(HyperPodFacts, _asset("hyperpod.json"))


@functools.cache
def inference_operator_facts() -> InferenceOperatorFacts:
    """``hyperpod/assets/inference_operator.json``: the operator add-on and its dependencies."""
    return cast(InferenceOperatorFacts, _asset("inference_operator.json"))


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

"""Checks of HyperPod inputs that read the services' own rules: EKS add-on versions, the
multi-node service's start-up mode."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..errors import Problems, check_literal
from ..vllm.multinode import Startup


def check_service_options(problems: Problems, startup: object) -> None:
    """``VllmMultiNodeService``'s ``startup`` (from its ``Literal`` type)."""
    check_literal(problems, "startup", startup, Startup, "start-up modes")


#: The form of every EKS add-on version (``DescribeAddonVersions``: ``v1.22.4-eksbuild.3``); the
#: build suffix is part of the version: ``v1.22.4`` names none (EKS user guide,
#: https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html, its version table).
EKS_ADDON_VERSION = re.compile(r"v(\d+)\.(\d+)\.(\d+)-eksbuild\.\d+")


def check_addon_versions(
    problems: Problems, addons: Mapping[str, str | None] | None, kubernetes_version: object
) -> None:
    """Each given add-on version has EKS's form; kube-proxy's is for the cluster's Kubernetes
    minor version (EKS publishes one kube-proxy line per Kubernetes version, same page, and
    Kubernetes' skew policy forbids a kube-proxy newer than the API server:
    https://kubernetes.io/releases/version-skew-policy/#kube-proxy)."""
    for name, version in (addons or {}).items():
        if version is None:  # EKS's default version for the cluster
            continue
        match = EKS_ADDON_VERSION.fullmatch(str(version))
        if match is None:
            hint = (
                f"; with its build suffix, e.g. {version}-eksbuild.1"
                if re.fullmatch(r"v?\d+\.\d+\.\d+", str(version))
                else ""
            )
            problems.add(
                f"addon_versions.{name}",
                version,
                "an EKS add-on version is v<major>.<minor>.<patch>-eksbuild.<build> "
                f"(cdk-llm-serving addons check lists what EKS offers){hint}",
            )
            continue
        if name == "kube-proxy" and isinstance(kubernetes_version, str):
            minor = f"{match.group(1)}.{match.group(2)}"
            if minor != kubernetes_version:
                problems.add(
                    f"addon_versions.{name}",
                    version,
                    f"kube-proxy {minor} is for Kubernetes {minor}, not the cluster's "
                    f"{kubernetes_version}: give a v{kubernetes_version}.x-eksbuild.N version",
                )

"""``KubernetesVersion``: a Kubernetes version of ``HyperPodEksCluster``, checked once.

Like aws-eks-v2's ``KubernetesVersion.V1_33``, a version owns what follows from it: its
kubectl/helm Lambda layer (PyPI ``aws-cdk.lambda-layer-kubectl-v3x``), its EKS add-on pins
(``assets/hyperpod.json``) and the end of its EKS standard support. It is a ``str``
(``"1.35"``), so ``cluster.kubernetes_version == "1.35"`` holds whichever a user passed."""

from __future__ import annotations

import datetime
import difflib
import importlib
from typing import ClassVar

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .._addon_pins import every_addon_pin
from ..errors import CheckedName, Problems
from . import _facts

__all__ = ["KubernetesVersion"]


def _minor(version: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return None


def _closest(value: str, supported: tuple[str, ...]) -> list[str]:
    """The nearest supported minor version(s) to ``value``; by spelling when it is no version."""
    wanted = _minor(value)
    if wanted is None or len(wanted) != 2:
        return difflib.get_close_matches(value, supported, n=2, cutoff=0.5)
    distance = {v: abs((_minor(v) or (0, 0))[1] - wanted[1]) for v in supported}
    nearest = min(distance.values())
    return [v for v in supported if distance[v] == nearest]


def _check(problems: Problems, prop: str, value: object) -> bool:
    supported = _facts.supported_kubernetes_versions()
    if isinstance(value, str) and value in supported:
        return True
    if not isinstance(value, str):
        problems.add(
            prop,
            value,
            f"must be a KubernetesVersion or a version string such as {supported[-1]!r}",
        )
        return False
    close = _closest(value, supported)
    hint = f"; closest: {', '.join(close)}" if close else ""
    problems.add(
        prop,
        value,
        f"must be one HyperPod supports and we ship a kubectl layer for: {', '.join(supported)}{hint}",
    )
    return False


class KubernetesVersion(CheckedName):
    """A Kubernetes version HyperPod supports and this library ships a kubectl layer for.

    ``KubernetesVersion.V1_35``, ``KubernetesVersion.of("1.35")``; an unsupported version
    raises ``ConfigurationError`` naming the closest supported one, and ``parse`` adds that
    problem to a construct's ``Problems`` instead.
    """

    V1_33: ClassVar[KubernetesVersion]
    V1_34: ClassVar[KubernetesVersion]
    V1_35: ClassVar[KubernetesVersion]

    _PROP: ClassVar[str] = "kubernetes_version"

    @classmethod
    def _check(cls, problems: Problems, prop: str, value: object) -> bool:
        return _check(problems, prop, value)

    @classmethod
    def supported(cls) -> tuple[KubernetesVersion, ...]:
        """Every version this library supports, oldest first."""
        return tuple(cls(version) for version in _facts.supported_kubernetes_versions())

    # -- what follows from the version ----------------------------------------------------

    @property
    def version(self) -> str:
        """The plain version, e.g. ``1.35`` (as aws-eks-v2's ``KubernetesVersion.version``)."""
        return str.__str__(self)

    @property
    def eks_version(self) -> eks.KubernetesVersion:
        """aws-eks-v2's value of this version."""
        return eks.KubernetesVersion.of(self.version)

    def kubectl_layer(self, scope: Construct, id: str = "KubectlLayer") -> lambda_.ILayerVersion:
        """The kubectl/helm Lambda layer of this version (PyPI aws-cdk.lambda-layer-kubectl-v3x)."""
        minor = self.version.split(".")[1]  # aws-cdk.lambda-layer-kubectl-v<minor>
        module = importlib.import_module(f"aws_cdk.lambda_layer_kubectl_v{minor}")
        layer_class = getattr(module, f"KubectlV{minor}Layer")
        created: lambda_.ILayerVersion = layer_class(scope, id)
        return created

    @property
    def addon_versions(self) -> dict[str, str | None]:
        """EKS add-on name -> the version pinned for this version on a ``HyperPodEksCluster``
        (``assets/hyperpod.json``)."""
        return _facts.addon_versions(self.version)

    @property
    def every_addon_pin(self) -> dict[str, str]:
        """Every EKS add-on a construct may install on a cluster of this version, pinned: the
        cluster's and the inference operator's (what ``cdk-llm-serving addons check`` checks)."""
        return every_addon_pin(self.version)

    @property
    def standard_support_ends(self) -> datetime.date | None:
        """The end of EKS standard support (``hyperpod.json``), after which EKS bills extended
        support; ``None`` when not recorded."""
        end = _facts.hyperpod_facts()["eks_standard_support_ends"].get(self.version)
        return datetime.date.fromisoformat(end) if end else None

    @property
    def extended_support_warning(self) -> str | None:
        """Why this version costs EKS extended support, or ``None`` when it does not (as of the
        date ``hyperpod.json`` records, never the clock)."""
        return _facts.extended_support_warning(self.version)


for _version in _facts.supported_kubernetes_versions():
    setattr(
        KubernetesVersion,
        "V" + _version.replace(".", "_"),
        KubernetesVersion._known(_version),
    )

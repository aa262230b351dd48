"""``addons check``: is every pinned EKS add-on version offered for a Kubernetes version
(``DescribeAddonVersions``, https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeAddonVersions.html;
why: docs/design/cli.md, "Add-on pins")?"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .._addon_pins import (
    every_addon_pin,
    hyperpod_facts,
    inference_operator_facts,
    supported_kubernetes_versions,
)
from ..errors import Problems


@dataclass(frozen=True)
class AddonCheck:
    """One add-on on one Kubernetes version: our pin against what EKS offers."""

    kubernetes_version: str
    addon: str
    #: ``None``: not pinned (an ``--addon-versions name=`` override; EKS installs its default).
    pinned: str | None
    offered: bool
    #: The version EKS installs when none is given, for information.
    default: str | None
    newest: str | None


def parse_overrides(text: str | None, kubernetes_versions: Iterable[str]) -> dict[str, str | None]:
    """``name=version,...`` (``name=``: unpinned) -> overrides; an unknown name or a malformed
    item raises one ``ConfigurationError`` naming every problem."""
    known = sorted({name for v in kubernetes_versions for name in every_addon_pin(v)})
    overrides: dict[str, str | None] = {}
    problems = Problems("addons check")
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        name, sep, version = (part.strip() for part in item.partition("="))
        if not sep or not name:
            problems.add("--addon-versions", item, "name=version (name= leaves it unpinned)")
        elif name not in known:
            problems.add("--addon-versions", name, f"one of the pinned add-ons: {', '.join(known)}")
        else:
            overrides[name] = version or None
    problems.raise_if_any()
    return overrides


def check_versions(versions: str | None) -> tuple[str, ...]:
    """``--kubernetes-version`` (default: every version the library supports)."""
    supported = supported_kubernetes_versions()
    if versions is None:
        return supported
    problems = Problems("addons check")
    if versions not in supported:
        problems.add("--kubernetes-version", versions, f"one of {', '.join(supported)}")
    problems.raise_if_any()
    return (versions,)


def offered_versions(eks: Any, addon: str, kubernetes_version: str) -> list[dict[str, Any]]:
    """Every ``addonVersions`` entry EKS returns for ``addon`` on ``kubernetes_version``."""
    paginator = eks.get_paginator("describe_addon_versions")
    found: list[dict[str, Any]] = []
    for page in paginator.paginate(addonName=addon, kubernetesVersion=kubernetes_version):
        for entry in page.get("addons", []):
            if entry.get("addonName") == addon:
                found.extend(entry.get("addonVersions", []))
    return found


def _version_key(version: str) -> tuple[int, ...]:
    """``v1.3.10-eksbuild.3`` -> (1, 3, 10, 3): numeric, so 1.3.10 sorts after 1.3.8."""
    return tuple(int(number) for number in re.findall(r"\d+", version))


def _is_default(entry: Mapping[str, Any], kubernetes_version: str) -> bool:
    return any(
        c.get("defaultVersion") and c.get("clusterVersion") == kubernetes_version
        for c in entry.get("compatibilities", [])
    )


def check_addon(eks: Any, addon: str, pinned: str | None, kubernetes_version: str) -> AddonCheck:
    entries = offered_versions(eks, addon, kubernetes_version)
    names = sorted({e["addonVersion"] for e in entries}, key=_version_key)
    default = next((e["addonVersion"] for e in entries if _is_default(e, kubernetes_version)), None)
    offered = pinned in names if pinned else default is not None
    return AddonCheck(
        kubernetes_version, addon, pinned, offered, default, names[-1] if names else None
    )


def check_pins(
    eks: Any, versions: Iterable[str], overrides: Mapping[str, str | None]
) -> list[AddonCheck]:
    """Every pinned add-on (``overrides`` applied) of every Kubernetes version in ``versions``."""
    results = []
    for version in versions:
        pins: dict[str, str | None] = {**every_addon_pin(version)}
        pins.update({name: v for name, v in overrides.items() if name in pins})
        for addon, pinned in sorted(pins.items()):
            results.append(check_addon(eks, addon, pinned, version))
    return results


def checks_as_dict(region: str | None, checks: list[AddonCheck]) -> dict[str, Any]:
    return {
        "region": region,
        "all_offered": all(check.offered for check in checks),
        "addons": [asdict(check) for check in checks],
    }


def format_checks(region: str | None, checks: list[AddonCheck]) -> str:
    header = ("k8s", "add-on", "pinned", "offered", "EKS default", "newest")
    rows = [
        (
            c.kubernetes_version,
            c.addon,
            c.pinned or "(unpinned)",
            "yes" if c.offered else "NO",
            c.default or "-",
            c.newest or "-",
        )
        for c in checks
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [f"EKS add-on versions offered in {region}:"]
    lines += [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    for check in checks:
        if not check.offered:
            lines.append(
                f"{check.addon} {check.pinned} not offered on {check.kubernetes_version}: {where_to_override(check.addon)}"
            )
    return "\n".join(lines)


def where_to_override(addon: str) -> str:
    """Which construct parameter sets ``addon``'s version."""
    facts = hyperpod_facts()
    # The cluster's pins cover its own add-ons and the Secrets Store provider the serving
    # path installs later (it reads the cluster's addon_versions).
    if addon in facts["addons_before_nodes"] + facts["addons_after_nodes"] or any(
        addon in pins for pins in facts["addon_versions"].values()
    ):
        return "HyperPodEksCluster(addon_versions={...})"
    if addon == inference_operator_facts()["addon"]["name"]:
        return "HyperPodInferenceOperator(addon_version=...)"
    return (
        "no construct parameter yet: override the CfnAddon's AddonVersion "
        "(node.default_child.add_property_override) of the construct that installs it"
    )

"""Add-on versions that cannot exist are refused at synth: without their
``-eksbuild.N`` suffix, of another form, or a kube-proxy for another Kubernetes version."""

from __future__ import annotations

import pytest

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod._facts import addon_versions, supported_kubernetes_versions
from cdk_llm_serving.hyperpod._input_checks import EKS_ADDON_VERSION
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from tests.support.builders import new_stack
from tests.support.hyperpod import instance_groups


def problems_of(versions: dict[str, str | None], kubernetes: str = "1.35") -> dict[str, str]:
    stack = new_stack("AddonPins")
    try:
        HyperPodEksCluster(
            stack,
            "HyperPod",
            instance_groups=instance_groups(),
            kubernetes_version=kubernetes,
            addon_versions=versions,
        )
    except ConfigurationError as error:
        return {p.property: p.allowed for p in error.problems}
    return {}


@pytest.mark.parametrize(
    ("versions", "prop", "start"),
    [
        ({"vpc-cni": "v1.22.4"}, "addon_versions.vpc-cni", "an EKS add-on version is v<major>"),
        ({"coredns": "1.13.2-eksbuild.4"}, "addon_versions.coredns", "an EKS add-on version"),
        ({"coredns": "latest"}, "addon_versions.coredns", "an EKS add-on version"),
        (
            {"kube-proxy": "v1.34.1-eksbuild.2"},
            "addon_versions.kube-proxy",
            "kube-proxy 1.34 is for",
        ),
    ],
)
def test_versions_that_cannot_exist_are_refused(versions, prop, start):
    found = problems_of(versions)
    assert list(found) == [prop] and found[prop].startswith(start), found


def test_the_missing_suffix_is_named():
    assert (
        "e.g. v1.22.4-eksbuild.1" in problems_of({"vpc-cni": "v1.22.4"})["addon_versions.vpc-cni"]
    )


def test_versions_of_the_right_form_and_defaults_pass():
    assert problems_of({"kube-proxy": "v1.35.9-eksbuild.1", "coredns": None}) == {}


@pytest.mark.parametrize("kubernetes", supported_kubernetes_versions())
def test_every_pinned_version_has_the_form(kubernetes):
    """The rule admits every pin the library ships (it is the form EKS publishes)."""
    pins = addon_versions(kubernetes)
    assert pins and all(v is None or EKS_ADDON_VERSION.fullmatch(v) for v in pins.values()), pins
    assert (pins["kube-proxy"] or "").startswith(f"v{kubernetes}.")

"""Kubernetes versions of ``HyperPodEksCluster``: the kubectl layer per version, and the
synth-time warning when a version costs EKS extended support (dates in ``hyperpod.json``)."""

from __future__ import annotations

import copy
import datetime

import pytest

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.hyperpod import _facts
from cdk_llm_serving.hyperpod._facts import (
    extended_support_warning,
    hyperpod_facts,
    supported_kubernetes_versions,
)
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.kubernetes_version import KubernetesVersion
from tests.support.builders import new_stack
from tests.support.hyperpod import instance_groups

WARNING_ID = "cdk-llm-serving:kubernetesExtendedSupport"


def cluster_warnings(version: str) -> list[str]:
    """The warnings a new cluster of ``version`` records at construction."""
    stack = new_stack(f"K8s{version.replace('.', '')}")
    cluster = HyperPodEksCluster(
        stack, "HyperPod", instance_groups=instance_groups(), kubernetes_version=version
    )
    return [
        str(entry.data)
        for entry in cluster.node.metadata
        if entry.type == "aws:cdk:warning" and WARNING_ID in str(entry.data)
    ]


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("1.33", "1.33: EKS standard support ended on 2026-07-29"),
        ("1.34", "1.34: EKS standard support ends on 2026-12-02"),  # within 90 days
        ("1.35", None),  # standard support to 2027-03-27
    ],
)
def test_a_version_out_of_standard_support_warns_at_synth(version, expected):
    found = cluster_warnings(version)
    if expected is None:
        assert found == []
        return
    (message,) = found
    assert expected in message
    assert "$0.60 instead of $0.10 per cluster-hour" in message
    assert "one minor version higher per deploy" in message and "-> 1.35" in message


def test_the_warning_says_the_upgrade_path_one_minor_version_at_a_time():
    message = extended_support_warning("1.33")
    assert message is not None and "(1.33 -> 1.34 -> 1.35)" in message


def _facts_with(monkeypatch, end: str) -> None:
    facts = copy.deepcopy(hyperpod_facts())
    facts["eks_standard_support_ends"]["1.35"] = end
    monkeypatch.setattr(_facts, "hyperpod_facts", lambda: facts)


def test_the_notice_window_counts_from_the_recorded_date_not_the_clock(monkeypatch):
    facts = hyperpod_facts()
    checked = datetime.date.fromisoformat(facts["eks_support_checked_on"])
    window = datetime.timedelta(days=facts["eks_extended_support_notice_days"])
    _facts_with(monkeypatch, (checked + window).isoformat())
    assert "ends on" in (extended_support_warning("1.35") or "")
    _facts_with(monkeypatch, (checked + window + datetime.timedelta(days=1)).isoformat())
    assert extended_support_warning("1.35") is None
    _facts_with(monkeypatch, checked.isoformat())
    assert "ended on" in (extended_support_warning("1.35") or "")


def test_every_supported_version_records_its_end_of_standard_support():
    ends = hyperpod_facts()["eks_standard_support_ends"]
    assert set(supported_kubernetes_versions()) <= set(ends)
    for end in ends.values():
        datetime.date.fromisoformat(end)
    assert "kubernetes-versions.html" in hyperpod_facts()["eks_support_source"]
    assert "eks/pricing" in hyperpod_facts()["eks_support_source"]


def test_the_reference_app_synthesizes_without_the_warning(reference_assembly):
    stack = reference_assembly.get_stack_by_name("ReferenceMoeHyperPod")
    assert stack.template["Resources"]  # the stack synthesized
    assert [m for m in stack.messages if WARNING_ID in str(m.entry.data)] == []


def test_the_kubectl_layer_matches_the_cluster_version(reference_templates):
    # aws-cdk.lambda-layer-kubectl-v35 describes its layer with the kubectl it bundles.
    template = reference_templates["ReferenceMoeHyperPod"]
    layers = [
        r["Properties"].get("Description", "")
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::LayerVersion"
    ]
    assert any(d.startswith("/opt/kubectl/kubectl 1.35.") for d in layers), layers


# -- the version is required, as aws-eks-v2's Cluster(version=) is ---------------------------------


def test_leaving_the_version_out_is_refused_with_one_clear_error():
    with pytest.raises(ConfigurationError) as caught:
        HyperPodEksCluster(new_stack("NoVersion"), "HyperPod", instance_groups=instance_groups())
    assert [p.property for p in caught.value.problems] == ["kubernetes_version"]
    assert "required" in str(caught.value)


def test_a_version_is_a_kubernetes_version_whichever_way_it_is_given():
    cluster = HyperPodEksCluster(
        new_stack("TypedVersion"),
        "HyperPod",
        instance_groups=instance_groups(),
        kubernetes_version=KubernetesVersion.V1_35,
    )
    assert cluster.kubernetes_version == "1.35"
    assert isinstance(cluster.kubernetes_version, KubernetesVersion)

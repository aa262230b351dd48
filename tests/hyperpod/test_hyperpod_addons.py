"""Cluster-wide add-ons: chart pins, KEDA and the scraper's cluster role once per cluster."""

from __future__ import annotations

import json

import pytest

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod._facts import chart_pins
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.constants import KEDA_CHART, KEDA_OPERATOR_ACCOUNT
from cdk_llm_serving.hyperpod.observability import VllmObservability
from cdk_llm_serving.hyperpod.replica_autoscaling import VllmReplicaAutoScaling
from tests.support import yaml_files
from tests.support.builders import new_stack, template_of
from tests.support.hyperpod import (
    deepseek_service,
    hyperpod_cluster,
    model_store,
    published_chart,
)
from tests.support.template_helpers import (
    flatten,
    manifest_objects,
    policy_statements,
    resources_of_type,
)


def _scaled_service(stack, cluster, addons, store, id: str, name: str) -> VllmReplicaAutoScaling:
    service = deepseek_service(stack, cluster, addons, store, id=id, replicas=1, name=name)
    observability = VllmObservability(stack, f"{id}Obs", service=service)
    return VllmReplicaAutoScaling(
        stack,
        f"{id}Scale",
        service=service,
        observability=observability,
        max_replicas=2,
    )


def _charts(template: dict) -> dict[str, dict]:
    return {
        v["Properties"]["Chart"]: v["Properties"]
        for v in resources_of_type(template, "Custom::AWSCDK-EKS-HelmChart").values()
    }


def test_chart_versions_pin_keda():
    stack = new_stack("KedaPin")
    cluster = hyperpod_cluster(stack)
    addons = HyperPodServingAddons(
        stack, "Addons", cluster=cluster, chart_versions={"keda": "2.16.1"}
    )
    _scaled_service(stack, cluster, addons, model_store(stack, cluster), "Serving", "ds3")
    charts = _charts(template_of(stack))
    assert charts["keda"]["Version"] == "2.16.1"
    assert charts["keda"]["Namespace"] == "keda"
    assert charts["lws"]["Version"] == "0.8.0"  # the others keep their pins


def test_unknown_chart_names_are_refused_with_the_allowed_ones():
    stack = new_stack("BadPin")
    cluster = hyperpod_cluster(stack)
    with pytest.raises(ConfigurationError) as caught:
        HyperPodServingAddons(stack, "Addons", cluster=cluster, chart_versions={"kdea": "1.0"})
    (problem,) = caught.value.problems
    assert problem.property == "chart_versions['kdea']"
    for name in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin", "lws", "keda"):
        assert name in problem.allowed


def test_two_scaled_services_share_keda_and_the_scraper_role():
    stack = new_stack("TwoServices")
    cluster = hyperpod_cluster(stack, gpu_count=4)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    store = model_store(stack, cluster)
    first = _scaled_service(stack, cluster, addons, store, "ServingA", "ds3-a")
    second = _scaled_service(stack, cluster, addons, store, "ServingB", "ds3-b")
    assert addons.enable_keda() is addons.enable_keda()
    assert first.keda is second.keda and first.pod_identity is second.pod_identity

    template = template_of(stack)
    charts = [
        v
        for v in resources_of_type(template, "Custom::AWSCDK-EKS-HelmChart").values()
        if v["Properties"]["Chart"] == "keda"
    ]
    assert len(charts) == 1
    (association,) = [  # each service has its own (weights, API key); KEDA's is shared
        v
        for v in resources_of_type(template, "AWS::EKS::PodIdentityAssociation").values()
        if v["Properties"]["ServiceAccount"] == "keda-operator"
    ]
    role_id = association["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    # One managed policy per scaled service on the shared role, each its own workspace.
    statements = policy_statements(template, role_id)
    assert [s["Action"] for s in statements] == ["aps:QueryMetrics"] * 2
    assert sorted(s["Resource"]["Fn::GetAtt"][0][: len("ServingAObs")] for s in statements) == [
        "ServingAObs",
        "ServingBObs",
    ]

    scaled = [obj["metadata"]["name"] for obj in manifest_objects(template, "ScaleScaledObject")]
    assert sorted(scaled) == ["ds3-a", "ds3-a-amp", "ds3-b", "ds3-b-amp"]  # ScaledObject + auth
    rbac = [
        k
        for k in resources_of_type(template, "Custom::AWSCDK-EKS-KubernetesResource")
        if "ScraperRbac" in k
    ]
    assert len(rbac) == 1 and rbac[0].startswith("AddonsScraperRbac")
    roles = [
        obj
        for obj in json.loads(flatten(template["Resources"][rbac[0]]["Properties"]["Manifest"]))
        if obj["kind"] == "ClusterRole"
    ]
    assert [r["metadata"]["name"] for r in roles] == ["aps-collector-role"]
    entries = [
        v
        for v in resources_of_type(template, "AWS::EKS::AccessEntry").values()
        if v["Properties"].get("Username") == "aps-collector-user"
    ]
    assert len(entries) == 2  # one per scraper, both bound by the one ClusterRoleBinding


@pytest.mark.parametrize("name", sorted(chart_pins()))
def test_every_pin_names_a_published_chart(shared_dir, name):
    chart = published_chart(shared_dir, name)
    assert (chart / "values.yaml").is_file()


def test_keda_values_and_operator_account_are_the_charts(shared_dir):
    values = yaml_files.load_file(published_chart(shared_dir, KEDA_CHART) / "values.yaml")
    assert values["serviceAccount"]["operator"]["name"] == KEDA_OPERATOR_ACCOUNT
    assert {"tolerations", "nodeSelector"} <= set(values)  # the keys _render_keda sets

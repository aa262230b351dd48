"""Names and types on the HyperPod path: one name per concept, typed Kubernetes versions and
instance types, grants in CDK's direction, the multi-node service split by job."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod import (
    HyperPodEksCluster,
    HyperPodInstanceGroup,
    HyperPodServingAddons,
    KubernetesVersion,
    VllmMultiNodeService,
    VllmObservability,
)
from cdk_llm_serving.hyperpod.constants import GPU_NODE_ROLE, GPU_RESOURCE
from cdk_llm_serving.hyperpod.multi_node_manifests import MultiNodeWorkload
from cdk_llm_serving.hyperpod.multi_node_placement import MultiNodePlacement
from cdk_llm_serving.model_sources import ModelData
from cdk_llm_serving.planning.instance_types import InstanceType
from cdk_llm_serving.planning.models import WeightFormat
from cdk_llm_serving.vllm import VllmConfig
from tests.support.builders import new_stack
from tests.support.hyperpod import hyperpod_cluster, instance_groups, small_cluster

CONFIG = VllmConfig(model="x", max_model_len=32768)
STREAMED = "s3://weights-bucket/deepseek-v3/"


def warnings_on(scope: IConstruct) -> dict[str, str]:
    """Warning id -> message of the warnings recorded on ``scope`` itself."""
    found: dict[str, str] = {}
    for entry in scope.node.metadata:
        if entry.type == "aws:cdk:warning":
            text = str(entry.data)
            ident = text[text.rfind("[ack: ") + 6 : -1] if "[ack: " in text else text
            found[ident] = text
    return found


def with_store(stack: Stack, **props: Any) -> VllmMultiNodeService:
    _, addons, store = small_cluster(stack)
    return VllmMultiNodeService(
        stack,
        "Serving",
        addons=addons,
        model="deepseek-v3",
        config=CONFIG,
        **{key: (store if value == "STORE" else value) for key, value in props.items()},
    )


# -- one name per concept --------------------------------------------------------------------


def test_weight_format_and_weights_are_the_names():
    stack = new_stack("NewNames")
    built = with_store(stack, weight_format="fp8", weights="STORE")
    assert built.weight_format is WeightFormat.FP8
    assert built.model_store is built.weights and built.stream_from is None


def test_weight_format_takes_the_typed_value():
    stack = new_stack("TypedFormat")
    built = with_store(stack, weight_format=WeightFormat.FP8, weights="STORE")
    args = built.lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert "--quantization" in args["args"] and "fp8" in args["args"]


def test_streamed_weights_are_the_s3_prefix():
    stack = new_stack("Streamed")
    cluster = hyperpod_cluster(stack)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    built = VllmMultiNodeService(
        stack,
        "New",
        addons=addons,
        model="deepseek-v3",
        config=CONFIG,
        weight_format="fp8",
        weights=ModelData.from_s3_uri(STREAMED),
    )
    assert built.stream_from is built.weights and built.model_store is None
    assert built.config.model == STREAMED


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"weight_format": "fp8"}, "weights"),
        ({"weights": "STORE"}, "weight_format"),
        (
            {"weight_format": "fp9", "weights": "STORE"},
            "weight_format = 'fp9': weight formats must be one of",
        ),
    ],
)
def test_one_configuration_error_for_missing_or_unknown_props(props, expected):
    with pytest.raises(ConfigurationError) as caught:
        with_store(new_stack("Conflict"), **props)
    assert expected in str(caught.value)


# -- the service split by job ------------------------------------------------------------------


def test_the_manifests_come_from_pure_renderers_of_immutable_inputs():
    built = with_store(new_stack("Pure"), weight_format="fp8", weights="STORE")
    assert isinstance(built.placement, MultiNodePlacement)
    assert isinstance(built.workload, MultiNodeWorkload)
    with pytest.raises(AttributeError):
        built.workload.name = "other"  # type: ignore[misc]
    before = len(built.node.metadata)
    # Rendering again gives the same objects, and neither warns nor changes the construct.
    assert built.workload.leader_worker_set() == built.lws
    assert built.workload.service_manifest() == built.service
    assert built.manifests() == [built.lws, built.service, *built.network_policies]
    assert len(built.node.metadata) == before
    assert built.rollout_strategy == built.lws["spec"]["rolloutStrategy"]


def test_placement_is_the_services_group_nodes_plan_and_resources():
    built = with_store(new_stack("Placement"), weight_format="fp8", weights="STORE")
    placement = built.placement
    assert (built.group, built.nodes, built.plan, built.layout) == (
        placement.group,
        placement.nodes,
        placement.plan,
        placement.layout,
    )
    assert built.resources[GPU_RESOURCE] == str(placement.instance.gpus)
    assert placement.gpu_nodes == placement.replicas * placement.nodes


# -- Kubernetes versions -----------------------------------------------------------------------


def test_kubernetes_version_constants_and_of():
    assert KubernetesVersion.of("1.35") == KubernetesVersion.V1_35 == "1.35"
    assert KubernetesVersion.of(KubernetesVersion.V1_34) is KubernetesVersion.V1_34
    assert [str(v) for v in KubernetesVersion.supported()] == ["1.33", "1.34", "1.35"]


@pytest.mark.parametrize(("given", "closest"), [("1.36", "1.35"), ("1.32", "1.33")])
def test_an_unsupported_kubernetes_version_names_the_closest(given, closest):
    with pytest.raises(ConfigurationError) as caught:
        KubernetesVersion.of(given)
    assert f"kubernetes_version = '{given}'" in str(caught.value)
    assert f"closest: {closest}" in str(caught.value)


def test_a_kubernetes_version_owns_its_pins_and_support_dates():
    version = KubernetesVersion.V1_35
    assert version.addon_versions["kube-proxy"].startswith("v1.35.")
    assert set(version.addon_versions) <= set(version.every_addon_pin)
    assert version.standard_support_ends == datetime.date(2027, 3, 27)
    assert version.extended_support_warning is None
    assert "ended on 2026-07-29" in (KubernetesVersion.V1_33.extended_support_warning or "")


@pytest.mark.parametrize("version", [KubernetesVersion.V1_34, "1.34"])
def test_the_cluster_takes_a_kubernetes_version_or_its_string(version):
    stack = new_stack("TypedK8s")
    cluster = HyperPodEksCluster(
        stack, "HyperPod", instance_groups=instance_groups(), kubernetes_version=version
    )
    assert isinstance(cluster.kubernetes_version, KubernetesVersion)
    assert cluster.kubernetes_version == "1.34"
    layer = cluster.node.find_child("KubectlLayer")
    assert type(layer).__name__ == "KubectlV34Layer"


def test_the_cluster_refuses_an_unsupported_version_with_the_closest():
    with pytest.raises(ConfigurationError) as caught:
        HyperPodEksCluster(
            new_stack("BadK8s"),
            "HyperPod",
            instance_groups=instance_groups(),
            kubernetes_version="1.36",
        )
    assert "kubernetes_version = '1.36'" in str(caught.value) and "closest: 1.35" in str(
        caught.value
    )


# -- instance types ------------------------------------------------------------------------------


def test_an_instance_group_turns_a_known_type_into_an_instance_type():
    group = HyperPodInstanceGroup.gpu("gpu", "ml.p5en.48xlarge", 2)
    assert isinstance(group.instance_type, InstanceType)
    assert group.instance_type.hyperpod and group.instance_type.gpus == 8
    assert group.role == GPU_NODE_ROLE
    typed = HyperPodInstanceGroup.gpu("gpu", InstanceType.ML_P5EN_48XLARGE, 2)
    assert typed == group


def test_an_unknown_instance_type_is_one_problem_with_the_closest_names():
    stack = new_stack("BadType")
    groups = [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu("gpu", "ml.p5en.48xlarg", 2),
    ]
    with pytest.raises(ConfigurationError) as caught:
        HyperPodEksCluster(stack, "HyperPod", kubernetes_version="1.33", instance_groups=groups)
    (problem,) = caught.value.problems
    assert problem.property == "instance_groups[1].instance_type"
    assert "ml.p5en.48xlarge" in problem.allowed


# -- grants --------------------------------------------------------------------------------------


def test_the_workspace_grants_its_query_to_a_grantee():
    stack = new_stack("GrantQuery")
    built = with_store(stack, weight_format="fp8", weights="STORE")
    observability = VllmObservability(stack, "Observability", service=built)
    role = iam.Role(stack, "Reader", assumed_by=iam.AccountRootPrincipal())
    grant = observability.grant_query(role)
    assert isinstance(grant, iam.Grant) and grant.success


def test_a_gpu_group_the_catalog_lacks_is_a_configuration_error_not_a_key_error():
    from cdk_llm_serving.planning.catalog import Catalog, default_catalog

    full = default_catalog()
    without = Catalog(
        {s.instance_type: s for s in full if s.instance_type != "ml.p5en.48xlarge"},
        full.price_region,
        full.price_source,
    )
    with pytest.raises(ConfigurationError) as caught:
        with_store(new_stack("NoSpec"), weight_format="fp8", weights="STORE", catalog=without)
    assert not isinstance(caught.value, KeyError)
    (problem,) = caught.value.problems
    assert (problem.property, problem.value) == ("gpu_group", "ml.p5en.48xlarge")


def test_a_type_without_a_vcpu_count_is_a_problem_of_the_service():
    import dataclasses

    from cdk_llm_serving.planning.catalog import default_catalog

    catalog = default_catalog()
    p5en = catalog.get("ml.p5en.48xlarge")
    no_vcpus = catalog.with_instances([dataclasses.replace(p5en, vcpus=None)])
    with pytest.raises(ConfigurationError) as caught:
        with_store(new_stack("NoVcpus"), weight_format="fp8", weights="STORE", catalog=no_vcpus)
    assert "the catalog has no vCPU count for ml.p5en.48xlarge; add it" in str(caught.value)


def test_the_operator_wires_its_own_roles_with_add_and_enable_not_grant():
    from cdk_llm_serving.hyperpod import HyperPodInferenceOperator, HyperPodServingAddons

    stack = new_stack("OperatorWiring")
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=instance_groups()
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    operator = HyperPodInferenceOperator.of(addons)
    operator.add_model_source(ModelData.from_s3_uri(STREAMED))
    policy = operator.enable_cloudwatch_scaling()
    assert operator.enable_cloudwatch_scaling() is policy  # once per cluster
    assert [name for name in vars(HyperPodInferenceOperator) if name.startswith("grant_")] == []
    assert not hasattr(addons.enable_keda(), "grant_query")  # the workspace grants, to a grantee


def test_every_supported_version_has_its_kubectl_layer_and_a_constant():
    supported = [str(v) for v in KubernetesVersion.supported()]
    assert supported == ["1.33", "1.34", "1.35"]
    for version in supported:
        constant = getattr(KubernetesVersion, "V" + version.replace(".", "_"))
        assert constant == version and isinstance(constant, KubernetesVersion)
        stack = new_stack(f"Layer{version.replace('.', '')}")
        layer = KubernetesVersion.of(version).kubectl_layer(stack)
        assert type(layer).__name__ == f"KubectlV{version.replace('1.', '')}Layer"


@pytest.mark.parametrize("module", ["multi_node_placement", "multi_node_manifests"])
def test_placement_and_renderers_import_no_construct_api(module):
    """Pure by construction: neither module imports aws_cdk or constructs itself, nor names
    ``Annotations`` (no construct to change, no warning to add)."""
    import ast
    from pathlib import Path

    import cdk_llm_serving.hyperpod as hyperpod

    source = (Path(hyperpod.__file__).parent / f"{module}.py").read_text()
    tree = ast.parse(source)
    imported = [
        node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 0
    ] + [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ]
    assert not [name for name in imported if name.split(".")[0] in ("aws_cdk", "constructs")]
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "Annotations"]

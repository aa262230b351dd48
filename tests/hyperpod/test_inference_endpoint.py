"""HyperPodInferenceEndpoint: the InferenceEndpointConfig it renders, its checks, grants, pods."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from aws_cdk import Stack
from aws_cdk import aws_iam as iam

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.inference_dashboard import InferenceEndpointDashboard
from cdk_llm_serving.hyperpod.inference_endpoint import (
    HyperPodInferenceEndpoint,
    InferenceAutoScaling,
)
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
from cdk_llm_serving.vllm.pool_strategy import derive_pool_config
from stacks.hyperpod_reference_stack import SINGLE_NODE_TYPES
from tests.support import yaml_files
from tests.support.builders import new_stack
from tests.support.hyperpod import (
    gpt_oss_120b_endpoint,
    landing_groups,
    model_store,
    single_node_groups,
)
from tests.support.kubernetes_schemas import concretize, undeclared_fields, validate_core
from tests.support.template_helpers import manifest_objects


def _cluster(stack: Stack, groups=None) -> tuple[HyperPodEksCluster, HyperPodServingAddons]:
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=groups or single_node_groups()
    )
    return cluster, HyperPodServingAddons(stack, "Addons", cluster=cluster)


@pytest.fixture(scope="module")
def endpoint() -> HyperPodInferenceEndpoint:
    stack = new_stack()
    _, addons = _cluster(stack)
    return gpt_oss_120b_endpoint(stack, addons, auto_scaling=InferenceAutoScaling(max_replicas=3))


@pytest.fixture(scope="module")
def reference_config(inference_operator_template) -> dict:
    objects = manifest_objects(inference_operator_template, "GptOss120b")
    (config,) = [o for o in objects if o["kind"] == "InferenceEndpointConfig"]
    return config


@pytest.fixture
def crd_schema(shared_dir: Path) -> dict:
    path = (
        shared_dir / "schemas" / "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml"
    )
    crd = yaml_files.load_file(path)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


# -- the CRD ------------------------------------------------------------------------------


def test_reference_variant_passes_the_crd_schema_with_two_types(reference_config, crd_schema):
    jsonschema.validate(concretize(reference_config), crd_schema)
    assert undeclared_fields(reference_config, crd_schema) == []
    assert reference_config["spec"]["instanceTypes"] == list(SINGLE_NODE_TYPES)


def test_the_crd_check_can_fail(reference_config, crd_schema):
    broken = copy.deepcopy(reference_config)
    broken["spec"]["endpointName"] = "not_a_sagemaker_name"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(concretize(broken), crd_schema)
    misspelt = copy.deepcopy(reference_config)
    misspelt["spec"]["worker"]["environment"] = []
    assert undeclared_fields(misspelt, crd_schema) == [".spec.worker.environment"]


def test_constructed_endpoint_passes_the_crd_schema(endpoint, crd_schema):
    jsonschema.validate(concretize(endpoint.manifest), crd_schema)
    assert undeclared_fields(endpoint.manifest, crd_schema) == []


def test_reference_variant_is_tls_metrics_and_registration_on(reference_config):
    spec = reference_config["spec"]
    assert spec["endpointName"] == "gpt-oss-120b-mxfp4-tp8"
    assert spec["tlsConfig"]["tlsCertificateOutputS3Uri"].startswith("s3://")
    assert spec["metrics"]["enabled"] is True
    assert spec["autoScalingSpec"]["maxReplicaCount"] == 2
    assert spec["modelSourceConfig"]["modelSourceType"] == "s3"


# -- one worker, derived per type ---------------------------------------------------------


def test_each_type_is_planned_and_the_worker_runs_their_shared_configuration(endpoint):
    for instance_type in ("ml.p5en.48xlarge", "ml.p5.48xlarge"):
        derived = derive_pool_config(
            endpoint.config.with_changes(served_model_name=None),
            "gpt-oss-120b",
            instance_type,
            ["mxfp4"],
        )
        assert endpoint.type_plans[instance_type].config == derived.config.with_changes(
            max_model_len=32768
        )
    worker = endpoint.manifest["spec"]["worker"]
    environment = {e["name"]: e["value"] for e in worker["environmentVariables"]}
    assert environment == endpoint.config.to_sagemaker_environment()
    assert environment["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "8"
    assert environment["SM_VLLM_SERVED_MODEL_NAME"] == "gpt-oss-120b-mxfp4-tp8"
    assert worker["resources"]["limits"] == {"nvidia.com/gpu": "8"}


def test_types_needing_different_configurations_are_refused():
    stack = new_stack()
    groups = [*single_node_groups(), HyperPodInstanceGroup.gpu("l40s", "ml.g6e.12xlarge", 1)]
    _, addons = _cluster(stack, groups)
    with pytest.raises(ConfigurationError) as raised:
        gpt_oss_120b_endpoint(stack, addons, instance_types=["ml.p5en.48xlarge", "ml.g6e.12xlarge"])
    assert "one worker on every listed type" in str(raised.value)


def test_a_type_that_is_no_gpu_group_is_refused():
    stack = new_stack()
    _, addons = _cluster(stack)
    with pytest.raises(ConfigurationError) as raised:
        gpt_oss_120b_endpoint(stack, addons, instance_types=["ml.p5en.48xlarge", "ml.p4d.24xlarge"])
    assert "instance_types[1] = 'ml.p4d.24xlarge'" in str(raised.value)
    assert "GPU groups" in str(raised.value)


def test_a_model_that_needs_more_than_one_node_is_refused():
    stack = new_stack()
    _, addons = _cluster(stack)
    with pytest.raises(ConfigurationError) as raised:
        gpt_oss_120b_endpoint(stack, addons, model="deepseek-v3", weight_format="bf16")
    message = str(raised.value)
    assert "instance_types[0]" in message and "instance_types[1]" in message


def test_replicas_and_autoscaling_are_bounded_by_the_groups_nodes():
    stack = new_stack()
    _, addons = _cluster(stack)
    with pytest.raises(ConfigurationError) as raised:
        gpt_oss_120b_endpoint(
            stack, addons, replicas=4, auto_scaling=InferenceAutoScaling(max_replicas=5)
        )
    message = str(raised.value)
    assert "replicas = 4" in message and "auto_scaling.max_replicas = 5" in message
    assert "at most 3" in message


def test_scale_to_zero_is_allowed_and_wakes_on_activation():
    stack = new_stack()
    _, addons = _cluster(stack)
    endpoint = gpt_oss_120b_endpoint(
        stack,
        addons,
        auto_scaling=InferenceAutoScaling(min_replicas=0, max_replicas=2, activation_value=1),
    )
    spec = endpoint.manifest["spec"]["autoScalingSpec"]
    assert spec["minReplicaCount"] == 0
    assert spec["cloudWatchTrigger"]["activationTargetValue"] == 1


def test_fsx_store_is_the_model_source_and_namespace():
    stack = new_stack()
    cluster, addons = _cluster(stack)
    store = model_store(stack, cluster)
    endpoint = gpt_oss_120b_endpoint(stack, addons, weights=store)
    source = endpoint.manifest["spec"]["modelSourceConfig"]
    assert source["modelSourceType"] == "fsx"
    assert source["modelLocation"] == store.mount_path.strip("/")
    assert endpoint.namespace == store.namespace
    assert [o["kind"] for o in endpoint.manifests()] == ["InferenceEndpointConfig"]


# -- operations ---------------------------------------------------------------------------


def test_grant_invoke_names_the_registered_endpoint(endpoint):
    stack = Stack.of(endpoint)
    role = iam.Role(stack, "Client", assumed_by=iam.AccountRootPrincipal())
    endpoint.grant_invoke(role)
    statements = stack.resolve(role.node.find_child("DefaultPolicy").document.to_json())
    invoke = statements["Statement"][0]
    assert "sagemaker:InvokeEndpoint" in invoke["Action"]
    assert "endpoint/gpt-oss-120b-mxfp4-tp8" in str(invoke["Resource"])


def test_per_instance_type_metrics(endpoint):
    metric = endpoint.metric_invocations(instance_type="ml.p5.48xlarge")
    assert metric.dimensions["InstanceType"] == "ml.p5.48xlarge"
    assert metric.dimensions["EndpointName"] == endpoint.endpoint_name


# -- pods that land -----------------------------------------------------------------------


def test_worker_and_operator_pods_land(endpoint):
    groups = single_node_groups()
    pods = endpoint.pod_templates()
    assert landing_groups(pods["worker"], groups) == ["h200", "h100"]
    assert landing_groups(pods["inference-operator"], groups) == ["system"]
    weights = [
        term["weight"]
        for term in pods["worker"]["spec"]["affinity"]["nodeAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"
        ]
    ]
    assert weights == sorted(weights, reverse=True)


def test_the_placement_check_can_fail(endpoint):
    worker = copy.deepcopy(endpoint.worker_pod_template())
    worker["spec"]["tolerations"] = []
    assert landing_groups(worker, single_node_groups()) == []


def test_pod_templates_match_kubernetes_schemas(endpoint):
    for template in endpoint.pod_templates().values():
        validate_core({"apiVersion": "v1", "kind": "Pod", **template})


def test_dashboard_has_a_line_per_type_in_priority_order():
    stack = new_stack()
    _, addons = _cluster(stack)
    endpoint = gpt_oss_120b_endpoint(stack, addons)
    dashboard = InferenceEndpointDashboard(stack, "Dashboard", endpoint=endpoint)
    body = json.dumps(stack.resolve(dashboard.dashboard.node.default_child.dashboard_body))
    first, second = (body.find(f"{i}: {t}") for i, t in enumerate(SINGLE_NODE_TYPES, start=1))
    assert 0 < first < second
    assert '\\"InstanceType\\",\\"ml.p5.48xlarge\\"' in body


def test_smoke_reaches_it_through_sagemakers_openai_path(endpoint):
    """``smoke --base-url <output> --model <served name> --sagemaker-region R`` (ops/smoke.py)."""
    stack = Stack.of(endpoint)
    url = stack.resolve(endpoint.openai_base_url)
    text = json.dumps(url)
    assert "/endpoints/gpt-oss-120b-mxfp4-tp8/openai/v1" in text
    assert "runtime.sagemaker." in text


def test_default_image_is_awss_sagemaker_vllm_container_in_the_stacks_region():
    stack = new_stack()
    _, addons = _cluster(stack)
    endpoint = gpt_oss_120b_endpoint(stack, addons, image=None)
    image = json.dumps(stack.resolve(endpoint.image))
    assert "763104351884.dkr.ecr.us-east-1." in image
    assert '"/vllm:server-sagemaker-cuda-v1"' in image
    with pytest.raises(ConfigurationError):
        gpt_oss_120b_endpoint(stack, addons, id="Blank", image=" ")


def test_endpoints_sharing_groups_are_refused_beyond_their_nodes():
    """Each listed group may host every pod up to the ceiling: the cluster's ledger counts that."""
    stack = new_stack()
    _, addons = _cluster(stack)
    gpt_oss_120b_endpoint(stack, addons, auto_scaling=InferenceAutoScaling(max_replicas=3))
    with pytest.raises(ConfigurationError) as raised:
        gpt_oss_120b_endpoint(stack, addons, id="Second", name="second")
    assert "GPU group 'h200'" in str(raised.value)

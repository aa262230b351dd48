"""HyperPodInferenceEndpoint's kvCacheSpec, intelligentRoutingSpec and pdSpec, and the
cluster's TieredStorageConfig they turn on: against the operator's CRD and CloudFormation's
schema as cfn-lint ships it."""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Annotations, Match, Template

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.inference_endpoint import (
    InferenceAutoScaling,
)
from cdk_llm_serving.hyperpod.inference_features import (
    InferenceKvCache,
    InferencePrefillDecode,
    InferenceRouting,
    KvCacheL2Backend,
    RoutingStrategy,
)
from cdk_llm_serving.hyperpod.inference_operator import HyperPodInferenceOperator
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
from cdk_llm_serving.hyperpod.tiered_storage import TieredStorage
from cdk_llm_serving.model_sources import ModelData
from cdk_llm_serving.planning.decode import Workload
from cdk_llm_serving.vllm.config import VllmConfig
from tests.support import yaml_files
from tests.support.builders import new_stack
from tests.support.cfn_schemas import resource_schema
from tests.support.hyperpod import gpt_oss_120b_endpoint, imported_cluster, single_node_groups
from tests.support.kubernetes_schemas import concretize, undeclared_fields

#: The operator's cache, routing and prefill/decode specs in the InferenceEndpointConfig.
SPECS = ("kvCacheSpec", "intelligentRoutingSpec", "pdSpec")


@pytest.fixture
def crd_schema(shared_dir: Path) -> dict:
    path = (
        shared_dir / "schemas" / "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml"
    )
    crd = yaml_files.load_file(path)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


def _addons(stack: Stack, groups=None) -> tuple[HyperPodEksCluster, HyperPodServingAddons]:
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=groups or single_node_groups()
    )
    return cluster, HyperPodServingAddons(stack, "Addons", cluster=cluster)


def _warned(stack: Stack, warning_id: str) -> bool:
    found = Annotations.from_stack(stack).find_warning("*", Match.any_value())
    return any(warning_id in str(entry.entry.data) for entry in found)


def _tiered_storage_config(stack: Stack) -> dict | None:
    (cluster,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster").values()
    return cluster["Properties"].get("TieredStorageConfig")


def _validate_against_cloudformation(config: dict) -> None:
    """``TieredStorageConfig`` against AWS::SageMaker::Cluster's provider schema (cfn-lint)."""
    definition = resource_schema("AWS::SageMaker::Cluster")["definitions"]["TieredStorageConfig"]
    jsonschema.Draft7Validator(definition).validate(config)


def _all_specs_endpoint(stack: Stack, addons: HyperPodServingAddons):
    return gpt_oss_120b_endpoint(
        stack,
        addons,
        kv_cache=InferenceKvCache(),
        routing=InferenceRouting(RoutingStrategy.KV_AWARE),
        prefill_decode=InferencePrefillDecode(
            prefill_instance_type="ml.p5en.48xlarge",
            decode_instance_type="ml.p5en.48xlarge",
            routing_threshold=8192,
            decode_auto_scaling=None,
        ),
        replicas=1,
    )


# -- the CRD ------------------------------------------------------------------------------


def test_all_three_specs_pass_the_crd_schema(crd_schema):
    stack = new_stack()
    _, addons = _addons(stack)
    endpoint = _all_specs_endpoint(stack, addons)
    spec = endpoint.manifest["spec"]
    assert set(SPECS) <= set(spec)
    jsonschema.validate(concretize(endpoint.manifest), crd_schema)
    assert undeclared_fields(endpoint.manifest, crd_schema) == []
    assert spec["kvCacheSpec"] == {
        "enableL1Cache": True,
        "enableL2Cache": True,
        "l2CacheSpec": {"l2CacheBackend": "tieredstorage"},
    }
    assert spec["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "kvaware"}
    pd = spec["pdSpec"]
    assert pd["routingThreshold"] == 8192 and pd["topologySpec"] == {"sameAZ": True}
    for role in ("prefillSpec", "decodingSpec"):
        assert pd[role]["nodeSelector"] == {"node.kubernetes.io/instance-type": "ml.p5en.48xlarge"}
        assert pd[role]["resources"]["requests"] == {
            "nvidia.com/gpu": "8",
            "vpc.amazonaws.com/efa": "16",
        }


def test_the_crd_rejects_what_the_specs_must_not_render(crd_schema):
    stack = new_stack()
    _, addons = _addons(stack)
    endpoint = _all_specs_endpoint(stack, addons)
    for path, value in (
        (("intelligentRoutingSpec", "routingStrategy"), "leastloaded"),
        (("kvCacheSpec", "l2CacheSpec", "l2CacheBackend"), "memcached"),
        (("pdSpec", "prefillSpec", "replicas"), 0),
        (("pdSpec", "routingThreshold"), -1),
    ):
        broken = copy.deepcopy(endpoint.manifest)
        target = broken["spec"]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(concretize(broken), crd_schema)
    missing = copy.deepcopy(endpoint.manifest)
    del missing["spec"]["pdSpec"]["decodingSpec"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(concretize(missing), crd_schema)


def test_redis_l2_renders_its_url_and_passes_the_crd(crd_schema):
    stack = new_stack()
    _, addons = _addons(stack)
    endpoint = gpt_oss_120b_endpoint(
        stack, addons, kv_cache=InferenceKvCache.with_redis("rediss://cache.internal:6379")
    )
    assert endpoint.manifest["spec"]["kvCacheSpec"]["l2CacheSpec"] == {
        "l2CacheBackend": "redis",
        "l2CacheLocalUrl": "rediss://cache.internal:6379",
    }
    jsonschema.validate(concretize(endpoint.manifest), crd_schema)
    assert _tiered_storage_config(stack) is None  # Redis needs no cluster memory


# -- defaults -----------------------------------------------------------------------------


def test_by_default_cache_and_routing_are_on_and_the_cluster_tier_matches():
    stack = new_stack()
    cluster, addons = _addons(stack)
    endpoint = gpt_oss_120b_endpoint(stack, addons)
    spec = endpoint.manifest["spec"]
    assert spec["kvCacheSpec"]["l2CacheSpec"] == {"l2CacheBackend": "tieredstorage"}
    assert spec["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "prefixaware"}
    assert "pdSpec" not in spec
    config = _tiered_storage_config(stack)
    assert config == {"Mode": "Enable", "InstanceMemoryAllocationPercentage": 5}
    _validate_against_cloudformation(config)
    assert endpoint.tiered_storage is cluster.tiered_storage
    assert cluster.tiered_storage.memory_gib(2048) == pytest.approx(102.4)


def test_false_turns_each_default_off():
    stack = new_stack()
    _, addons = _addons(stack)
    endpoint = gpt_oss_120b_endpoint(stack, addons, kv_cache=False, routing=False)
    assert not set(SPECS) & set(endpoint.manifest["spec"])
    assert _tiered_storage_config(stack) is None


def test_the_clusters_own_tiered_storage_is_kept():
    stack = new_stack()
    cluster = HyperPodEksCluster(
        stack,
        "HyperPod",
        kubernetes_version="1.33",
        instance_groups=single_node_groups(),
        tiered_storage=TieredStorage(memory_percentage=8),
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    gpt_oss_120b_endpoint(stack, addons, kv_cache=InferenceKvCache())
    config = _tiered_storage_config(stack)
    assert config == {"Mode": "Enable", "InstanceMemoryAllocationPercentage": 8}
    assert not _warned(stack, "cdk-llm-serving:tieredStorageExceedsHeadroom")
    _validate_against_cloudformation(config)


def test_a_tier_beyond_the_pods_headroom_is_warned():
    stack = new_stack()
    HyperPodEksCluster(
        stack,
        "HyperPod",
        kubernetes_version="1.33",
        instance_groups=single_node_groups(),
        tiered_storage=TieredStorage(memory_percentage=20),
    )
    assert _warned(stack, "cdk-llm-serving:tieredStorageExceedsHeadroom")


def test_cloudformation_refuses_what_tiered_storage_refuses():
    with pytest.raises(jsonschema.ValidationError):
        _validate_against_cloudformation(
            {"Mode": "Enable", "InstanceMemoryAllocationPercentage": 101}
        )
    with pytest.raises(ConfigurationError) as raised:
        HyperPodEksCluster(
            new_stack(),
            "HyperPod",
            kubernetes_version="1.33",
            instance_groups=single_node_groups(),
            tiered_storage=TieredStorage(memory_percentage=101),
        )
    assert "tiered_storage.memory_percentage = 101" in str(raised.value)


# -- imported clusters ---------------------------------------------------------------------


OIDC = "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE"


def _imported(stack: Stack, tiered_storage: TieredStorage | None = None) -> HyperPodServingAddons:
    """An imported cluster (one p5en group) with the operator installed on it."""
    cluster = imported_cluster(stack, oidc_provider_arn=OIDC, tiered_storage=tiered_storage)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster, load_balancer_controller=False)
    HyperPodInferenceOperator.of(
        addons, hyperpod_cluster_arn="arn:aws:sagemaker:us-east-1:111122223333:cluster/abc123"
    )
    return addons


def _on_imported(stack: Stack, addons: HyperPodServingAddons, **props):
    return gpt_oss_120b_endpoint(stack, addons, instance_types=["ml.p5en.48xlarge"], **props)


def test_an_imported_cluster_without_tiered_storage_refuses_an_explicit_l2():
    stack = new_stack()
    addons = _imported(stack)
    with pytest.raises(ConfigurationError) as raised:
        _on_imported(stack, addons, kv_cache=InferenceKvCache())
    assert "kv_cache.l2_backend = 'tieredstorage'" in str(raised.value)
    assert "from_cluster_attributes" in str(raised.value)


def test_an_imported_cluster_without_tiered_storage_defaults_to_l1_with_a_warning():
    stack = new_stack()
    addons = _imported(stack)
    endpoint = _on_imported(stack, addons)
    assert endpoint.manifest["spec"]["kvCacheSpec"] == {
        "enableL1Cache": True,
        "enableL2Cache": False,
    }
    assert _warned(stack, "cdk-llm-serving:kvCacheTieredStorageUnavailable")


def test_an_imported_cluster_that_declares_tiered_storage_takes_the_l2():
    stack = new_stack()
    addons = _imported(stack, TieredStorage(memory_percentage=30))
    endpoint = _on_imported(stack, addons, kv_cache=InferenceKvCache())
    assert endpoint.manifest["spec"]["kvCacheSpec"]["enableL2Cache"] is True
    assert endpoint.tiered_storage == TieredStorage(memory_percentage=30)


# -- checks ---------------------------------------------------------------------------------


def test_every_problem_is_named_at_once():
    stack = new_stack()
    _, addons = _addons(stack)
    with pytest.raises(ConfigurationError) as raised:
        gpt_oss_120b_endpoint(
            stack,
            addons,
            kv_cache=InferenceKvCache(l2_backend=KvCacheL2Backend.REDIS),
            prefill_decode=InferencePrefillDecode(
                prefill_instance_type="ml.p5en.48xlarge",
                decode_instance_type="ml.g6e.12xlarge",
                decode_replicas=0,
                routing_threshold=-5,
            ),
            auto_scaling=InferenceAutoScaling(max_replicas=2),
        )
    message = str(raised.value)
    for expected in (
        "kv_cache.redis_url = None",
        "prefill_decode.decode_replicas = 0",
        "prefill_decode.routing_threshold = -5",
        "prefill_decode.decode_instance_type = 'ml.g6e.12xlarge'",
        "auto_scaling = ",
    ):
        assert expected in message, expected


def test_a_routing_strategy_must_be_the_enum():
    stack = new_stack()
    _, addons = _addons(stack)
    with pytest.raises(ConfigurationError) as raised:
        gpt_oss_120b_endpoint(stack, addons, routing=InferenceRouting("prefix"))  # type: ignore[arg-type]
    assert "routing.strategy = 'prefix'" in str(raised.value)


def test_a_redis_url_without_redis_is_refused():
    stack = new_stack()
    _, addons = _addons(stack)
    with pytest.raises(ConfigurationError) as raised:
        gpt_oss_120b_endpoint(
            stack, addons, kv_cache=InferenceKvCache(redis_url="redis://cache:6379")
        )
    assert "kv_cache.redis_url" in str(raised.value)


def test_the_roles_pods_must_fit_their_groups_nodes():
    stack = new_stack()
    _, addons = _addons(stack)  # h200 group: 2 nodes
    with pytest.raises(ConfigurationError) as raised:
        gpt_oss_120b_endpoint(
            stack,
            addons,
            prefill_decode=InferencePrefillDecode(
                prefill_instance_type="ml.p5en.48xlarge",
                decode_instance_type="ml.p5en.48xlarge",
                decode_auto_scaling=InferenceAutoScaling(max_replicas=2),
            ),
        )
    assert "at most 2 pod(s) on group h200" in str(raised.value)


def test_prefill_decode_reserves_its_nodes_and_scales_each_role(crd_schema):
    stack = new_stack()
    cluster, addons = _addons(stack)
    endpoint = gpt_oss_120b_endpoint(
        stack,
        addons,
        prefill_decode=InferencePrefillDecode(
            prefill_instance_type="ml.p5.48xlarge",
            decode_instance_type="ml.p5en.48xlarge",
            decode_auto_scaling=InferenceAutoScaling(min_replicas=1, max_replicas=2),
        ),
    )
    assert cluster.free_gpu_nodes("h200") == 0 and cluster.free_gpu_nodes("h100") == 0
    scaling = endpoint.manifest["spec"]["pdSpec"]["autoScalingSpec"]
    assert set(scaling) == {"decodingAutoScaling"}
    assert scaling["decodingAutoScaling"]["maxReplicaCount"] == 2
    jsonschema.validate(concretize(endpoint.manifest), crd_schema)
    assert undeclared_fields(endpoint.manifest, crd_schema) == []
    assert _warned(stack, "cdk-llm-serving:prefillDecodeImage")


# -- the planner decides P/D ---------------------------------------------------------------


def _build_llama(stack: Stack, addons: HyperPodServingAddons, workload: Workload):
    """Llama 3.3 70B (dense) in BF16 on the H200 group, for the planner's P/D verdict."""
    return gpt_oss_120b_endpoint(
        stack,
        addons,
        model="llama-3.3-70b",
        weight_format="bf16",
        weights=ModelData.from_s3_uri("s3://weights-bucket/llama-3.3-70b/"),
        config=VllmConfig(model="x", max_model_len=16384),
        instance_types=["ml.p5en.48xlarge"],
        name="llama-3-3-70b",
        workload=workload,
    )


def test_the_planner_turns_prefill_decode_on_where_it_pays(crd_schema):
    stack = new_stack()
    _, addons = _addons(stack)
    endpoint = _build_llama(
        stack, addons, Workload(input_tokens=8000, output_tokens=512, request_rate=4)
    )
    assert endpoint.disaggregation.pays, endpoint.disaggregation.reason
    pd = endpoint.manifest["spec"]["pdSpec"]
    assert pd["prefillSpec"]["replicas"] == 1 and pd["decodingSpec"]["replicas"] == 1
    jsonschema.validate(concretize(endpoint.manifest), crd_schema)


def test_the_planner_keeps_short_inputs_colocated():
    stack = new_stack()
    _, addons = _addons(stack)
    endpoint = _build_llama(
        stack, addons, Workload(input_tokens=1000, output_tokens=512, request_rate=4)
    )
    assert not endpoint.disaggregation.pays
    assert "1000 input tokens < 4,000" in endpoint.disaggregation.reason
    assert "pdSpec" not in endpoint.manifest["spec"]


def test_a_moe_model_stays_colocated():
    stack = new_stack()
    _, addons = _addons(stack)
    endpoint = gpt_oss_120b_endpoint(
        stack, addons, workload=Workload(input_tokens=8000, output_tokens=512, request_rate=4)
    )
    assert not endpoint.disaggregation.pays
    assert "pdSpec" not in endpoint.manifest["spec"]


def test_where_it_pays_but_one_node_is_all_there_is_a_warning_says_so():
    stack = new_stack()
    groups = [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu("h200", "ml.p5en.48xlarge", 1),
    ]
    _, addons = _addons(stack, groups)
    endpoint = _build_llama(
        stack, addons, Workload(input_tokens=8000, output_tokens=512, request_rate=4)
    )
    assert "pdSpec" not in endpoint.manifest["spec"]
    assert _warned(stack, "cdk-llm-serving:prefillDecodeNotPlaced")


def test_an_explicit_prefill_decode_the_planner_says_does_not_pay_is_warned():
    stack = new_stack()
    _, addons = _addons(stack)
    endpoint = gpt_oss_120b_endpoint(
        stack,
        addons,
        workload=Workload(input_tokens=8000, output_tokens=512, request_rate=4),
        prefill_decode=InferencePrefillDecode(
            prefill_instance_type="ml.p5en.48xlarge", decode_instance_type="ml.p5.48xlarge"
        ),
    )
    assert "pdSpec" in endpoint.manifest["spec"]
    assert _warned(stack, "cdk-llm-serving:prefillDecodeDoesNotPay")


# -- the reference app --------------------------------------------------------------------


def test_the_reference_operator_variant_caches_routes_and_turns_the_tier_on(
    inference_operator_template, crd_schema
):
    from tests.support.template_helpers import manifest_objects

    objects = manifest_objects(inference_operator_template, "GptOss120b")
    (config,) = [o for o in objects if o["kind"] == "InferenceEndpointConfig"]
    spec = config["spec"]
    assert spec["kvCacheSpec"]["l2CacheSpec"]["l2CacheBackend"] == "tieredstorage"
    assert spec["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "prefixaware"}
    jsonschema.validate(concretize(config), crd_schema)
    (cluster,) = [
        r
        for r in inference_operator_template["Resources"].values()
        if r["Type"] == "AWS::SageMaker::Cluster"
    ]
    _validate_against_cloudformation(cluster["Properties"]["TieredStorageConfig"])


def test_the_reference_operator_variant_renders_all_three_specs_where_the_planner_says_pd_pays(
    inference_operator_template, crd_schema
):
    """The variant's dense long-context endpoint renders kvCacheSpec,
    intelligentRoutingSpec and pdSpec (from its declared workload, not asked for), valid
    against the operator's CRD, each role on its own node of gpu-pd with the node's GPUs and
    EFA devices."""
    from tests.support.template_helpers import manifest_objects

    objects = manifest_objects(inference_operator_template, "Llama33")
    (config,) = [o for o in objects if o["kind"] == "InferenceEndpointConfig"]
    spec = config["spec"]
    assert set(SPECS) <= set(spec)
    jsonschema.validate(concretize(config), crd_schema)
    pd = spec["pdSpec"]
    for role in ("prefillSpec", "decodingSpec"):
        assert pd[role]["replicas"] == 1
        assert pd[role]["nodeSelector"] == {"node.kubernetes.io/instance-type": "ml.p4de.24xlarge"}
        assert pd[role]["resources"]["requests"] == {
            "nvidia.com/gpu": "8",
            "vpc.amazonaws.com/efa": "4",
        }
    assert pd["routingThreshold"] == 4096 and pd["topologySpec"] == {"sameAZ": True}
    assert spec["worker"]["image"].startswith("public.ecr.aws/deep-learning-containers/vllm:")
    (cluster,) = [
        r
        for r in inference_operator_template["Resources"].values()
        if r["Type"] == "AWS::SageMaker::Cluster"
    ]
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    assert groups["gpu-pd"]["InstanceCount"] == 2  # one prefill node, one decode node


def test_the_roles_pods_land_on_their_groups_and_match_kubernetes_schemas():
    from tests.support.hyperpod import landing_groups
    from tests.support.kubernetes_schemas import validate_core

    stack = new_stack()
    _, addons = _addons(stack)
    endpoint = gpt_oss_120b_endpoint(
        stack,
        addons,
        prefill_decode=InferencePrefillDecode(
            prefill_instance_type="ml.p5.48xlarge", decode_instance_type="ml.p5en.48xlarge"
        ),
    )
    pods = endpoint.pod_templates()
    assert set(pods) == {"inference-operator", "prefill", "decode"}
    groups = single_node_groups()

    def landing(pod: dict) -> list[str]:
        return landing_groups(pod, groups)

    assert landing(pods["prefill"]) == ["h100"]
    assert landing(pods["decode"]) == ["h200"]
    no_toleration = copy.deepcopy(pods["decode"])
    no_toleration["spec"]["tolerations"] = []
    assert landing(no_toleration) == []  # the check can fail: GPU groups are tainted
    for template in pods.values():
        validate_core({"apiVersion": "v1", "kind": "Pod", **template})


def test_the_reference_pd_endpoints_worker_flags_pass_aws_script_and_vllms_parser(
    inference_operator_template, tmp_path
):
    """The Llama 3.3 70B endpoint's SM_VLLM_* variables through AWS's real sagemaker_args.py,
    then vLLM 0.32's own parser: the flags each P/D role's worker starts with are vLLM's."""
    import os
    import subprocess
    import sys

    from tests.support.template_helpers import manifest_objects

    root = Path(__file__).resolve().parents[2]
    script = root.parent / "shared" / "aws-dlc-vllm" / "sagemaker_args.py"
    vllm_python = root / ".venv" / "vllm" / "bin" / "python"
    if not script.exists() or not vllm_python.exists():
        pytest.skip("needs ../shared/aws-dlc-vllm and .venv/vllm")
    (config,) = [
        o
        for o in manifest_objects(inference_operator_template, "Llama33")
        if o["kind"] == "InferenceEndpointConfig"
    ]
    env = {e["name"]: e["value"] for e in config["spec"]["worker"]["environmentVariables"]}
    done = subprocess.run(
        [sys.executable, str(script)],
        env={"PATH": os.environ.get("PATH", ""), **env},
        cwd=tmp_path,
        capture_output=True,
        check=True,
        timeout=60,
    )
    argv = [token for token in done.stdout.decode().split("\0") if token]
    program = (
        "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
        "from vllm.entrypoints.launchers.cli_args import make_arg_parser; "
        "a = make_arg_parser(FlexibleArgumentParser()).parse_args(sys.argv[1:]); "
        "print(a.model, a.tensor_parallel_size, a.max_model_len, a.served_model_name)"
    )
    parsed = subprocess.run(
        [str(vllm_python), "-c", program, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
        timeout=600,
    )
    assert parsed.returncode == 0, parsed.stderr[-2000:]
    assert parsed.stdout.strip().splitlines()[-1] == (
        "/opt/ml/model 8 32768 ['llama-3.3-70b-bf16-tp8']"
    )

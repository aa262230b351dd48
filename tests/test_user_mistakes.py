"""Every plausible mistake stops synth with one ConfigurationError naming the
property, the value and what is allowed. One row per kind of mistake, with the exact message."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3
from constructs import Construct

import cdk_llm_serving
from cdk_llm_serving import (
    BlueGreenDeployment,
    ConfigurationError,
    ContainerImage,
    InferenceComponentEndpoint,
    InstancePool,
    ModelData,
    ServingModel,
    TrafficShift,
    VllmPool,
    VllmPoolEndpoint,
)
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup, KubernetesTaint
from cdk_llm_serving.hyperpod.model_store import FsxModelStore
from cdk_llm_serving.planning.models import preset, weight_format
from cdk_llm_serving.planning.pool_file import PoolFile
from cdk_llm_serving.planning.sizing import ModelSizing
from cdk_llm_serving.sagemaker.inference_components import (
    ComponentSpecification,
    InferenceComponentOnPools,
)
from cdk_llm_serving.vllm import VllmConfig
from tests.support.builders import (
    IMAGE,
    int4_copies_on_two_g6e,
    new_stack,
    pool_endpoint,
    serving_model,
)
from tests.support.hyperpod import (
    deepseek_service,
    hyperpod_cluster,
    instance_groups,
    model_store,
    small_cluster,
)

BASE = VllmConfig(model="m", served_model_name="gpt-oss-20b", max_model_len=32768)
GROUPS = [HyperPodInstanceGroup.system(), HyperPodInstanceGroup.gpu("gpu", "ml.p5en.48xlarge", 2)]


def vllm_endpoint(**overrides: Any) -> VllmPoolEndpoint:
    props: dict[str, Any] = {
        "image": ContainerImage.from_ecr_uri(IMAGE),
        "model": "gpt-oss-20b",
        "config": BASE,
        "weights": {"bf16": ModelData.from_s3_uri("s3://w/gpt-oss-20b/")},
        "pools": ["ml.g6e.12xlarge"],
        **overrides,
    }
    return VllmPoolEndpoint(new_stack(), "Serving", **props)


def model_with(environment: dict[str, str], **overrides: Any) -> ServingModel:
    return serving_model(new_stack(), environment=environment, **overrides)


def endpoint_on(instance_type: str, environment: dict[str, str] | None = None) -> Any:
    stack = new_stack()
    model = serving_model(stack, environment=environment or {})
    return pool_endpoint(stack, model=model, pools=[InstancePool(instance_type)])


def vpc(stack: Stack, **props: Any) -> ec2.Vpc:
    return ec2.Vpc(stack, "Vpc", **props)


def isolated_only(stack: Stack) -> ec2.Vpc:
    return vpc(
        stack,
        max_azs=2,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="iso", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        ],
    )


def model_in_vpc() -> ServingModel:
    stack = new_stack()
    return serving_model(stack, vpc=isolated_only(stack))


def cluster(**overrides: Any) -> HyperPodEksCluster:
    stack = new_stack()
    props = {"instance_groups": GROUPS, "kubernetes_version": "1.33", **overrides}
    if callable(props.get("vpc")):
        props["vpc"] = props["vpc"](stack)
    return HyperPodEksCluster(stack, "HyperPod", **props)


def fsx_store(prefix: str, **overrides: Any) -> FsxModelStore:
    stack = new_stack()
    return FsxModelStore(
        stack,
        "Store",
        cluster=hyperpod_cluster(stack),
        weights_bucket=s3.Bucket.from_bucket_name(stack, "W", "weights-bucket"),
        weights_prefix=prefix,
        **overrides,
    )


def service(**overrides: Any) -> Any:
    stack = new_stack()
    cluster_, addons, store = small_cluster(stack)
    return deepseek_service(stack, cluster_, addons, store, **overrides)


def pool_file(tmp_path: Path, content: Any) -> PoolFile:
    path = tmp_path / "pools.json"
    path.write_text(json.dumps(content))
    return PoolFile.load(path)


def one_pool(**fields: Any) -> dict[str, Any]:
    pool = {"instance_type": "ml.g6e.12xlarge", "image_uri": IMAGE, "model_data_uri": None}
    return {
        "format": "cdk-llm-serving/pools",
        "version": 1,
        "job": "j",
        "goal": "cost",
        "pools": [{**pool, **fields}],
    }


def component(name: str) -> InferenceComponentOnPools:
    stack = new_stack()
    endpoint = InferenceComponentEndpoint(
        stack, "Endpoint", pools=[InstancePool("ml.g6e.12xlarge")]
    )
    spec = ComponentSpecification(
        "ml.g6e.12xlarge", serving_model(stack), accelerators=1, min_memory_mb=1024
    )
    return InferenceComponentOnPools(
        stack, "Component", endpoint=endpoint, specifications=[spec], component_name=name
    )


Case = tuple[str, Callable[..., Any], str]

#: (kind, the mistake, the exact problem it must produce)
CASES: list[Case] = [
    # -- once raw Python/jsii errors --------------------------------------------------------
    (
        "a model store namespace that is not DNS-1123",
        lambda: fsx_store("models/ds3", namespace="Models_NS"),
        "namespace = 'Models_NS': a Kubernetes namespace must be 1-63 lower-case letters, digits and '-', starting with a letter or digit and ending with a letter or digit; e.g. 'models-ns'",
    ),
    (
        "unknown model preset",
        lambda: preset("gpt-oss-21b"),
        "model = 'gpt-oss-21b': not one of the 11 model presets; closest: gpt-oss-20b, gpt-oss-120b",
    ),
    (
        "unknown weight format",
        lambda: weight_format("fp4"),
        "weight_format = 'fp4': weight formats must be one of bf16, fp8, nvfp4, mxfp4, int4",
    ),
    (
        "VPC without private subnets with egress",
        model_in_vpc,
        "vpc_subnets = 'subnet_type=PRIVATE_WITH_EGRESS': the VPC has no such subnets (There are no 'Private' subnet groups in this VPC. Available types: Isolated,Deprecated_Isolated); select subnets it has, e.g. SubnetSelection(subnet_type=SubnetType.PRIVATE_ISOLATED)",
    ),
    (
        "two configurations under one served name",
        lambda: vllm_endpoint(
            pools=[
                VllmPool("ml.g6e.12xlarge", config=BASE),
                VllmPool("ml.g6e.48xlarge", config=BASE.with_changes(max_model_len=16384)),
            ]
        ),
        "pools[1].config.served_model_name = 'gpt-oss-20b': pools[0] serves another configuration under this name; give each configuration its own served_model_name",
    ),
    (
        "pool file: a top-level list",
        lambda tmp_path: pool_file(tmp_path, []),
        "(top level) = []: must be a JSON object with format, version, job, goal and pools",
    ),
    (
        "pool file: null where a pool belongs",
        lambda tmp_path: pool_file(tmp_path, {**one_pool(), "pools": [None]}),
        "pools[0] = None: must be a pool object, not None",
    ),
    (
        "pool file: a number given as a string",
        lambda tmp_path: pool_file(tmp_path, one_pool(max_concurrency="24")),
        "pools[0].max_concurrency = '24': must be a number or null (not a string)",
    ),
    (
        "a string where an InstancePool belongs",
        lambda: pool_endpoint(pools=["ml.g6e.12xlarge"]),
        "pools[0] = 'ml.g6e.12xlarge': must be InstancePool, not a str",
    ),
    (
        "a misspelled keyword through **options",
        lambda: pool_endpoint().auto_scale(max_capacity=4, target_utilisation=0.7),
        "auto_scale.target_utilisation = 0.7: not an option; did you mean 'target_utilization'?",
    ),
    (
        "a list-like prop given as a string",
        lambda: pool_endpoint(pools="ml.g6e.12xlarge"),
        "pools = 'ml.g6e.12xlarge': must be a list, each element InstancePool; not a str",
    ),
    (
        "a misspelled endpoint option passed to a construct that wraps the endpoint",
        lambda: vllm_endpoint(endpont_name="serving"),
        "endpont_name = 'serving': not a prop of VllmPoolEndpoint; did you mean endpoint_name?",
    ),
    (
        "a string where a value type belongs",
        lambda: serving_model(new_stack(), model_data="s3://weights/x/"),
        "model_data = 's3://weights/x/': must be ModelData | None, not a str",
    ),
    (
        "a number given as a string",
        lambda: VllmConfig(model="m", max_model_len="8192").validate(),
        "max_model_len = '8192': must be int | None, not a str",
    ),
    (
        "a wrong type inside a value",
        lambda: pool_endpoint(pools=[InstancePool("ml.g6e.12xlarge", model="llama")]),
        "pools[0].model = 'llama': must be ServingModel | None, not a str",
    ),
    # -- Literal options checked from their type ------------------------------------------
    (
        "a goal that is not one",
        lambda: vllm_endpoint(pools=[VllmPool("ml.g6e.12xlarge", goal="througput")]),
        "pools[0].goal = 'througput': pool goals must be one of cost, latency, throughput",
    ),
    (
        "a start-up mode that is not one",
        lambda: service(startup="natve"),
        "startup = 'natve': start-up modes must be one of native, ray",
    ),
    (
        "an unknown add-on name",
        lambda: cluster(addon_versions={"vpc-cnii": "v1.20.0"}),
        "addon_versions = 'vpc-cnii': EKS add-ons must be one of aws-fsx-csi-driver, aws-secrets-store-csi-driver-provider, coredns, eks-pod-identity-agent, kube-proxy, vpc-cni",
    ),
    (
        "a routing strategy CloudFormation refuses",
        lambda: pool_endpoint(routing_strategy="KV_AWARE"),
        "routing_strategy = 'KV_AWARE': routing strategy must be one of LEAST_OUTSTANDING_REQUESTS, RANDOM, PREFIX_AWARE: the SageMaker API accepts KV_AWARE but CloudFormation's AWS::SageMaker::EndpointConfig schema does not, so the template would be refused (cfn-lint E3030)",
    ),
    (
        "a traffic shift that is not one",
        lambda: pool_endpoint(
            deployment=BlueGreenDeployment(traffic=TrafficShift("ALL_AT_ONE", Duration.minutes(5)))
        ),
        "deployment.traffic.type = 'ALL_AT_ONE': traffic shifts must be one of ALL_AT_ONCE, CANARY, LINEAR",
    ),
    (
        "no pools at all",
        lambda: vllm_endpoint(pools=[]),
        "pools = []: must list 1 to 5 pools, most preferred first",
    ),
    # -- what vLLM, SageMaker, EKS or Kubernetes refuse later -----------------------------
    (
        "a removed vLLM flag in SM_VLLM_*",
        lambda: model_with({"SM_VLLM_ENABLE_REASONING": "true"}),
        "environment['SM_VLLM_ENABLE_REASONING'] = 'true': --enable-reasoning was removed: --reasoning-parser alone turns reasoning parsing on",
    ),
    (
        "auto tool choice without a parser in SM_VLLM_*",
        lambda: model_with({"SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": "true"}),
        "environment['SM_VLLM_ENABLE_AUTO_TOOL_CHOICE'] = 'true': vLLM refuses automatic tool choice without SM_VLLM_TOOL_CALL_PARSER",
    ),
    (
        "the container's own port flag",
        lambda: model_with({"SM_VLLM_PORT": "8000"}),
        "environment['SM_VLLM_PORT'] = '8000': --port is the container's own: AWS's SageMaker vLLM container passes --port 8080 itself (aws/deep-learning-containers vllm/build_artifacts/sagemaker_entrypoint.sh); SageMaker sends requests to port 8080",
    ),
    (
        "an unknown vLLM flag",
        lambda: model_with({"SM_VLLM_MAX_MODEL_LENGTH": "8192"}),
        "environment['SM_VLLM_MAX_MODEL_LENGTH'] = '8192': not one of vLLM 0.33's 198 server flags; closest: max-model-len, max-log-len (vllm serve exits)",
    ),
    (
        "an unknown tool-call parser",
        lambda: VllmConfig(model="m", tool_call_parser="qwen3-coder").validate(),
        "tool_call_parser = 'qwen3-coder': not one of vLLM 0.33's 46 tool-call parsers; closest: qwen3_coder",
    ),
    (
        "an unknown reasoning parser",
        lambda: VllmConfig(model="m", reasoning_parser="deepseek-r1").validate(),
        "reasoning_parser = 'deepseek-r1': not one of vLLM 0.33's 30 reasoning parsers; closest: deepseek_r1, deepseek_v4, deepseek_v3",
    ),
    (
        "a quantization name that is not vLLM's",
        lambda: model_with({"SM_VLLM_QUANTIZATION": "nvfp4"}),
        "environment['SM_VLLM_QUANTIZATION'] = 'nvfp4': not one of vLLM 0.33's 26 quantization methods; closest: petit_nvfp4, mxfp4",
    ),
    (
        "a quantization that does not match the weights",
        lambda: model_with(
            {"SM_VLLM_QUANTIZATION": "fp8"}, sizing=ModelSizing("gpt-oss-20b", "int4")
        ),
        "environment['SM_VLLM_QUANTIZATION'] = 'fp8': the weights are int4: quantization must be awq_marlin",
    ),
    (
        "tensor parallelism in the environment above the pool's GPUs",
        lambda: endpoint_on("ml.g6e.12xlarge", {"SM_VLLM_TENSOR_PARALLEL_SIZE": "8"}),
        "pools[0].model.environment = {'SM_VLLM_TENSOR_PARALLEL_SIZE': '8'}: ml.g6e.12xlarge has 4 GPUs: tensor x pipeline x data parallel (8) must be at most 4",
    ),
    (
        "a CPU pool for a CUDA image",
        lambda: endpoint_on("ml.c5.xlarge"),
        "pools[0].instance_type = 'ml.c5.xlarge': has no NVIDIA GPU, but the model's image is a CUDA image (763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:server-sagemaker-cuda-v1): choose an ml.g* or ml.p* type, or an image built for this hardware",
    ),
    (
        "an Inferentia pool for a CUDA image",
        lambda: endpoint_on("ml.inf2.48xlarge"),
        "pools[0].instance_type = 'ml.inf2.48xlarge': has no NVIDIA GPU, but the model's image is a CUDA image (763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:server-sagemaker-cuda-v1): choose an ml.g* or ml.p* type, or an image built for this hardware",
    ),
    (
        "a Hugging Face id with network isolation",
        lambda: model_with({"SM_VLLM_MODEL": "openai/gpt-oss-20b"}),
        "environment['SM_VLLM_MODEL'] = 'openai/gpt-oss-20b': a Hugging Face Hub id needs the network, but network_isolation is on: put the weights in S3 (model_data) and point the variable at /opt/ml/model, or set network_isolation=False",
    ),
    (
        "an S3 URI naming an object",
        lambda: model_with(
            {}, model_data=ModelData.from_s3_uri("s3://weights/models/model.tar.gz")
        ),
        "model_data.prefix = 'models/model.tar.gz': must be the folder of uncompressed weights, not an archive: the model reads every file under the prefix as is (S3Prefix, CompressionType None); unpack it",
    ),
    (
        "an S3 prefix given as a full URI",
        lambda: fsx_store("s3://weights-bucket/models/ds3"),
        "weights_prefix = 's3://weights-bucket/models/ds3': give the key prefix under the bucket (e.g. 'models/llama/'), not a whole URI",
    ),
    (
        "a Kubernetes name that is not DNS-1123",
        lambda: service(name="DeepSeek_V3"),
        "name = 'DeepSeek_V3': a Kubernetes object name must be 1-63 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit; e.g. 'deepseek-v3'",
    ),
    (
        "a namespace that is not DNS-1123",
        lambda: service(namespace="Inference"),
        "namespace = 'Inference': a Kubernetes namespace must be 1-63 lower-case letters, digits and '-', starting with a letter or digit and ending with a letter or digit; e.g. 'inference'",
    ),
    (
        "a VPC in one Availability Zone for EKS",
        lambda: cluster(vpc=lambda s: vpc(s, max_azs=1)),
        "vpc = 'private subnets in 1 Availability Zone(s)': EKS needs subnets in at least two Availability Zones",
    ),
    (
        "a HyperPod cluster name breaking the pattern",
        lambda: cluster(cluster_name="my_cluster"),
        "cluster_name = 'my_cluster': a HyperPod cluster name must be 1-63 characters matching '[a-zA-Z0-9](-*[a-zA-Z0-9])*' (letters, digits and hyphens; no leading or trailing hyphen)",
    ),
    (
        "an inference component name breaking the pattern",
        lambda: component("my_component"),
        "component_name = 'my_component': an inference component name must be 1-63 characters matching '[a-zA-Z0-9]([\\\\-a-zA-Z0-9]*[a-zA-Z0-9])?' (letters, digits and hyphens; no leading or trailing hyphen)",
    ),
    (
        "a training plan ARN breaking the pattern",
        lambda: cluster(
            instance_groups=[
                HyperPodInstanceGroup.system(),
                HyperPodInstanceGroup.gpu(
                    "gpu", "ml.p5en.48xlarge", 2, training_plan_arn="arn:aws:sagemaker:x:1:plan/p"
                ),
            ]
        ),
        "instance_groups[1].training_plan_arn = 'arn:aws:sagemaker:x:1:plan/p': a SageMaker training plan ARN must match 'arn:aws[a-z\\\\-]*:sagemaker:[a-z0-9\\\\-]*:[0-9]{12}:training-plan/.*' (50-2048 characters)",
    ),
]


@pytest.mark.parametrize(("kind", "mistake", "expected"), CASES, ids=[c[0] for c in CASES])
def test_mistake_stops_with_one_clear_problem(kind, mistake, expected, tmp_path):
    with pytest.raises(ConfigurationError) as caught:
        mistake(tmp_path) if mistake.__code__.co_argcount else mistake()
    assert [str(problem) for problem in caught.value.problems] == [expected]


def test_a_served_name_like_org_model_becomes_a_valid_kubernetes_name():
    config = VllmConfig(model="x", served_model_name="deepseek-ai/DeepSeek-V3", max_model_len=32768)
    assert service(config=config).name == "deepseek-ai-deepseek-v3"


def test_every_problem_of_one_construct_comes_in_one_error():
    with pytest.raises(ConfigurationError) as caught:
        model_with(
            {"SM_VLLM_PORT": "8000", "SM_VLLM_ENABLE_REASONING": "true"},
            model_data=ModelData.from_s3_uri("s3://weights/models/model.tar.gz"),
        )
    assert [p.property for p in caught.value.problems] == [
        "model_data.prefix",
        "environment['SM_VLLM_PORT']",
        "environment['SM_VLLM_ENABLE_REASONING']",
    ]


def test_every_public_construct_checks_its_props_against_their_types():
    """New constructs follow the rule too: their __init__ goes through errors.checked_props."""
    constructs = [
        getattr(cdk_llm_serving, name)
        for name in cdk_llm_serving.__all__
        if isinstance(getattr(cdk_llm_serving, name), type)
        and issubclass(getattr(cdk_llm_serving, name), Construct)
    ]
    assert len(constructs) >= 10
    unchecked = [c.__name__ for c in constructs if not hasattr(c.__init__, "__wrapped__")]
    assert unchecked == []


def _cluster_with(*groups: HyperPodInstanceGroup) -> None:
    HyperPodEksCluster(
        new_stack(), "HyperPod", kubernetes_version="1.33", instance_groups=list(groups)
    )


def test_a_group_label_that_would_replace_the_librarys_own_is_refused():
    """Before: ``labels={ROLE_LABEL: "system"}`` on a GPU group replaced the role label, and the
    controllers' ``nodeSelector`` sent them to GPU nodes."""
    with pytest.raises(ConfigurationError) as caught:
        _cluster_with(
            HyperPodInstanceGroup.system(),
            HyperPodInstanceGroup.gpu(
                "gpu", "ml.p5en.48xlarge", 2, labels={"cdk-llm-serving/role": "system"}
            ),
        )
    assert [p.property for p in caught.value.problems] == [
        "instance_groups[1].labels['cdk-llm-serving/role']"
    ]
    # the same value is no replacement
    _cluster_with(
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu(
            "gpu", "ml.p5en.48xlarge", 2, labels={"cdk-llm-serving/role": "gpu"}
        ),
    )


def test_a_system_group_taint_the_controllers_do_not_tolerate_is_refused():
    with pytest.raises(ConfigurationError) as caught:
        _cluster_with(
            HyperPodInstanceGroup.system(taints=(KubernetesTaint("dedicated", "NoSchedule", "x"),)),
            HyperPodInstanceGroup.gpu("gpu", "ml.p5en.48xlarge", 2),
        )
    (problem,) = caught.value.problems
    assert problem.property == "instance_groups[0].taints"
    assert "would stay Pending" in str(problem)


def test_a_pipeline_parallel_size_the_placement_would_replace_is_refused():
    """Before: ``pipeline_parallel_size=4`` was dropped, and the replica ran tensor 8 alone."""
    with pytest.raises(ConfigurationError) as caught:
        service(config=VllmConfig(model="x", max_model_len=32768, pipeline_parallel_size=4))
    (problem,) = caught.value.problems
    assert problem.property == "config.pipeline_parallel_size"
    assert "placed as tensor 8 x pipeline 1 x data 1 on 1 node(s)" in str(problem)
    service(config=VllmConfig(model="x", max_model_len=32768, pipeline_parallel_size=1))


def test_an_fsx_store_smaller_than_the_weights_is_refused():
    """DeepSeek-V3 in BF16 takes about 1,250 GiB; a 1,200 GiB store cannot hold it."""
    stack = new_stack()
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=instance_groups(4)
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    store = model_store(stack, cluster, storage_capacity_gib=1200)
    with pytest.raises(ConfigurationError) as caught:
        deepseek_service(stack, cluster, addons, store, weight_format="bf16", nodes_per_replica=2)
    assert [p.property for p in caught.value.problems] == ["weights"]
    assert "the weights take 1" in str(caught.value.problems[0])


def test_copies_the_managed_instances_cannot_place_are_refused():
    """2 x g6e.12xlarge (4 GPUs each) place 8 one-GPU copies, not 9."""
    component = int4_copies_on_two_g6e()
    component.auto_scale_copies(max_copies=8, target_concurrent_requests_per_copy=4)
    with pytest.raises(ConfigurationError) as caught:
        int4_copies_on_two_g6e().auto_scale_copies(
            max_copies=9, target_concurrent_requests_per_copy=4
        )
    assert [str(p) for p in caught.value.problems] == [
        "max_copies = 9: at most 8: the endpoint's managed_instance_count allows 2 instance(s), "
        "and the specifications' GPUs and memory fit no more copies on them"
    ]


def test_a_copy_needing_more_memory_than_the_host_has_is_refused():
    with pytest.raises(ConfigurationError) as caught:
        int4_copies_on_two_g6e(min_memory_mb=400 * 1024)
    assert [p.property for p in caught.value.problems] == ["specifications[0].min_memory_mb"]

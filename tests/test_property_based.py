"""Any input to the main constructs either builds a template cfn-lint accepts or
raises ConfigurationError, never another exception (hypothesis over their props).

Each example draws which props to get wrong (often none, so valid inputs are built and
linted too), then a valid or a wrong value for each prop. Budget: 80 examples in all (~30 s here, most of it jsii and one cfn-lint run per test),
derandomized, within the suite's time; ``CDK_LLM_HYPOTHESIS_EXAMPLES=<per test>`` asks for
more (then randomized, and every accepted template is linted). Each example builds in its
own App (construct only); cfn-lint, the slow part, runs on the first accepted template.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pytest
from aws_cdk import Duration, Stack
from constructs import Construct
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdk_llm_serving import (
    BlueGreenDeployment,
    CapacitySize,
    ConfigurationError,
    ContainerImage,
    InstancePool,
    InstancePoolEndpoint,
    ModelData,
    RollingDeployment,
    TrafficShift,
    VllmPool,
    VllmPoolEndpoint,
)
from cdk_llm_serving._cdk.service_limits import limits
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup, KubernetesTaint
from cdk_llm_serving.vllm import VllmConfig
from tests.support.builders import IMAGE, new_stack, serving_model, template_of
from tests.support.hyperpod import deepseek_service, small_cluster
from tests.support.linting import lint_template

EXTRA = int(os.environ.get("CDK_LLM_HYPOTHESIS_EXAMPLES", "0"))
#: Accepted templates linted per test (all of them when more examples are asked for).
LINTED = 10_000 if EXTRA else 1

GPU_POOLS = ["ml.g6e.12xlarge", "ml.g6.12xlarge", "ml.p5.48xlarge", "ml.g6e.48xlarge"]
BAD_POOL_TYPES = ["ml.inf2.48xlarge", "ml.c5.xlarge", "ml.g6e.12xlarge ", "g6e.12xlarge", ""]
ENV_KEYS = [
    "SM_VLLM_TENSOR_PARALLEL_SIZE",
    "SM_VLLM_ENABLE_REASONING",
    "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE",
    "SM_VLLM_TOOL_CALL_PARSER",
    "SM_VLLM_QUANTIZATION",
    "SM_VLLM_PORT",
    "SM_VLLM_MODEL",
    "SM_VLLM_MAX_MODEL_LENGTH",
    "bad key",
]
ENV_VALUES = ["8192", "8", "-1", "true", "hermes", "hermes2", "nvfp4", "org/m", ""]


def budget(examples: int) -> settings:
    return settings(
        max_examples=EXTRA or examples,
        deadline=None,
        derandomize=not EXTRA,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


class Props:
    """Draws each prop valid, or wrong when the example chose to get it wrong."""

    def __init__(self, data: st.DataObject, fields: Sequence[str]) -> None:
        self.data = data
        self.broken = data.draw(st.sets(st.sampled_from(list(fields)), max_size=3), label="wrong")

    def __call__(
        self, field: str, valid: st.SearchStrategy[Any], wrong: st.SearchStrategy[Any]
    ) -> Any:
        return self.data.draw(wrong if field in self.broken else valid, label=field)


class Linted:
    """cfn-lint on the first accepted templates of one test."""

    def __init__(self) -> None:
        self.count = 0

    def check(self, stack: Stack) -> None:
        if self.count >= LINTED:
            return
        self.count += 1
        matches = lint_template(template_of(stack))
        assert not matches, "\n".join(str(match) for match in matches)


def any_pools(types: list[str]) -> st.SearchStrategy[Any]:
    """Wrong pool lists: bad types, strings instead of values, empty, too many, one string."""
    pool = st.builds(
        InstancePool,
        st.sampled_from(types),
        max_concurrency=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    )
    return st.one_of(
        st.lists(st.one_of(pool, st.sampled_from(types)), max_size=6),
        st.sampled_from(types),
    )


ENDPOINT_FIELDS = [
    "pools",
    "environment",
    "endpoint_name",
    "variant_name",
    "initial_instance_count",
    "routing_strategy",
    "metric_publish_frequency",
    "rollback_error_threshold",
    "deployment",
    "second_endpoint_name",
]
_BAKE = Duration.minutes(10)
#: Deployment policies SageMaker accepts for a fleet of 4+ instances, and ones it refuses
#: (``sagemaker/deployment.py``): shares outside botocore's, a step of the whole fleet, waits
#: longer than the timeout, a canary without its size.
VALID_DEPLOYMENTS = [
    None,
    RollingDeployment(maximum_batch_size=CapacitySize.percent(25)),
    BlueGreenDeployment(traffic=TrafficShift.canary(CapacitySize.percent(50))),
    BlueGreenDeployment(traffic=TrafficShift.linear(CapacitySize.percent(10), wait=_BAKE)),
]
WRONG_DEPLOYMENTS = [
    BlueGreenDeployment(traffic=TrafficShift.canary(CapacitySize.percent(60))),
    BlueGreenDeployment(traffic=TrafficShift.linear(CapacitySize.percent(5))),
    BlueGreenDeployment(traffic=TrafficShift.canary(CapacitySize.instances(10))),
    RollingDeployment(maximum_batch_size=CapacitySize.instances(10)),
    RollingDeployment(maximum_batch_size=CapacitySize.percent(80)),
    BlueGreenDeployment(traffic=TrafficShift("CANARY", _BAKE)),
    BlueGreenDeployment(
        traffic=TrafficShift.all_at_once(bake=Duration.hours(1)),
        maximum_execution_timeout=Duration.minutes(30),
    ),
]


def test_instance_pool_endpoint_builds_or_refuses_with_configuration_error():
    linted = Linted()
    routing = list(limits("ProductionVariantRoutingConfig", "RoutingStrategy").enum)
    valid_pools = st.lists(st.sampled_from(GPU_POOLS), min_size=1, max_size=3, unique=True).map(
        lambda types: [InstancePool(t, max_concurrency=8.0) for t in types]
    )

    @budget(25)
    @given(data=st.data())
    def build(data: st.DataObject) -> None:
        prop = Props(data, ENDPOINT_FIELDS)
        pools = prop("pools", valid_pools, any_pools(GPU_POOLS + BAD_POOL_TYPES))
        environment = prop(
            "environment",
            st.sampled_from([{}, {"SM_VLLM_MAX_MODEL_LEN": "8192"}]),
            st.dictionaries(st.sampled_from(ENV_KEYS), st.sampled_from(ENV_VALUES), max_size=3),
        )
        options = {
            "endpoint_name": prop(
                "endpoint_name",
                st.sampled_from([None, "serving", "llm-serving-1"]),
                st.text(max_size=70),
            ),
            "variant_name": prop("variant_name", st.just("AllTraffic"), st.text(max_size=70)),
            "initial_instance_count": prop(
                "initial_instance_count", st.integers(4, 10), st.integers(-2, 0)
            ),
            "routing_strategy": prop(
                "routing_strategy", st.sampled_from(routing), st.sampled_from(["RANDOMLY", ""])
            ),
            "metric_publish_frequency": prop(
                "metric_publish_frequency", st.just(60), st.sampled_from([7, 0, 61])
            ),
            "rollback_error_threshold": prop(
                "rollback_error_threshold", st.integers(1, 50), st.integers(-3, 0)
            ),
            "deployment": prop(
                "deployment", st.sampled_from(VALID_DEPLOYMENTS), st.sampled_from(WRONG_DEPLOYMENTS)
            ),
        }
        # A second endpoint of the app: another name, or the first's in another case.
        second = prop(
            "second_endpoint_name", st.sampled_from([None, "other-1"]), st.just("SERVING")
        )
        stack = new_stack()
        try:
            model = serving_model(stack, environment=environment)
            InstancePoolEndpoint(stack, "Endpoint", model=model, pools=pools, **options)
            if second is not None:
                if second == "SERVING":
                    second = (options["endpoint_name"] or "serving").upper()
                InstancePoolEndpoint(
                    stack,
                    "Second",
                    model=model,
                    pools=[InstancePool("ml.g6e.12xlarge", max_concurrency=8.0)],
                    endpoint_name=second,
                )
        except ConfigurationError:
            return
        linted.check(stack)

    build()


VLLM_FIELDS = [
    "pools",
    "weights",
    "model",
    "served_model_name",
    "max_model_len",
    "tool_call_parser",
    "reasoning_parser",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "extra_flags",
]
WEIGHTS = {
    "bf16": ModelData.from_s3_uri("s3://weights/gpt-oss-20b/"),
    "int4": ModelData.from_s3_uri("s3://weights/gpt-oss-20b-int4/"),
}


def test_vllm_pool_endpoint_builds_or_refuses_with_configuration_error():
    linted = Linted()
    wrong_pool = st.builds(
        VllmPool,
        st.sampled_from(GPU_POOLS + BAD_POOL_TYPES),
        goal=st.sampled_from(["latency", "throughput", "througput"]),
        weight_format=st.sampled_from([None, "int4", "fp4"]),
    )
    wrong_weights = st.dictionaries(
        st.sampled_from(["bf16", "int4", "fp4"]),
        st.sampled_from(["s3://weights/x/", "s3://weights/x/model.tar.gz", "w/x"]).map(
            ModelData.from_s3_uri
        ),
        max_size=3,
    )

    @budget(30)
    @given(data=st.data())
    def build(data: st.DataObject) -> None:
        prop = Props(data, VLLM_FIELDS)
        pools = prop(
            "pools",
            st.lists(
                st.one_of(
                    st.sampled_from(GPU_POOLS),
                    st.builds(VllmPool, st.sampled_from(GPU_POOLS), goal=st.just("throughput")),
                ),
                min_size=1,
                max_size=3,
                unique_by=lambda p: p if isinstance(p, str) else p.instance_type,
            ),
            st.one_of(st.lists(wrong_pool, max_size=6), st.sampled_from(GPU_POOLS)),
        )
        base = VllmConfig(
            model="m",
            served_model_name=prop(
                "served_model_name", st.just("gpt-oss-20b"), st.sampled_from(["a b", ""])
            ),
            max_model_len=prop("max_model_len", st.integers(1024, 131072), st.integers(-1, 0)),
            tool_call_parser=prop(
                "tool_call_parser", st.sampled_from([None, "openai"]), st.just("hermes2")
            ),
            reasoning_parser=prop(
                "reasoning_parser", st.sampled_from([None, "openai_gptoss"]), st.just("gptoss")
            ),
            gpu_memory_utilization=prop(
                "gpu_memory_utilization", st.sampled_from([None, 0.9]), st.floats(-1, 0)
            ),
            kv_cache_dtype=prop("kv_cache_dtype", st.sampled_from([None, "fp8"]), st.just("fp16")),
            extra_flags=prop(
                "extra_flags",
                st.sampled_from([{}, {"enforce-eager": True}, {"max-num-batched-tokens": 8192}]),
                st.dictionaries(
                    st.sampled_from(["enable-reasoning", "port", "--x", "max-num-seq"]),
                    st.one_of(st.booleans(), st.integers(1, 64)),
                    min_size=1,
                    max_size=2,
                ),
            ),
        )
        weights = prop("weights", st.just(WEIGHTS), wrong_weights)
        model = prop("model", st.just("gpt-oss-20b"), st.sampled_from(["gpt-oss-21b", ""]))
        stack = new_stack()
        try:
            VllmPoolEndpoint(
                stack,
                "Serving",
                image=ContainerImage.from_ecr_uri(IMAGE),
                model=model,
                config=base,
                weights=weights,
                pools=pools,
            )
        except ConfigurationError:
            return
        linted.check(stack)

    build()


SERVICE_FIELDS = [
    "served_model_name",
    "max_model_len",
    "tool_call_parser",
    "weight_format",
    "startup",
    "replicas",
    "nodes_per_replica",
    "name",
    "namespace",
    "model",
]


def test_vllm_multi_node_service_builds_or_refuses_with_configuration_error():
    """One cluster for every example (each service in a scope of its own), linted at the end."""
    stack = new_stack()
    cluster, addons, store = small_cluster(stack)
    built: list[str] = []

    @budget(15)
    @given(data=st.data())
    def build(data: st.DataObject) -> None:
        prop = Props(data, SERVICE_FIELDS)
        config = VllmConfig(
            model="x",
            served_model_name=prop(
                "served_model_name",
                st.sampled_from([None, "deepseek-ai/DeepSeek-V3", "ds3"]),
                st.just("Ds 3"),
            ),
            max_model_len=prop("max_model_len", st.just(32768), st.integers(-1, 0)),
            tool_call_parser=prop(
                "tool_call_parser", st.sampled_from([None, "deepseek_v3"]), st.just("deepseekv3")
            ),
        )
        props = {
            "config": config,
            "weight_format": prop(
                "weight_format", st.just("fp8"), st.sampled_from(["fp4", "int8"])
            ),
            "startup": prop("startup", st.sampled_from(["native", "ray"]), st.just("natve")),
            "replicas": prop("replicas", st.just(1), st.integers(-1, 0)),
            "nodes_per_replica": prop("nodes_per_replica", st.none(), st.integers(-1, 0)),
            "name": prop(
                "name", st.none(), st.sampled_from(["DeepSeek_V3", "-x", "a" * 70, "ds/3"])
            ),
            "namespace": prop(
                "namespace",
                st.sampled_from([None, "inference"]),
                st.sampled_from(["Inference", "n_s"]),
            ),
            "model": prop("model", st.just("deepseek-v3"), st.just("deepseek-v9")),
        }
        scope = Construct(stack, f"Example{len(built)}")
        built.append("tried")
        try:
            deepseek_service(scope, cluster, addons, store, **props)
        except ConfigurationError:
            return
        built[-1] = "built"

    build()
    if "built" in built:
        matches = lint_template(template_of(stack))
        assert not matches, "\n".join(str(match) for match in matches)


CLUSTER_FIELDS = [
    "gpu_taints",
    "gpu_labels",
    "training_plan_arn",
    "admin_role_arns",
    "kubernetes_version",
    "addon_versions",
]
ACCOUNT = "123456789012"


def test_hyperpod_cluster_builds_or_refuses_with_configuration_error():
    """Groups with their own labels and taints (``NoExecute`` too), training plans and admin
    roles by ARN (other regions, partitions, services), versions and add-on pins."""
    linted = Linted()

    @budget(10)
    @given(data=st.data())
    def build(data: st.DataObject) -> None:
        prop = Props(data, CLUSTER_FIELDS)
        taints = prop(
            "gpu_taints",
            st.sampled_from([None, (KubernetesTaint("example.com/evict", "NoExecute", "llm"),)]),
            st.sampled_from(
                [
                    (KubernetesTaint("example.com/x", "NoRun"),),  # type: ignore[arg-type]
                    (KubernetesTaint("bad key!", "NoSchedule"),),
                ]
            ),
        )
        labels = prop(
            "gpu_labels",
            st.sampled_from([None, {"team": "llm"}]),
            st.sampled_from([{"bad key!": "x"}, {"team": "a" * 70}]),
        )
        plan = prop(
            "training_plan_arn",
            st.sampled_from([None, f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-plan/p5"]),
            st.sampled_from(
                [
                    f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:training-plan/p5",
                    f"arn:aws-cn:sagemaker:cn-north-1:{ACCOUNT}:training-plan/p5",
                    "training-plan/p5",
                ]
            ),
        )
        admins = prop(
            "admin_role_arns",
            st.sampled_from([(), (f"arn:aws:iam::{ACCOUNT}:role/Admin",)]),
            st.sampled_from(
                [
                    (f"arn:aws-us-gov:iam::{ACCOUNT}:role/Admin",),
                    (f"arn:aws:sts::{ACCOUNT}:assumed-role/Admin/me",),
                    ("Admin",),
                ]
            ),
        )
        version = prop(
            "kubernetes_version", st.sampled_from([None]), st.sampled_from(["1.9", "1.99", "v1"])
        )
        addon_versions = prop(
            "addon_versions",
            st.just(None),
            st.sampled_from([{"vpc-cni": "v1.19.0"}, {"kube-proxy": "v1.20.0-eksbuild.1"}]),
        )
        groups = [
            HyperPodInstanceGroup.system(),
            HyperPodInstanceGroup.gpu(
                "gpu",
                "ml.p5en.48xlarge",
                2,
                labels=labels,
                taints=taints,
                training_plan_arn=plan,
            ),
        ]
        stack = new_stack()
        try:
            HyperPodEksCluster(
                stack,
                "HyperPod",
                instance_groups=groups,
                admin_role_arns=admins,
                kubernetes_version=version,
                addon_versions=addon_versions,
            )
        except ConfigurationError:
            return
        linted.check(stack)

    build()


def test_the_property_tests_can_fail():
    """Another exception than ConfigurationError escapes, and fails the property."""

    @budget(3)
    @given(data=st.data())
    def build(data: st.DataObject) -> None:
        prop = Props(data, ["pools"])
        pools = prop("pools", st.just(["ml.g6e.12xlarge"]), st.just("x"))
        raise AttributeError(pools)

    with pytest.raises(AttributeError):
        build()

"""Builders for small test stacks (construct only; synthesize only when a test needs a template)."""

from __future__ import annotations

from typing import Any

from aws_cdk import Environment, Stack

from cdk_llm_serving import (
    ContainerImage,
    InferenceComponentEndpoint,
    InstancePool,
    InstancePoolEndpoint,
    ModelData,
    ServingModel,
    VllmPoolEndpoint,
)
from cdk_llm_serving.planning.sizing import ModelSizing
from cdk_llm_serving.sagemaker.inference_components import (
    ComponentSpecification,
    InferenceComponentOnPools,
)
from cdk_llm_serving.vllm import VllmConfig
from tests.support.app import new_app

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:server-sagemaker-cuda-v1"


def new_stack(name: str = "Test", **context: object) -> Stack:
    return Stack(new_app(**context), name, env=Environment(region="us-east-1"))


def serving_model(stack: Stack, id: str = "Model", **overrides: Any) -> ServingModel:
    props: dict[str, Any] = {
        "image": ContainerImage.from_ecr_uri(IMAGE),
        "model_data": ModelData.from_s3_uri("s3://weights-bucket/model/"),
        "served_model_name": id.lower(),
    }
    props.update(overrides)
    return ServingModel(stack, id, **props)


def pool_endpoint(
    stack: Stack | None = None, *, pools: list[InstancePool] | None = None, **overrides: Any
) -> InstancePoolEndpoint:
    stack = stack or new_stack()
    model = overrides.pop("model") if "model" in overrides else serving_model(stack)
    if pools is None:
        pools = [InstancePool("ml.p5.48xlarge"), InstancePool("ml.g6e.12xlarge")]
    return InstancePoolEndpoint(stack, "Endpoint", model=model, pools=pools, **overrides)


def sized_pools() -> list[InstancePool]:
    """Two pools with what one instance of each sustains (autoscaling and alarms need it)."""
    return [
        InstancePool("ml.p5.48xlarge", max_concurrency=20),
        InstancePool("ml.g6e.12xlarge", max_concurrency=8),
    ]


def template_of(stack: Stack) -> dict:
    assembly = stack.node.root.synth()  # type: ignore[attr-defined]
    return assembly.get_stack_by_name(stack.stack_name).template


#: A gpt-oss-20b vLLM configuration and its BF16 and 4-bit weights, for VllmPoolEndpoint tests.
BASE = VllmConfig(
    model="ignored",
    served_model_name="gpt-oss-20b",
    max_model_len=32768,
    gpu_memory_utilization=0.9,
)
WEIGHTS = {
    "bf16": ModelData.from_s3_uri("s3://weights-bucket/bf16/"),
    "int4": ModelData.from_s3_uri("s3://weights-bucket/int4/"),
}


def endpoint(stack, pools, weights=WEIGHTS, config=BASE, **props):
    return VllmPoolEndpoint(
        stack,
        "Serving",
        image=ContainerImage.from_ecr_uri(IMAGE),
        model="gpt-oss-20b",
        config=config,
        weights=weights,
        pools=pools,
        **props,
    )


def int4_copies_on_two_g6e(**spec: Any) -> InferenceComponentOnPools:
    """gpt-oss-20b INT4 copies (1 GPU, 16 GiB each unless ``spec`` says otherwise) on an
    inference-component endpoint of at most 2 x ml.g6e.12xlarge (4 GPUs each: 8 copies)."""
    stack = new_stack()
    model = serving_model(stack, sizing=ModelSizing("gpt-oss-20b", "int4", max_context=32768))
    host = InferenceComponentEndpoint(
        stack, "Endpoint", pools=[InstancePool("ml.g6e.12xlarge")], managed_instance_count=(1, 2)
    )
    requirements = {"accelerators": 1, "min_memory_mb": 16384, **spec}
    return InferenceComponentOnPools(
        stack,
        "Component",
        endpoint=host,
        specifications=[ComponentSpecification("ml.g6e.12xlarge", model, **requirements)],
    )

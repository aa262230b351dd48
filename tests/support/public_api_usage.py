"""The public surface as a consumer writes it; ``make test`` type-checks this file with mypy.

``build`` also runs in ``tests/sagemaker/test_public_api.py``, so it cannot rot.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from cdk_llm_serving import (
    ContainerImage,
    InstancePool,
    InstancePoolEndpoint,
    ModelData,
    ModelSizing,
    ServingModel,
    default_catalog,
    plan,
)

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:server-sagemaker-cuda-v1"


def build(stack: Stack) -> tuple[InstancePoolEndpoint, cloudwatch.Metric]:
    model = ServingModel(
        stack,
        "Model",
        image=ContainerImage.from_ecr_uri(IMAGE),
        model_data=ModelData.from_s3_uri("s3://my-weights-bucket/gpt-oss-20b/"),
        sizing=ModelSizing("gpt-oss-20b", "bf16", max_context=8192),
    )
    bucket = s3.Bucket(stack, "Extra")
    bucket.grant_read(model)  # ServingModel is an iam.IGrantable
    endpoint = InstancePoolEndpoint(
        stack, "Endpoint", model=model, pools=[InstancePool("ml.g6e.12xlarge")]
    )
    endpoint.grant_invoke(iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal()))
    metric = endpoint.metric_invocations(statistic="Average", color="#ff0000")
    assert plan("gpt-oss-20b", "bf16", "ml.g6e.12xlarge").nodes == 1
    assert "ml.g6e.12xlarge" in default_catalog()
    return endpoint, metric

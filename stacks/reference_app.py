"""The reference app's stacks and the context keys they read."""

from __future__ import annotations

from aws_cdk import App, Environment, Stack

from .gpt_oss_pool_endpoint_stack import GptOssPoolEndpointStack, GptOssPoolSettings
from .hyperpod_reference_stack import HyperPodReferenceStack, HyperPodSettings

#: Context keys (``cdk.json`` or ``-c key=value``) and their placeholder defaults.
CONTEXT_DEFAULTS: dict[str, str] = {
    "llm-serving:region": "us-west-2",
    "llm-serving:gpt-oss-20b:image-uri": "",
    "llm-serving:gpt-oss-20b:weights-uri": "s3://cdk-llm-serving-placeholder-weights/gpt-oss-20b/",
    "llm-serving:gpt-oss-20b:int4-weights-uri": "s3://cdk-llm-serving-placeholder-weights/gpt-oss-20b-int4/",
    "llm-serving:reference-moe:weights-uri": "s3://cdk-llm-serving-placeholder-weights/reference-2.4t-a95b-nvfp4/",
    "llm-serving:hyperpod:admin-role-arns": "",
    "llm-serving:hyperpod:chart-dir": "",
    "llm-serving:reference-moe:vllm-image": "",
    "llm-serving:reference-moe:max-replicas": "1",
    "llm-serving:hyperpod:inference-operator": "false",
    "llm-serving:gpt-oss-120b:weights-uri": "s3://cdk-llm-serving-placeholder-weights/gpt-oss-120b/",
    "llm-serving:hyperpod:gpu-az-id": "",
}


def _context(app: App, key: str) -> str:
    value = app.node.try_get_context(key)
    return str(value) if value not in (None, "") else CONTEXT_DEFAULTS[key]


def add_reference_stacks(app: App) -> list[Stack]:
    """Add every reference stack to ``app``; needs no AWS account (region only)."""
    region = _context(app, "llm-serving:region")
    env = Environment(region=region)
    image_uri = app.node.try_get_context("llm-serving:gpt-oss-20b:image-uri") or ""
    pool_stack = GptOssPoolEndpointStack(
        app,
        "GptOss20bPoolEndpoint",
        env=env,
        description="cdk-llm-serving reference: GPT-OSS-20B-class model on three SageMaker instance pools",
        settings=GptOssPoolSettings(
            image_uri=image_uri,
            weights_uri=_context(app, "llm-serving:gpt-oss-20b:weights-uri"),
            quantized_weights_uri=_context(app, "llm-serving:gpt-oss-20b:int4-weights-uri"),
        ),
    )
    admins = tuple(
        arn for arn in _context(app, "llm-serving:hyperpod:admin-role-arns").split(",") if arn
    )
    hyperpod_stack = HyperPodReferenceStack(
        app,
        "ReferenceMoeHyperPod",
        env=env,
        description="cdk-llm-serving reference: HyperPod EKS cluster for a 2.4T-parameter MoE in NVFP4",
        settings=HyperPodSettings(
            weights_uri=_context(app, "llm-serving:reference-moe:weights-uri"),
            admin_role_arns=admins,
            hyperpod_chart_dir=_context(app, "llm-serving:hyperpod:chart-dir") or None,
            vllm_image=_context(app, "llm-serving:reference-moe:vllm-image") or None,
            max_replicas=int(_context(app, "llm-serving:reference-moe:max-replicas")),
            inference_operator=_context(app, "llm-serving:hyperpod:inference-operator").lower()
            == "true",
            single_node_weights_uri=_context(app, "llm-serving:gpt-oss-120b:weights-uri"),
            gpu_availability_zone_id=_context(app, "llm-serving:hyperpod:gpu-az-id") or None,
        ),
    )
    return [pool_stack, hyperpod_stack]

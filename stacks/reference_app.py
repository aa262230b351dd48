"""The reference app's stacks and the context keys they read."""

from __future__ import annotations

from aws_cdk import App, Environment, Stack

from cdk_llm_serving.errors import Problems

from .gpt_oss_pool_endpoint_stack import GptOssPoolEndpointStack, GptOssPoolSettings
from .hipaa_review import acknowledge_hyperpod_stack, acknowledge_pool_stack
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
    "llm-serving:reference-moe:scale-to-zero": "false",
    "llm-serving:reference-moe:prefix-routing": "false",
    "llm-serving:reference-moe:gpu-instance-type": "ml.p6-b200.48xlarge",
    "llm-serving:hyperpod:inference-operator": "false",
    "llm-serving:gpt-oss-120b:weights-uri": "s3://cdk-llm-serving-placeholder-weights/gpt-oss-120b/",
    "llm-serving:llama-3.3-70b:weights-uri": "s3://cdk-llm-serving-placeholder-weights/llama-3.3-70b/",
    "llm-serving:hyperpod:gpu-az-id": "",
    "llm-serving:hyperpod:nodes-ready-minutes": "",
}


#: Bucket names of the placeholders: anyone can register them, so nothing deploys from them.
PLACEHOLDER_BUCKET_PREFIX = "cdk-llm-serving-placeholder-"
#: Context key that lets the reference app synthesize with placeholder buckets (``make synth``).
ALLOW_PLACEHOLDERS = "llm-serving:allow-placeholders"
_WEIGHT_KEYS = (
    "llm-serving:gpt-oss-20b:weights-uri",
    "llm-serving:gpt-oss-20b:int4-weights-uri",
    "llm-serving:reference-moe:weights-uri",
)
#: The inference-operator variant's weights (refused only when the variant is on).
_OPERATOR_WEIGHT_KEYS = (
    "llm-serving:gpt-oss-120b:weights-uri",
    "llm-serving:llama-3.3-70b:weights-uri",
)


def _refuse_placeholders(app: App) -> None:
    """A placeholder bucket can be squatted: refuse it unless the app says it only inspects.

    Bucket names are global: whoever creates ``cdk-llm-serving-placeholder-weights`` first
    would serve their weights to a deployment that kept the default
    (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html: names are unique
    across all accounts in a partition).
    """
    if str(app.node.try_get_context(ALLOW_PLACEHOLDERS)).lower() == "true":
        return
    problems = Problems("reference app context")
    keys: tuple[str, ...] = _WEIGHT_KEYS
    if _context(app, "llm-serving:hyperpod:inference-operator").lower() == "true":
        keys += _OPERATOR_WEIGHT_KEYS  # read only by that variant
    for key in keys:
        uri = _context(app, key)
        if uri.removeprefix("s3://").startswith(PLACEHOLDER_BUCKET_PREFIX):
            problems.add(
                key,
                uri,
                "is a placeholder bucket anyone can register: set your own s3://bucket/prefix/, "
                f"or pass -c {ALLOW_PLACEHOLDERS}=true to synthesize for inspection only",
            )
    problems.raise_if_any()


def _context(app: App, key: str) -> str:
    value = app.node.try_get_context(key)
    return str(value) if value not in (None, "") else CONTEXT_DEFAULTS[key]


def _minutes(app: App, key: str) -> int | None:
    """A whole number of minutes from the context, or ``None`` when unset."""
    text = _context(app, key)
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        problems = Problems("reference app context")
        problems.add(key, text, "a whole number of minutes, at least 1")
        problems.raise_if_any()
    return int(text)


def add_reference_stacks(app: App) -> list[Stack]:
    """Add every reference stack to ``app``; needs no AWS account (region only)."""
    _refuse_placeholders(app)
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
            gpu_instance_type=_context(app, "llm-serving:reference-moe:gpu-instance-type"),
            admin_role_arns=admins,
            hyperpod_chart_dir=_context(app, "llm-serving:hyperpod:chart-dir") or None,
            vllm_image=_context(app, "llm-serving:reference-moe:vllm-image") or None,
            max_replicas=int(_context(app, "llm-serving:reference-moe:max-replicas")),
            scale_to_zero=_context(app, "llm-serving:reference-moe:scale-to-zero").lower()
            == "true",
            prefix_routing=_context(app, "llm-serving:reference-moe:prefix-routing").lower()
            == "true",
            inference_operator=_context(app, "llm-serving:hyperpod:inference-operator").lower()
            == "true",
            single_node_weights_uri=_context(app, "llm-serving:gpt-oss-120b:weights-uri"),
            long_context_weights_uri=_context(app, "llm-serving:llama-3.3-70b:weights-uri"),
            gpu_availability_zone_id=_context(app, "llm-serving:hyperpod:gpu-az-id") or None,
            nodes_ready_minutes=_minutes(app, "llm-serving:hyperpod:nodes-ready-minutes"),
        ),
    )
    acknowledge_pool_stack(pool_stack)
    acknowledge_hyperpod_stack(hyperpod_stack)
    return [pool_stack, hyperpod_stack]

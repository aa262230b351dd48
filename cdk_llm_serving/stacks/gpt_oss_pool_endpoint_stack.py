"""Reference: a ~20B open-weight model (GPT-OSS-20B class) on three instance pools."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, CfnOutput, Stack, Validations
from constructs import Construct

from ..constructs import ContainerImage, InstancePool, InstancePoolEndpoint, ModelData, PoolEndpointAlarms, PoolEndpointDashboard, ServingModel
from ..planning.sizing import ModelSizing

#: AWS's vLLM deep-learning container for SageMaker (account 763104351884 hosts the DLCs).
VLLM_SAGEMAKER_IMAGE = "763104351884.dkr.ecr.{region}.amazonaws.com/vllm:server-sagemaker-cuda-v1"


@dataclass(frozen=True)
class GptOssPoolSettings:
    """What the reference deployment reads from ``cdk.json`` context (placeholders by default)."""

    image_uri: str
    weights_uri: str
    quantized_weights_uri: str
    max_model_len: int = 32768
    max_instances: int = 4


class GptOssPoolEndpointStack(Stack):
    """Full weights on two 4-GPU pools (L40S, then L4), a 4-bit copy on a one-GPU fallback.

    The full weights are a BF16 copy; each model declares its sizing, so synth fails if a
    pool cannot hold its copy, and the endpoint's timeouts follow the planner's estimate.

    Every copy names itself in responses (``gpt-oss-20b`` / ``gpt-oss-20b-int4``), so the
    ``model`` field of a Chat Completions response tells which pool answered.
    """

    def __init__(self, scope: Construct, id: str, *, settings: GptOssPoolSettings, **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        image = ContainerImage.from_ecr_uri(settings.image_uri)

        def vllm_environment(tensor_parallel_size: int) -> dict[str, str]:
            return {
                "SM_VLLM_MODEL": "/opt/ml/model",
                "SM_VLLM_TENSOR_PARALLEL_SIZE": str(tensor_parallel_size),
                "SM_VLLM_MAX_MODEL_LEN": str(settings.max_model_len),
                "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
            }

        full = ServingModel(
            self,
            "FullWeights",
            image=image,
            model_data=ModelData.from_s3_uri(settings.weights_uri),
            served_model_name="gpt-oss-20b",
            environment=vllm_environment(tensor_parallel_size=4),
            sizing=ModelSizing("gpt-oss-20b", "bf16", max_context=settings.max_model_len),
        )
        quantized = ServingModel(
            self,
            "Int4Weights",
            image=image,
            model_data=ModelData.from_s3_uri(settings.quantized_weights_uri),
            served_model_name="gpt-oss-20b-int4",
            environment=vllm_environment(tensor_parallel_size=1),
            sizing=ModelSizing("gpt-oss-20b", "int4", max_context=settings.max_model_len),
        )
        self.endpoint = InstancePoolEndpoint(
            self,
            "Endpoint",
            model=full,
            pools=[
                InstancePool("ml.g6e.12xlarge"),
                InstancePool("ml.g6.12xlarge"),
                InstancePool("ml.g6e.2xlarge", model=quantized),
            ],
        )
        # Pool capacities come from the planner (each model declares its sizing).
        self.endpoint.auto_scale(min_capacity=1, max_capacity=settings.max_instances)
        self.alarms = PoolEndpointAlarms(self, "Alarms", endpoint=self.endpoint)
        self.dashboard = PoolEndpointDashboard(
            self, "Dashboard", endpoint=self.endpoint, alarms=[*self.alarms.alarms, *self.endpoint.rollback_alarms]
        )
        for serving_model in (full, quantized):
            Validations.of(serving_model).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-SM1",
                    reason="The containers run with network isolation: SageMaker fetches the weights for them and they reach nothing else, so a VPC adds no protection here.",
                )
            )
        CfnOutput(self, "EndpointName", value=self.endpoint.endpoint_name, description="SageMaker endpoint name")
        CfnOutput(self, "OpenAIBaseUrl", value=self.endpoint.openai_base_url, description="OpenAI-compatible base URL (bearer token: SigV4-presigned CallWithBearerToken)")

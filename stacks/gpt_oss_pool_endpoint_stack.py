"""Reference: a ~20B open-weight model (GPT-OSS-20B class) on three instance pools, declared once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from cdk_llm_serving import (
    ContainerImage,
    InstanceType,
    ModelData,
    PoolEndpointAlarms,
    PoolEndpointDashboard,
    VllmConfig,
    VllmPool,
    VllmPoolEndpoint,
    WeightFormat,
)
from cdk_llm_serving._cdk.alarm_topic import encrypted_alarm_topic

#: AWS's vLLM deep-learning container for SageMaker: repository and tag. The account that hosts
#: it differs by region; ``ContainerImage.from_dlc`` takes it from aws-cdk-lib's region facts.
VLLM_SAGEMAKER_DLC = ("vllm", "server-sagemaker-cuda-v1")


@dataclass(frozen=True)
class GptOssPoolSettings:
    """What the reference deployment reads from ``cdk.json`` context (placeholders by default)."""

    #: Empty: AWS's SageMaker vLLM container in the stack's region (``VLLM_SAGEMAKER_DLC``).
    image_uri: str
    weights_uri: str
    quantized_weights_uri: str
    max_model_len: int = 32768
    max_instances: int = 4


class GptOssPoolEndpointStack(Stack):
    """One vLLM declaration, three pools, three strategies.

    1. ``ml.g6e.12xlarge`` (4 x L40S): BF16 weights, tensor parallel over the 4 GPUs.
    2. ``ml.g6.12xlarge`` (4 x L4): BF16, tensor parallel 4, speculative decoding (throughput goal).
    3. ``ml.g6e.2xlarge`` (1 x L40S): BF16 does not fit, so the 4-bit copy.

    The planner derives each configuration, checks it fits, sizes timeouts and autoscaling
    weights; each copy names itself in responses (``gpt-oss-20b-<format>-tp<N>[-ngram]``).
    """

    def __init__(
        self, scope: Construct, id: str, *, settings: GptOssPoolSettings, **kwargs: Any
    ) -> None:
        super().__init__(scope, id, **kwargs)
        self.serving = VllmPoolEndpoint(
            self,
            "Serving",
            image=(
                ContainerImage.from_ecr_uri(settings.image_uri)
                if settings.image_uri
                else ContainerImage.from_dlc(*VLLM_SAGEMAKER_DLC)
            ),
            model="gpt-oss-20b",
            config=VllmConfig(
                model="/opt/ml/model",
                served_model_name="gpt-oss-20b",
                max_model_len=settings.max_model_len,
                gpu_memory_utilization=0.9,
                # gpt-oss's parsers (vllm-project/vllm: vllm/reasoning/gptoss_reasoning_parser.py
                # registers "openai_gptoss", vllm/tool_parsers/openai_tool_parser.py "openai";
                # vllm-project/recipes OpenAI/GPT-OSS.md serves tool calls with them): without a
                # tool parser vLLM refuses a request with tools ("auto" tool choice requires
                # --enable-auto-tool-choice and --tool-call-parser), as the container rehearsal
                # found with `smoke`.
                reasoning_parser="openai_gptoss",
                tool_call_parser="openai",
            ),
            weights={
                WeightFormat.BF16: ModelData.from_s3_uri(settings.weights_uri),
                WeightFormat.INT4: ModelData.from_s3_uri(settings.quantized_weights_uri),
            },
            pools=[
                VllmPool(InstanceType.ML_G6E_12XLARGE),
                VllmPool(InstanceType.ML_G6_12XLARGE, goal="throughput"),
                VllmPool("ml.g6e.2xlarge"),
            ],
        )
        self.endpoint = self.serving.endpoint
        # Pool capacities come from the planner (each derived model declares its sizing).
        self.serving.auto_scale(min_capacity=1, max_capacity=settings.max_instances)
        self.alarms = self._alarms_to_topic()
        # The observability constructs take the VllmPoolEndpoint itself (an IPoolEndpoint).
        self.dashboard = PoolEndpointDashboard(
            self,
            "Dashboard",
            endpoint=self.serving,
            alarms=[*self.alarms.alarms, *self.serving.rollback_alarms],
        )
        # No AwsSolutions-SM1 acknowledgement on the models: SM1 is the notebook-instance
        # rule, which matches no model (an acknowledgement that matches nothing is stale).
        CfnOutput(self, "AlertsTopicArn", value=self.alerts_topic.topic_arn)
        # The endpoint's name and /openai/v1 base URL are VllmPoolEndpoint's own outputs.

    def _alarms_to_topic(self) -> PoolEndpointAlarms:
        """The operator alarms and the rollback alarms, all notifying ``alerts_topic``."""
        self.alerts_topic = self._alerts_topic()
        notify = cloudwatch_actions.SnsAction(self.alerts_topic)
        alarms = PoolEndpointAlarms(self, "Alarms", endpoint=self.serving, actions=[notify])
        for alarm in self.serving.rollback_alarms:
            if isinstance(alarm, cloudwatch.Alarm):
                alarm.add_alarm_action(notify)
        return alarms

    def _alerts_topic(self) -> sns.Topic:
        """An SNS topic for every operator alarm, encrypted with a key CloudWatch may use; both retained.

        CloudWatch alarms publish to an encrypted topic only when the key policy lets
        ``cloudwatch.amazonaws.com`` use the key (docs.aws.amazon.com/sns/latest/dg/
        sns-key-management.html#compatibility-with-aws-services).
        """
        return encrypted_alarm_topic(
            self,
            publisher="cloudwatch.amazonaws.com",
            key_description="Encrypts the endpoint's alarm notifications",
            display_name="gpt-oss-20b alerts",
        )

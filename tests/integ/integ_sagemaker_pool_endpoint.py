"""Deploy-time test of the SageMaker path: a small pool endpoint answers a chat completion.

Deploys Qwen3-0.6B (the serving container downloads it from Hugging Face, so no weights to
stage) on an endpoint with two pools, ``ml.g6.xlarge`` then ``ml.g5.xlarge``, and asserts
through ``InvokeEndpoint`` that an OpenAI-style chat payload gets an assistant message back.
AWS's SageMaker vLLM container takes that payload on ``/invocations`` and resolves the model
from ``SM_VLLM_MODEL`` (aws/deep-learning-containers, docs/vllm/deployment/sagemaker.md).

``make test`` only synthesizes this and compares it with the committed snapshot
(``integ-runner``, no AWS account); README "Integration tests" says how to deploy it.
"""

from __future__ import annotations

import json
import os
import sys

# jsii runs the CDK on the first `node` on PATH: prefer the virtualenv's supported Node.js.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

from aws_cdk import App, Duration, Environment, Stack  # noqa: E402
from aws_cdk.integ_tests_alpha import ExpectedResult, IntegTest  # noqa: E402

from cdk_llm_serving import (  # noqa: E402
    ContainerImage,
    InstancePool,
    InstancePoolEndpoint,
    InstanceType,
    ServingModel,
)

REGION = "us-east-1"
SERVED_NAME = "qwen3-0-6b"

app = App()
stack = Stack(app, "CdkLlmServingIntegSageMaker", env=Environment(region=REGION))
model = ServingModel(
    stack,
    "Model",
    image=ContainerImage.from_ecr_uri(
        f"763104351884.dkr.ecr.{REGION}.amazonaws.com/vllm:server-sagemaker-cuda-v1"
    ),
    served_model_name=SERVED_NAME,
    environment={"SM_VLLM_MODEL": "Qwen/Qwen3-0.6B", "SM_VLLM_MAX_MODEL_LEN": "4096"},
    network_isolation=False,  # the container downloads the model from Hugging Face
)
endpoint = InstancePoolEndpoint(
    stack,
    "Endpoint",
    model=model,
    pools=[InstancePool(InstanceType.ML_G6_XLARGE), InstancePool(InstanceType.ML_G5_XLARGE)],
)

integ = IntegTest(app, "SageMakerPoolEndpointAnswers", test_cases=[stack], regions=[REGION])
chat = integ.assertions.aws_api_call(
    "SageMakerRuntime",
    "invokeEndpoint",
    {
        "EndpointName": endpoint.endpoint_name,
        "ContentType": "application/json",
        "Body": json.dumps(
            {
                "model": SERVED_NAME,
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 32,
            }
        ),
    },
)
chat.provider.add_to_role_policy(
    {"Effect": "Allow", "Action": ["sagemaker:InvokeEndpoint"], "Resource": [endpoint.endpoint_arn]}
)
chat.assert_at_path("Body.choices.0.message.role", ExpectedResult.string_like_regexp("^assistant$"))
chat.wait_for_assertions(total_timeout=Duration.minutes(10), interval=Duration.seconds(30))
app.synth()

"""Deploy-time gate: every copy of a pool endpoint scored on an eval set, each on a staging
endpoint of its own, and the deployment fails when a copy falls below its threshold.

The pool endpoint serves Qwen3-0.6B as two copies (the container downloads it from Hugging
Face): BF16 on ``ml.g6.xlarge``, and an FP8 copy on ``ml.g5.xlarge`` quantized by vLLM at load
(``--quantization fp8``: dynamic FP8, weight-only W8A16 with FP8 Marlin on Ampere, vLLM docs
https://docs.vllm.ai/en/v0.32.0/features/quantization/llm_compressor/fp8/). ``StagingEndpoints``
gives each copy its own endpoint; the assertion invokes the eval gate function
(``StagingEndpoints.eval_gate``) with ``eval_gate_tasks.yaml`` and expects ``"gate": "PASS"``:
the FP8 copy within 2 points of the BF16 copy on every task, every answer from the copy asked.
Each copy is asked by its own served name (a shared client name needs S3 weights for its
served-names file, ``ServingModel(client_model_name=)``; these download from Hugging Face).
Both copies run vLLM's Qwen3 reasoning parser and the hermes tool-call parser (vLLM docs,
https://docs.vllm.ai/en/latest/features/tool_calling.html, "Qwen Models").

``make test`` only synthesizes this and compares it with the committed snapshot.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

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
    StagingEndpoints,
)

REGION = "us-east-1"
SHARED_NAME = "qwen3-0-6b"
TASKS = Path(__file__).with_name("eval_gate_tasks.yaml")
PARSERS = {
    "SM_VLLM_MODEL": "Qwen/Qwen3-0.6B",
    "SM_VLLM_MAX_MODEL_LEN": "4096",
    "SM_VLLM_REASONING_PARSER": "qwen3",
    "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": "true",
    "SM_VLLM_TOOL_CALL_PARSER": "hermes",
}

app = App()
stack = Stack(app, "CdkLlmServingIntegEvalGate", env=Environment(region=REGION))
image = ContainerImage.from_ecr_uri(
    f"763104351884.dkr.ecr.{REGION}.amazonaws.com/vllm:server-sagemaker-cuda-v1"
)
bf16 = ServingModel(
    stack,
    "Bf16",
    image=image,
    served_model_name=f"{SHARED_NAME}-bf16",
    environment=PARSERS,
    network_isolation=False,  # the container downloads the model from Hugging Face
)
fp8 = ServingModel(
    stack,
    "Fp8",
    image=image,
    served_model_name=f"{SHARED_NAME}-fp8",
    environment={**PARSERS, "SM_VLLM_QUANTIZATION": "fp8"},
    network_isolation=False,
)
endpoint = InstancePoolEndpoint(
    stack,
    "Endpoint",
    model=bf16,
    pools=[
        InstancePool(InstanceType.ML_G6_XLARGE),
        InstancePool(InstanceType.ML_G5_XLARGE, model=fp8),
    ],
)
staging = StagingEndpoints(stack, "Staging", source=endpoint)
gate = staging.eval_gate(TASKS)

integ = IntegTest(app, "EvalGatePassesEveryCopy", test_cases=[stack], regions=[REGION])
verdict = integ.assertions.invoke_function(
    function_name=gate.function.function_name, payload=gate.payload
)
verdict.assert_at_path("Payload.gate", ExpectedResult.string_like_regexp("^PASS$"))
verdict.wait_for_assertions(total_timeout=Duration.minutes(20), interval=Duration.seconds(60))
app.synth()

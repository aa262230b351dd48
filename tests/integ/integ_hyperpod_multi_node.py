"""Deploy-time test of the HyperPod path: the multi-node vLLM service answers through its
internal load balancer.

A small cluster (one ``ml.m5.xlarge`` system node, one ``ml.g5.12xlarge`` GPU node), the
serving add-ons, the weights on FSx for Lustre linked to ``$CDK_LLM_SERVING_INTEG_WEIGHTS_URI``
(an S3 prefix holding Llama-2-7B in BF16, which you stage), and the vLLM service. A Lambda
function in the cluster's private subnets posts an OpenAI-style chat completion to the
service's ``https://`` base URL with the service's API key, verifying vLLM's certificate
against the service's CA (the ``CaCertificate`` output, passed to the function); the
assertion expects an assistant message.

``make test`` only synthesizes this and compares it with the committed snapshot (with the
placeholder weights location); README "Integration tests" says how to deploy it.
"""

from __future__ import annotations

import json
import os
import sys

# jsii runs the CDK on the first `node` on PATH: prefer the virtualenv's supported Node.js.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

from aws_cdk import App, Duration, Environment, Stack  # noqa: E402
from aws_cdk import aws_ec2 as ec2  # noqa: E402
from aws_cdk import aws_lambda as lambda_  # noqa: E402
from aws_cdk import aws_s3 as s3  # noqa: E402
from aws_cdk.integ_tests_alpha import ExpectedResult, IntegTest  # noqa: E402

from cdk_llm_serving import (  # noqa: E402
    FsxModelStore,
    HyperPodEksCluster,
    HyperPodInstanceGroup,
    HyperPodServingAddons,
    ModelData,
    VllmMultiNodeService,
)
from cdk_llm_serving.vllm import VllmConfig  # noqa: E402

REGION = "us-east-1"
SERVED_NAME = "llama-2-7b"
WEIGHTS = ModelData.from_s3_uri(
    os.environ.get("CDK_LLM_SERVING_INTEG_WEIGHTS_URI", "s3://my-integ-weights/llama-2-7b/")
)

#: Posts one chat completion to BASE_URL with the service's API key (read from Secrets
#: Manager) over TLS verified against the service's CA (base64 PEM in CA_CERT_B64) and
#: returns the parsed response.
CLIENT_CODE = """
import base64, json, os, ssl, urllib.request
import boto3

def handler(event, context):
    secrets = boto3.client("secretsmanager")
    key = secrets.get_secret_value(SecretId=os.environ["API_KEY_SECRET_ARN"])["SecretString"]
    request = urllib.request.Request(
        os.environ["BASE_URL"] + "/chat/completions",
        data=json.dumps(event).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + key},
    )
    ca = base64.b64decode(os.environ["CA_CERT_B64"]).decode()
    context = ssl.create_default_context(cadata=ca)
    with urllib.request.urlopen(request, timeout=60, context=context) as response:
        return json.loads(response.read())
"""

app = App()
stack = Stack(app, "CdkLlmServingIntegHyperPod", env=Environment(region=REGION))
cluster = HyperPodEksCluster(
    stack,
    "HyperPod",
    kubernetes_version="1.33",
    instance_groups=[
        HyperPodInstanceGroup.system(instance_type="ml.m5.xlarge", count=1),
        HyperPodInstanceGroup.gpu("gpu", "ml.g5.12xlarge", 1),
    ],
)
addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
store = FsxModelStore(
    stack,
    "Weights",
    cluster=cluster,
    weights_bucket=s3.Bucket.from_bucket_name(stack, "WeightsBucket", WEIGHTS.bucket_name),
    weights_prefix=WEIGHTS.prefix,
    storage_capacity_gib=1200,
)
service = VllmMultiNodeService(
    stack,
    "Llama",
    addons=addons,
    weights=store,
    model="llama-2-7b",
    weight_format="bf16",
    config=VllmConfig(
        model="set-by-the-service", served_model_name=SERVED_NAME, max_model_len=4096
    ),
)
client = lambda_.Function(
    stack,
    "ChatClient",
    function_name="cdk-llm-serving-integ-chat-client",  # the assertion stack calls it by name
    runtime=lambda_.Runtime.PYTHON_3_13,
    handler="index.handler",
    code=lambda_.Code.from_inline(CLIENT_CODE),
    timeout=Duration.seconds(90),
    vpc=cluster.vpc,
    vpc_subnets=ec2.SubnetSelection(subnets=list(cluster.private_subnets)),
    environment={
        "BASE_URL": service.base_url,
        "API_KEY_SECRET_ARN": service.api_key.secret_arn,
        "CA_CERT_B64": service.ca_certificate,
    },
)
service.api_key.grant_read(client)

integ = IntegTest(app, "HyperPodServiceAnswers", test_cases=[stack], regions=[REGION])
chat = integ.assertions.invoke_function(
    function_name=client.function_name,
    payload=json.dumps(
        {
            "model": SERVED_NAME,
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 32,
        }
    ),
)
chat.assert_at_path(
    "Payload.choices.0.message.role", ExpectedResult.string_like_regexp("^assistant$")
)
chat.wait_for_assertions(total_timeout=Duration.minutes(30), interval=Duration.minutes(1))
app.synth()

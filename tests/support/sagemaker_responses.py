"""DescribeEndpoint / DescribeEndpointConfig responses shaped like botocore's model says."""

from __future__ import annotations

import datetime as dt

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
ARN = "arn:aws:sagemaker:us-west-2:123456789012:endpoint/serving"


def endpoint_response(
    pools: list[tuple[str, int]], pending: list[tuple[str, int]] | None = None
) -> dict:
    response = {
        "EndpointName": "serving",
        "EndpointArn": ARN,
        "EndpointConfigName": "config-a",
        "EndpointStatus": "Updating" if pending else "InService",
        "CreationTime": NOW,
        "LastModifiedTime": NOW,
        "ProductionVariants": [
            {
                "VariantName": "AllTraffic",
                "CurrentInstanceCount": sum(n for _, n in pools),
                "InstancePools": [{"InstanceType": t, "CurrentInstanceCount": n} for t, n in pools],
            }
        ],
    }
    if pending:
        response["PendingDeploymentSummary"] = {
            "EndpointConfigName": "config-b",
            "ProductionVariants": [
                {
                    "VariantName": "AllTraffic",
                    "InstancePools": [
                        {"InstanceType": t, "CurrentInstanceCount": n} for t, n in pending
                    ],
                }
            ],
        }
    return response


def config_response(name: str, pools: list[tuple[str, str | None]]) -> dict:
    return {
        "EndpointConfigName": name,
        "EndpointConfigArn": f"arn:aws:sagemaker:us-west-2:123456789012:endpoint-config/{name}",
        "CreationTime": NOW,
        "ProductionVariants": [
            {
                "VariantName": "AllTraffic",
                "ModelName": "full-model",
                "InitialInstanceCount": 1,
                "InstancePools": [
                    {"InstanceType": t, "Priority": i, **({"ModelNameOverride": o} if o else {})}
                    for i, (t, o) in enumerate(pools, start=1)
                ],
            }
        ],
    }


def model_response(name: str, environment: dict[str, str]) -> dict:
    """DescribeModel of a model whose container has ``environment``."""
    return {
        "ModelName": name,
        "ModelArn": f"arn:aws:sagemaker:us-west-2:123456789012:model/{name}",
        "CreationTime": NOW,
        "PrimaryContainer": {
            "Image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:server-sagemaker-cuda-v1",
            "Environment": environment,
        },
    }

"""The copies the rehearsal starts: one per pool, the pool's model, its environment and the
files the stack writes into the model directory; the names each serves."""

from __future__ import annotations

import json
from typing import Any

from rehearsal.sagemaker.copies import Copy, copies_of
from rehearsal.sagemaker.runner import served_names, shared_names


def _template(env_b: dict[str, str]) -> dict[str, Any]:
    def model(env: dict[str, str], prefix: str) -> dict[str, Any]:
        return {
            "Type": "AWS::SageMaker::Model",
            "Properties": {
                "PrimaryContainer": {
                    "Environment": env,
                    "ModelDataSource": {
                        "S3DataSource": {
                            "S3Uri": f"s3://bucket/{prefix}/",
                            "S3DataType": "S3Prefix",
                        }
                    },
                }
            },
        }

    put = {
        "action": "putObject",
        "service": "S3",
        "parameters": {
            "Bucket": "bucket",
            "Key": "w/cdk-llm-serving/names.yaml",
            "Body": 'served-model-name:\n  - "m-a"\n  - "m"\n',
        },
    }
    return {
        "Resources": {
            "A": model({"SM_VLLM_CONFIG": "/opt/ml/model/cdk-llm-serving/names.yaml"}, "w"),
            "B": model(env_b, "q"),
            "Put": {"Type": "Custom::AWS", "Properties": {"Create": json.dumps(put)}},
            "Config": {
                "Type": "AWS::SageMaker::EndpointConfig",
                "Properties": {
                    "ProductionVariants": [
                        {
                            "VariantName": "AllTraffic",
                            "ModelName": {"Fn::GetAtt": ["A", "ModelName"]},
                            "InstancePools": [
                                {
                                    "InstanceType": "ml.small",
                                    "Priority": 2,
                                    "ModelNameOverride": {"Fn::GetAtt": ["B", "ModelName"]},
                                },
                                {"InstanceType": "ml.big", "Priority": 1},
                            ],
                        }
                    ]
                },
            },
            "Endpoint": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {
                    "EndpointName": "ep",
                    "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
                },
            },
        }
    }


def test_one_copy_per_pool_in_priority_order_with_the_pools_model():
    copies = copies_of(_template({"SM_VLLM_SERVED_MODEL_NAME": '["m-b", "m"]'}))
    assert [(c.instance_type, c.model_id) for c in copies] == [("ml.big", "A"), ("ml.small", "B")]
    assert copies[0].name == "ep/AllTraffic/ml.big"
    # The putObject under A's prefix is a file in A's /opt/ml/model; B's prefix has none.
    assert copies[0].deploy_files == {
        "cdk-llm-serving/names.yaml": 'served-model-name:\n  - "m-a"\n  - "m"\n'
    }
    assert copies[1].deploy_files == {}


def test_served_names_from_the_config_file_or_a_json_array():
    a, b = copies_of(_template({"SM_VLLM_SERVED_MODEL_NAME": '["m-b", "m"]'}))
    assert served_names(a) == ["m-a", "m"]
    assert served_names(b) == ["m-b", "m"]
    assert shared_names([a, b]) == {("ep", "AllTraffic"): "m"}


def test_no_shared_name_when_the_copies_share_none():
    a, b = copies_of(_template({"SM_VLLM_SERVED_MODEL_NAME": "m-b"}))
    assert shared_names([a, b]) == {("ep", "AllTraffic"): None}


def test_the_reference_pool_endpoint_has_three_copies_sharing_one_client_name(pool_template):
    copies: list[Copy] = copies_of(pool_template)
    assert [c.instance_type for c in copies] == [
        "ml.g6e.12xlarge",
        "ml.g6.12xlarge",
        "ml.g6e.2xlarge",
    ]
    assert len({c.model_id for c in copies}) == 3
    owns = [served_names(c)[0] for c in copies]
    assert len(set(owns)) == 3, owns
    assert set(shared_names(copies).values()) == {"gpt-oss-20b"}

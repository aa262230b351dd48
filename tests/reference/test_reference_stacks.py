"""The reference GPT-OSS-20B pool endpoint: what it synthesizes, checked property by property."""

from __future__ import annotations

import json
import re

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from tests.support.template_helpers import (
    actions_of,
    mask_asset_hashes,
    only_resource,
    policy_statements,
    resources_of_type,
)


@pytest.fixture
def json_snapshot(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def test_every_reference_template_matches_its_snapshot(reference_templates, json_snapshot):
    for name in sorted(reference_templates):
        assert mask_asset_hashes(reference_templates[name]) == json_snapshot(name=name)


def test_snapshots_carry_no_bootstrap_rule_or_analytics(reference_templates):
    for template in reference_templates.values():
        assert "CheckBootstrapVersion" not in template.get("Rules", {})
        assert "BootstrapVersion" not in template.get("Parameters", {})
        assert not resources_of_type(template, "AWS::CDK::Metadata")


def _variant(template: dict) -> dict:
    _, config = only_resource(template, "AWS::SageMaker::EndpointConfig")
    variants = config["Properties"]["ProductionVariants"]
    assert len(variants) == 1
    return variants[0]


def _served_names(model: dict) -> list[str]:
    env = model["Properties"]["PrimaryContainer"]["Environment"]
    return json.loads(env["CDK_LLM_SERVING_SERVED_NAMES"])


def _model_logical_id(template: dict, served_name: str) -> str:
    """The model whose copy name (first served name, the one responses carry) is ``served_name``."""
    for logical_id, model in resources_of_type(template, "AWS::SageMaker::Model").items():
        if _served_names(model)[0] == served_name:
            return logical_id
    raise AssertionError(f"no model serves {served_name}")


def test_every_copy_answers_to_the_shared_name_from_the_region_s_dlc(pool_template):
    models = resources_of_type(pool_template, "AWS::SageMaker::Model").values()
    assert sorted(_served_names(m) for m in models) == [
        ["gpt-oss-20b-bf16-tp4", "gpt-oss-20b"],
        ["gpt-oss-20b-bf16-tp4-ngram", "gpt-oss-20b"],
        ["gpt-oss-20b-int4-tp1", "gpt-oss-20b"],
    ]
    for model in models:
        assert model["Properties"]["PrimaryContainer"]["Image"]["Fn::Join"][1] == [
            "763104351884.dkr.ecr.us-west-2.",
            {"Ref": "AWS::URLSuffix"},
            "/vllm:server-sagemaker-cuda-v1",
        ]


def test_three_pools_in_priority_order_with_a_quantized_override(pool_template):
    pools = _variant(pool_template)["InstancePools"]
    assert [(p["InstanceType"], p["Priority"]) for p in pools] == [
        ("ml.g6e.12xlarge", 1),
        ("ml.g6.12xlarge", 2),
        ("ml.g6e.2xlarge", 3),
    ]
    assert "ModelNameOverride" not in pools[0]
    speculative = _model_logical_id(pool_template, "gpt-oss-20b-bf16-tp4-ngram")
    assert pools[1]["ModelNameOverride"] == {"Fn::GetAtt": [speculative, "ModelName"]}
    int4 = _model_logical_id(pool_template, "gpt-oss-20b-int4-tp1")
    assert pools[2]["ModelNameOverride"] == {"Fn::GetAtt": [int4, "ModelName"]}
    full = _model_logical_id(pool_template, "gpt-oss-20b-bf16-tp4")
    assert _variant(pool_template)["ModelName"] == {"Fn::GetAtt": [full, "ModelName"]}


def test_one_declaration_three_strategies(pool_template):
    """Tensor parallelism on the first pool, speculative decoding on the second, 4-bit on the third."""
    envs = {
        name: pool_template["Resources"][_model_logical_id(pool_template, name)]["Properties"][
            "PrimaryContainer"
        ]["Environment"]
        for name in ("gpt-oss-20b-bf16-tp4", "gpt-oss-20b-bf16-tp4-ngram", "gpt-oss-20b-int4-tp1")
    }
    assert envs["gpt-oss-20b-bf16-tp4"]["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "4"
    assert "SM_VLLM_SPECULATIVE_CONFIG" not in envs["gpt-oss-20b-bf16-tp4"]
    assert envs["gpt-oss-20b-bf16-tp4-ngram"]["SM_VLLM_SPECULATIVE_CONFIG"].startswith(
        '{"method":"ngram"'
    )
    assert envs["gpt-oss-20b-int4-tp1"]["SM_VLLM_QUANTIZATION"] == "awq_marlin"
    assert envs["gpt-oss-20b-int4-tp1"]["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "1"
    for env in envs.values():
        assert env["SM_VLLM_MODEL"] == "/opt/ml/model" and env["SM_VLLM_MAX_MODEL_LEN"] == "32768"


def test_pools_replace_the_variant_instance_type(pool_template):
    assert "InstanceType" not in _variant(pool_template)


def test_timeouts_routing_and_metrics(pool_template):
    variant = _variant(pool_template)
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == 1800
    # Sized by the planner; a 20B model's estimate (x2) stays under the 10-minute floor.
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 600
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 600
    assert variant["InitialInstanceCount"] == 1
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    _, config = only_resource(pool_template, "AWS::SageMaker::EndpointConfig")
    assert config["Properties"]["MetricsConfig"] == {
        "EnableDetailedObservability": True,
        "EnableEnhancedMetrics": True,
        "MetricPublishFrequencyInSeconds": 60,
    }
    # Local-NVMe instance types reject a KMS key and provision no EBS volume.
    assert "KmsKeyId" not in config["Properties"]
    assert "VolumeSizeInGB" not in variant


def test_names_are_generated_except_the_endpoint(pool_template):
    _, config = only_resource(pool_template, "AWS::SageMaker::EndpointConfig")
    assert "EndpointConfigName" not in config["Properties"]
    for model in resources_of_type(pool_template, "AWS::SageMaker::Model").values():
        assert "ModelName" not in model["Properties"]
    _, endpoint = only_resource(pool_template, "AWS::SageMaker::Endpoint")
    assert isinstance(endpoint["Properties"]["EndpointName"], str)


def test_blue_green_deployment_rolls_back_on_error_and_latency_alarms(pool_template):
    _, endpoint = only_resource(pool_template, "AWS::SageMaker::Endpoint")
    deployment = endpoint["Properties"]["DeploymentConfig"]
    assert deployment["BlueGreenUpdatePolicy"] == {
        "MaximumExecutionTimeoutInSeconds": 7200,
        "TerminationWaitInSeconds": 300,
        "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 600},
    }
    alarm_refs = [
        alarm["AlarmName"]["Ref"] for alarm in deployment["AutoRollbackConfiguration"]["Alarms"]
    ]
    alarms = resources_of_type(pool_template, "AWS::CloudWatch::Alarm")
    endpoint_name = endpoint["Properties"]["EndpointName"]
    # Over the pools' per-InstanceType series (the variant's own is UNCONFIRMED).
    stats = {
        ref: [q["MetricStat"] for q in alarms[ref]["Properties"]["Metrics"] if "MetricStat" in q]
        for ref in alarm_refs
    }
    metrics = {s["Metric"]["MetricName"] for found in stats.values() for s in found}
    assert metrics == {"Invocation5XXErrors", "ModelLatency"}
    for found in stats.values():
        for stat in found:
            dimensions = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
            assert (
                dimensions.items()
                >= {
                    "EndpointName": endpoint_name,
                    "VariantName": "AllTraffic",
                }.items()
            )
            assert "InstanceType" in dimensions
    latency = next(
        alarms[ref]
        for ref, found in stats.items()
        if found[0]["Metric"]["MetricName"] == "ModelLatency"
    )
    assert all(
        s["Stat"] == "p99"
        for ref, found in stats.items()
        for s in found
        if s["Metric"]["MetricName"] == "ModelLatency"
    )
    assert latency["Properties"]["Threshold"] == 120 * 1_000_000  # microseconds


def test_model_roles_read_only_their_own_weights_prefix(pool_template):
    for served_name, prefix in (
        ("gpt-oss-20b-bf16-tp4", "gpt-oss-20b/"),
        ("gpt-oss-20b-bf16-tp4-ngram", "gpt-oss-20b/"),
        ("gpt-oss-20b-int4-tp1", "gpt-oss-20b-int4/"),
    ):
        model = pool_template["Resources"][_model_logical_id(pool_template, served_name)]
        role_id = model["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
        role = pool_template["Resources"][role_id]
        assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
            "Service": "sagemaker.amazonaws.com"
        }
        assert "ManagedPolicyArns" not in role["Properties"]
        statements = policy_statements(pool_template, role_id)
        s3_actions = {a for s in statements for a in actions_of(s) if a.startswith("s3:")}
        assert s3_actions == {"s3:GetObject", "s3:ListBucket"}
        get = next(s for s in statements if "s3:GetObject" in actions_of(s))
        assert (
            get["Resource"]["Fn::Join"][1][-1]
            == f":s3:::cdk-llm-serving-placeholder-weights/{prefix}*"
        )
        listing = next(s for s in statements if "s3:ListBucket" in actions_of(s))
        assert listing["Condition"] == {
            "StringLike": {"s3:prefix": [prefix, f"{prefix}*"]},
            "StringEquals": {"aws:ResourceAccount": {"Ref": "AWS::AccountId"}},
        }
        ecr = next(s for s in statements if "ecr:BatchGetImage" in actions_of(s))
        # from_dlc: the region's DLC account; a concrete region knows its partition.
        assert ecr["Resource"] == "arn:aws:ecr:us-west-2:763104351884:repository/vllm"
        for statement in statements:
            assert not any(action.endswith(":*") for action in actions_of(statement)), statement


def test_outputs_name_the_endpoint_and_its_openai_base_url(pool_template):
    _, endpoint = only_resource(pool_template, "AWS::SageMaker::Endpoint")
    # VllmPoolEndpoint's own outputs (smoke needed a hand-written CfnOutput).
    outputs = {re.sub(r"[0-9A-F]{8}$", "", key): o for key, o in pool_template["Outputs"].items()}
    assert outputs["ServingEndpointName"]["Value"] == endpoint["Properties"]["EndpointName"]
    url = outputs["ServingOpenAiBaseUrl"]
    assert url["Description"].startswith("smoke --base-url (--model gpt-oss-20b ")
    joined = "".join(
        part if isinstance(part, str) else f"<{part['Ref']}>"
        for part in url["Value"]["Fn::Join"][1]
    )
    assert (
        joined
        == f"https://runtime.sagemaker.<AWS::Region>.<AWS::URLSuffix>/endpoints/{endpoint['Properties']['EndpointName']}/openai/v1"
    )


def test_inference_operator_variant_matches_its_snapshot(
    inference_operator_template, json_snapshot
):
    """The opt-in variant (-c llm-serving:hyperpod:inference-operator=true); the default is above."""
    assert mask_asset_hashes(inference_operator_template) == json_snapshot(
        name="ReferenceMoeHyperPod-inference-operator"
    )

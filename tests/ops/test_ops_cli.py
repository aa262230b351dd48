"""fleet and recommend against real boto3 clients under botocore's Stubber (requests checked against the service model)."""

from __future__ import annotations

import io
import json

import pytest
from aws_cdk import Environment, Stack

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.ops.cli import main
from cdk_llm_serving.ops.recommend import RecommendationSpec, pools_from_job, wait_for_job
from cdk_llm_serving.planning.pool_file import PoolFile, PoolFileError
from tests.support.sagemaker_responses import (
    NOW,
    config_response,
    endpoint_response,
    model_response,
)
from tests.support.stubbed_aws import stubbed_client


@pytest.fixture
def sagemaker():
    with stubbed_client("sagemaker", "us-west-2") as stubbed:
        yield stubbed


POOLS = [("ml.g6e.12xlarge", None), ("ml.g6.12xlarge", None), ("ml.g6e.2xlarge", "int4-model")]

#: The containers' environments as ServingModel writes them (copy name first).
MODEL_ENVIRONMENTS = {
    "full-model": {"CDK_LLM_SERVING_SERVED_NAMES": '["gpt-oss-20b-bf16-tp4", "gpt-oss-20b"]'},
    "int4-model": {"CDK_LLM_SERVING_SERVED_NAMES": '["gpt-oss-20b-int4-tp1", "gpt-oss-20b"]'},
}


def stub_models(stubber, *names: str) -> None:
    for name in names:
        stubber.add_response(
            "describe_model", model_response(name, MODEL_ENVIRONMENTS[name]), {"ModelName": name}
        )


def fleet(sagemaker, capsys, *args: str) -> tuple[int, str, str]:
    client, _ = sagemaker
    code = main(["fleet", "serving", *args], clients={"sagemaker": client})
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_fleet_on_preferred_hardware(sagemaker, capsys):
    _, stubber = sagemaker
    stubber.add_response(
        "describe_endpoint",
        endpoint_response([("ml.g6e.12xlarge", 2), ("ml.g6.12xlarge", 0), ("ml.g6e.2xlarge", 0)]),
        {"EndpointName": "serving"},
    )
    stubber.add_response(
        "describe_endpoint_config",
        config_response("config-a", POOLS),
        {"EndpointConfigName": "config-a"},
    )
    stub_models(stubber, "full-model", "int4-model")
    code, out, _ = fleet(sagemaker, capsys, "--fail-on-fallback")
    assert code == 0
    assert "1. ml.g6e.12xlarge            2 running  preferred" in out
    assert "$26.25/h" in out and "running on fallback" not in out


def test_fleet_on_fallback_with_a_model_override(sagemaker, capsys):
    _, stubber = sagemaker
    stubber.add_response(
        "describe_endpoint",
        endpoint_response([("ml.g6e.12xlarge", 1), ("ml.g6.12xlarge", 0), ("ml.g6e.2xlarge", 3)]),
        {"EndpointName": "serving"},
    )
    stubber.add_response(
        "describe_endpoint_config",
        config_response("config-a", POOLS),
        {"EndpointConfigName": "config-a"},
    )
    stub_models(stubber, "full-model", "int4-model")
    code, out, _ = fleet(sagemaker, capsys, "--json", "--fail-on-fallback")
    assert code == 3
    data = json.loads(out)
    assert data["on_fallback"] is True
    (variant,) = data["variants"]
    assert [
        (p["priority"], p["instance_type"], p["instances"], p["preferred"])
        for p in variant["pools"]
    ] == [
        (1, "ml.g6e.12xlarge", 1, True),
        (2, "ml.g6.12xlarge", 0, False),
        (3, "ml.g6e.2xlarge", 3, False),
    ]
    assert variant["pools"][2]["model_override"] == "int4-model"
    assert [p["served_name"] for p in variant["pools"]] == [
        "gpt-oss-20b-bf16-tp4",
        "gpt-oss-20b-bf16-tp4",
        "gpt-oss-20b-int4-tp1",
    ]
    assert variant["hourly_cost"] == round(13.1232 + 3 * 2.8288, 2)


def test_fleet_text_names_the_fallback_copy(sagemaker, capsys):
    _, stubber = sagemaker
    stubber.add_response(
        "describe_endpoint",
        endpoint_response([("ml.g6e.12xlarge", 0), ("ml.g6.12xlarge", 0), ("ml.g6e.2xlarge", 2)]),
        {"EndpointName": "serving"},
    )
    stubber.add_response(
        "describe_endpoint_config",
        config_response("config-a", POOLS),
        {"EndpointConfigName": "config-a"},
    )
    stub_models(stubber, "full-model", "int4-model")
    code, out, _ = fleet(sagemaker, capsys)
    assert code == 0
    assert (
        "! running on fallback: 2 x ml.g6e.2xlarge (priority 3), serving the gpt-oss-20b-int4-tp1 copy"
        in out
    )
    assert (
        "3. ml.g6e.2xlarge             2 running  fallback   answers as gpt-oss-20b-int4-tp1  model int4-model"
        in out
    )


def test_fleet_shows_a_pending_update(sagemaker, capsys):
    _, stubber = sagemaker
    stubber.add_response(
        "describe_endpoint",
        endpoint_response([("ml.g6e.12xlarge", 1)], pending=[("ml.p5.48xlarge", 1)]),
        {"EndpointName": "serving"},
    )
    stubber.add_response(
        "describe_endpoint_config",
        config_response("config-a", [("ml.g6e.12xlarge", None)]),
        {"EndpointConfigName": "config-a"},
    )
    stubber.add_response(
        "describe_endpoint_config",
        config_response("config-b", [("ml.p5.48xlarge", None)]),
        {"EndpointConfigName": "config-b"},
    )
    stub_models(stubber, "full-model", "full-model")
    code, out, _ = fleet(sagemaker, capsys)
    assert code == 0 and "endpoint serving: Updating" in out
    assert "pending update, variant AllTraffic" in out and "ml.p5.48xlarge" in out


@pytest.mark.parametrize(
    ("code", "message", "exit_code", "fragment"),
    [
        ("ValidationException", 'Could not find endpoint "serving".', 6, "Could not find endpoint"),
        ("ThrottlingException", "Rate exceeded", 4, "ThrottlingException"),
        (
            "AccessDeniedException",
            "not authorized to perform sagemaker:DescribeEndpoint",
            5,
            "not authorized",
        ),
        ("ValidationException", "1 validation error detected", 7, "validation error"),
    ],
)
def test_aws_errors_are_one_line_with_distinct_exit_codes(
    sagemaker, capsys, code, message, exit_code, fragment
):
    client, stubber = sagemaker
    client.meta.config.retries["total_max_attempts"] = 1  # the stub answers once
    stubber.add_client_error(
        "describe_endpoint", service_error_code=code, service_message=message, http_status_code=400
    )
    result, out, err = fleet(sagemaker, capsys)
    assert result == exit_code and out == ""
    assert (
        err.count("\n") == 1
        and err.startswith("error: cannot describe endpoint 'serving'")
        and fragment in err
    )


SPEC = {
    "name": "gpt-oss-20b-cost",
    "model_s3_uri": "s3://weights/gpt-oss-20b/",
    "output_s3_uri": "s3://results/recommendations/",
    "role_arn": "arn:aws:iam::123456789012:role/recommender",
    "goal": "cost",
    "instance_types": ["ml.g6e.12xlarge", "ml.g6.12xlarge", "ml.g6e.2xlarge"],
}


def test_recommend_start_from_a_yaml_file(sagemaker, capsys, tmp_path):
    import yaml

    client, stubber = sagemaker
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(SPEC))
    stubber.add_response(
        "create_ai_workload_config",
        {
            "AIWorkloadConfigArn": "arn:aws:sagemaker:us-west-2:123456789012:ai-workload-config/gpt-oss-20b-cost-workload"
        },
        {"AIWorkloadConfigName": "gpt-oss-20b-cost-workload"},
    )
    stubber.add_response(
        "create_ai_recommendation_job",
        {
            "AIRecommendationJobArn": "arn:aws:sagemaker:us-west-2:123456789012:ai-recommendation-job/gpt-oss-20b-cost"
        },
        {
            "AIRecommendationJobName": "gpt-oss-20b-cost",
            "ModelSource": {"S3": {"S3Uri": "s3://weights/gpt-oss-20b/"}},
            "OutputConfig": {"S3OutputLocation": "s3://results/recommendations/"},
            "AIWorkloadConfigIdentifier": "gpt-oss-20b-cost-workload",
            "PerformanceTarget": {"Constraints": [{"Metric": "cost"}]},
            "RoleArn": "arn:aws:iam::123456789012:role/recommender",
            "InferenceSpecification": {"Framework": "VLLM"},
            "OptimizeModel": True,
            "ComputeSpec": {"InstanceTypes": SPEC["instance_types"]},
        },
    )
    assert (
        main(["recommend", "start", "--spec", str(spec_file)], clients={"sagemaker": client}) == 0
    )
    assert capsys.readouterr().out.strip().endswith("ai-recommendation-job/gpt-oss-20b-cost")


def test_recommend_start_rejects_a_bad_spec(capsys):
    code = main(
        [
            "recommend",
            "start",
            "--name",
            "x",
            "--model-s3-uri",
            "weights",
            "--output-s3-uri",
            "s3://o/",
            "--role-arn",
            "arn:aws:iam::123456789012:role/r",
            "--instance-type",
            "a",
            "--instance-type",
            "b",
            "--instance-type",
            "c",
            "--instance-type",
            "d",
        ],
        clients={"sagemaker": object()},
    )
    err = capsys.readouterr().err
    assert (
        code == 2
        and "at most 3 instance types" in err
        and "model_s3_uri = 'weights': must be an s3:// URI" in err
    )


def test_recommend_start_names_an_unknown_instance_type_with_the_closest():
    values = {**SPEC, "instance_types": ["ml.g6e.12xlarg", "ml.g6.12xlarge"]}
    with pytest.raises(ConfigurationError) as caught:
        RecommendationSpec.from_mapping(values).validate()
    (problem,) = caught.value.problems
    assert problem.property == "instance_types[0]" and "closest: ml.g6e.12xlarge" in problem.allowed
    assert RecommendationSpec.from_mapping(SPEC).validate().problems() == []


def job_response(
    status: str, recommendations: list | None = None, reason: str | None = None
) -> dict:
    response = {
        "AIRecommendationJobName": "gpt-oss-20b-cost",
        "AIRecommendationJobArn": "arn:aws:sagemaker:us-west-2:123456789012:ai-recommendation-job/gpt-oss-20b-cost",
        "AIRecommendationJobStatus": status,
        "ModelSource": {"S3": {"S3Uri": "s3://weights/gpt-oss-20b/"}},
        "OutputConfig": {"S3OutputLocation": "s3://results/recommendations/"},
        "AIWorkloadConfigIdentifier": "gpt-oss-20b-cost-workload",
        "PerformanceTarget": {"Constraints": [{"Metric": "cost"}]},
        "RoleArn": "arn:aws:iam::123456789012:role/recommender",
        "CreationTime": NOW,
    }
    if recommendations is not None:
        response["Recommendations"] = recommendations
    if reason:
        response["FailureReason"] = reason
    return response


def recommendation(
    instance_type: str, ttft: str, itl: str, throughput: str, cost: str, speculative: bool = False
) -> dict:
    image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:server-sagemaker-cuda-v1"
    env = {"SM_VLLM_TENSOR_PARALLEL_SIZE": "4" if instance_type.endswith("12xlarge") else "1"}
    return {
        "RecommendationDescription": f"{instance_type} for cost",
        "OptimizationDetails": [
            {"OptimizationType": "SpeculativeDecoding" if speculative else "KernelTuning"}
        ],
        "ModelDetails": {
            "ModelPackageArn": f"arn:aws:sagemaker:us-west-2:123456789012:model-package/gpt-oss-20b/{1 if speculative else 2}",
            "InstanceDetails": [{"InstanceType": instance_type, "InstanceCount": 1}],
        },
        "DeploymentConfiguration": {
            "S3": [{"ChannelName": "model", "Uri": f"s3://results/models/{instance_type}/"}],
            "ImageUri": image,
            "InstanceType": instance_type,
            "InstanceCount": 1,
            "EnvironmentVariables": env,
        },
        "ExpectedPerformance": [
            {"Metric": "ttft-ms", "Stat": "p50", "Value": ttft, "Unit": "ms"},
            {"Metric": "itl-ms", "Stat": "p50", "Value": itl, "Unit": "ms"},
            {"Metric": "throughput", "Stat": "avg", "Value": throughput, "Unit": "tokens/s"},
            {"Metric": "cost", "Stat": "avg", "Value": cost, "Unit": "USD per million tokens"},
        ],
    }


RECOMMENDATIONS = [
    recommendation("ml.g6e.12xlarge", "180", "20", "1200", "3.04"),
    recommendation("ml.g6e.2xlarge", "240", "25", "400", "1.96"),
    recommendation("ml.g6.12xlarge", "260", "30", "600", "2.48", speculative=True),
]


def test_recommend_wait_polls_until_completed(sagemaker):
    client, stubber = sagemaker
    for status in ("InProgress", "InProgress"):
        stubber.add_response(
            "describe_ai_recommendation_job",
            job_response(status),
            {"AIRecommendationJobName": "gpt-oss-20b-cost"},
        )
    stubber.add_response(
        "describe_ai_recommendation_job",
        job_response("Completed", RECOMMENDATIONS),
        {"AIRecommendationJobName": "gpt-oss-20b-cost"},
    )
    sleeps, progress = [], io.StringIO()
    job = wait_for_job(
        client, "gpt-oss-20b-cost", poll_seconds=30, sleep=sleeps.append, progress=progress
    )
    assert job["AIRecommendationJobStatus"] == "Completed" and sleeps == [30, 30]
    assert progress.getvalue().splitlines()[-1] == "[  1.0 min] gpt-oss-20b-cost: Completed"


def test_recommend_wait_says_why_a_job_failed(sagemaker, capsys):
    client, stubber = sagemaker
    stubber.add_response(
        "describe_ai_recommendation_job",
        job_response("Failed", reason="insufficient capacity for ml.g6e.12xlarge"),
        {"AIRecommendationJobName": "gpt-oss-20b-cost"},
    )
    code = main(
        ["recommend", "wait", "gpt-oss-20b-cost", "--poll-seconds", "1"],
        clients={"sagemaker": client, "sleep": lambda s: None},
    )
    err = capsys.readouterr().err
    assert (
        code == 1
        and "recommendation job gpt-oss-20b-cost failed: insufficient capacity for ml.g6e.12xlarge"
        in err
    )


def test_to_pools_orders_by_goal_and_derives_capacity(sagemaker, capsys, tmp_path):
    client, stubber = sagemaker
    stubber.add_response(
        "describe_ai_recommendation_job",
        job_response("Completed", RECOMMENDATIONS),
        {"AIRecommendationJobName": "gpt-oss-20b-cost"},
    )
    output = tmp_path / "pools.json"
    assert (
        main(
            ["recommend", "to-pools", "gpt-oss-20b-cost", "--output", str(output)],
            clients={"sagemaker": client},
        )
        == 0
    )
    pool_file = PoolFile.load(output)
    assert pool_file.goal == "cost"
    assert [p.instance_type for p in pool_file.pools] == [
        "ml.g6e.2xlarge",
        "ml.g6.12xlarge",
        "ml.g6e.12xlarge",
    ]
    assert pool_file.pools[2].max_concurrency == 24.0  # 1200 tokens/s x 20 ms per token
    assert pool_file.pools[0].expected.cost_per_million_tokens == 1.96
    assert json.loads(output.read_text())["version"] == 1
    assert (
        pools_from_job(job_response("Completed", RECOMMENDATIONS), "latency").pools[0].instance_type
        == "ml.g6e.12xlarge"
    )


def test_pool_file_round_trip_to_synthesized_instance_pools(tmp_path):
    from cdk_llm_serving import InstancePoolEndpoint
    from tests.support.app import new_app
    from tests.support.builders import template_of
    from tests.support.template_helpers import only_resource, resources_of_type

    path = tmp_path / "pools.json"
    pools_from_job(job_response("Completed", RECOMMENDATIONS)).write(path)
    stack = Stack(new_app(), "FromRecommendation", env=Environment(region="us-west-2"))
    endpoint = InstancePoolEndpoint.build_from_recommendation(
        stack, "Serving", str(path), client_model_name="gpt-oss-20b"
    )
    assert endpoint.pool_capacities() == [10.0, 18.0, 24.0]  # throughput x ITL per pool
    template = template_of(stack)
    _, config = only_resource(template, "AWS::SageMaker::EndpointConfig")
    pools = config["Properties"]["ProductionVariants"][0]["InstancePools"]
    assert [(p["InstanceType"], p["Priority"]) for p in pools] == [
        ("ml.g6e.2xlarge", 1),
        ("ml.g6.12xlarge", 2),
        ("ml.g6e.12xlarge", 3),
    ]
    models = resources_of_type(template, "AWS::SageMaker::Model")
    assert (
        len(models) == 3 and "ModelNameOverride" not in pools[0] and "ModelNameOverride" in pools[2]
    )
    uris = {
        m["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"]
        for m in models.values()
    }
    assert uris == {
        f"s3://results/models/{t}/" for t in ("ml.g6e.12xlarge", "ml.g6.12xlarge", "ml.g6e.2xlarge")
    }
    # Every deployment serves the shared name after its own (the first pool's type).
    served = sorted(
        json.loads(
            m["Properties"]["PrimaryContainer"]["Environment"]["CDK_LLM_SERVING_SERVED_NAMES"]
        )
        for m in models.values()
    )
    assert served == [
        ["gpt-oss-20b-g6-12xlarge", "gpt-oss-20b"],
        ["gpt-oss-20b-g6e-12xlarge", "gpt-oss-20b"],
        ["gpt-oss-20b-g6e-2xlarge", "gpt-oss-20b"],
    ]


def test_pool_file_versions_are_checked(tmp_path):
    path = tmp_path / "pools.json"
    path.write_text(json.dumps({"format": "cdk-llm-serving/pools", "version": 2, "pools": []}))
    with pytest.raises(PoolFileError, match="version = 2: not supported"):
        PoolFile.load(path)
    path.write_text(json.dumps({"format": "something-else", "version": 1}))
    with pytest.raises(PoolFileError, match="format = 'something-else'"):
        PoolFile.load(path)


def test_a_job_without_recommendations_is_a_configuration_error():
    from cdk_llm_serving.errors import ConfigurationError
    from cdk_llm_serving.ops.recommend import pools_from_job

    with pytest.raises(ConfigurationError, match="job = 'j': has no recommendations"):
        pools_from_job({"AIRecommendationJobName": "j", "Recommendations": []}, "cost")

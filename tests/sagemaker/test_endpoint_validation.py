"""Bad input stops synth with one ConfigurationError naming property, value and what is allowed."""

from __future__ import annotations

import re

import botocore.session
import pytest
from aws_cdk import Duration, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match

from cdk_llm_serving import (
    AsyncInference,
    BlueGreenDeployment,
    CapacitySize,
    ConfigurationError,
    ContainerImage,
    InstancePool,
    InstanceType,
    RollingDeployment,
    TrafficShift,
)
from cdk_llm_serving._cdk.service_limits import production_variant_instance_types
from cdk_llm_serving.planning.sizing import ModelSizing
from cdk_llm_serving.sagemaker import deployment as rules
from cdk_llm_serving.sagemaker.endpoint_options import METRIC_PUBLISH_FREQUENCIES
from tests.support.builders import new_stack, pool_endpoint, serving_model, sized_pools, template_of
from tests.support.cfn_schemas import resource_schema
from tests.support.template_helpers import actions_of, only_resource, policy_statements

#: An AWS Neuron (Inferentia) serving image: the CUDA one is refused on ml.inf2 pools.
NEURON_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.31.0-neuronx-sdk2.20.0"


def problems_of(**overrides) -> list[str]:
    with pytest.raises(ConfigurationError) as caught:
        pool_endpoint(**overrides)
    return [str(problem) for problem in caught.value.problems]


def only_problem(**overrides) -> str:
    problems = problems_of(**overrides)
    assert len(problems) == 1, problems
    return problems[0]


def test_no_pools():
    assert only_problem(pools=[]) == "pools = []: must list 1 to 5 instance pools"


def test_more_than_five_pools():
    types = [
        "ml.p5.48xlarge",
        "ml.p5en.48xlarge",
        "ml.p4d.24xlarge",
        "ml.g6e.12xlarge",
        "ml.g6.12xlarge",
        "ml.g5.12xlarge",
    ]
    message = only_problem(pools=[InstancePool(t) for t in types])
    assert message.startswith("pools = ['ml.p5.48xlarge'") and message.endswith(
        "must list 1 to 5 instance pools"
    )


def test_same_instance_type_twice():
    message = only_problem(
        pools=[
            InstancePool("ml.p5.48xlarge"),
            InstancePool("ml.g6e.12xlarge"),
            InstancePool("ml.p5.48xlarge"),
        ]
    )
    assert (
        message
        == "pools[2].instance_type = 'ml.p5.48xlarge': already used by pools[0]; each pool needs its own instance type"
    )


def test_an_unknown_instance_type_is_named_once_with_the_closest_types():
    """One check, ``InstanceType``'s, whichever way the type was given."""
    message = only_problem(pools=[InstancePool("ml.p5.48xlarg")])
    assert message.startswith("pools[0].instance_type = 'ml.p5.48xlarg': not one of the")
    assert "SageMaker instance types" in message and "closest: ml.p5.48xlarge" in message


def test_a_type_hosting_does_not_offer_is_refused_as_a_production_variant_type():
    hyperpod_only = "ml.c5n.18xlarge"
    assert (
        InstanceType(hyperpod_only).hyperpod and not InstanceType(hyperpod_only).sagemaker_hosting
    )
    message = only_problem(pools=[InstancePool(hyperpod_only)])
    assert message.startswith(f"pools[0].instance_type = '{hyperpod_only}': not one of the")
    assert "SageMaker production-variant instance types" in message


def test_pools_take_instance_types_or_their_names_and_render_the_same():
    by_name = template_of(Stack.of(pool_endpoint()))
    typed = pool_endpoint(
        pools=[
            InstancePool(InstanceType.ML_P5_48XLARGE),
            InstancePool(InstanceType.ML_G6E_12XLARGE),
        ]
    )
    assert template_of(Stack.of(typed)) == by_name
    assert all(type(pool.instance_type) is InstanceType for pool in typed.pools)
    assert type(InstancePool("ml.g6e.2xlarge").instance_type) is InstanceType


def test_a_hosting_type_the_catalog_lacks_is_accepted_and_its_fit_unchecked():
    """The one policy for a type botocore offers but the planner's catalog does not record."""
    stack = new_stack()
    assert InstanceType("ml.g4dn.xlarge").spec is None
    model = serving_model(stack, sizing=ModelSizing("gpt-oss-20b", "bf16", max_context=8192))
    pool_endpoint(stack, model=model, pools=[InstancePool("ml.g4dn.xlarge")])
    Annotations.from_stack(stack).has_warning(
        "/Test/Endpoint", Match.string_like_regexp("ml.g4dn.xlarge is not in the planner's catalog")
    )


def test_the_enum_comes_from_botocore_and_knows_blackwell():
    types = production_variant_instance_types()
    assert "ml.p6-b200.48xlarge" in types and "ml.p5en.48xlarge" in types
    assert "ml.p4d.24xlarge" in types and "ml.t3.medium" not in types


@pytest.mark.parametrize(
    ("prop", "seconds", "bounds"),
    [
        ("provision_timeout", 299, "300 and 3600"),
        ("provision_timeout", 3601, "300 and 3600"),
        ("container_startup_timeout", 59, "60 and 3600"),
        ("model_data_download_timeout", 3700, "60 and 3600"),
    ],
)
def test_timeouts_out_of_range(prop, seconds, bounds):
    assert (
        only_problem(**{prop: Duration.seconds(seconds)})
        == f"{prop} = {seconds}: must be between {bounds} seconds"
    )


def test_instance_count_below_one():
    assert (
        only_problem(initial_instance_count=0) == "initial_instance_count = 0: must be at least 1"
    )


def test_model_name_breaking_the_63_character_pattern():
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        serving_model(stack, model_name="x" * 64)
    with pytest.raises(ConfigurationError) as caught_hyphen:
        serving_model(stack, "Other", model_name="-leading-hyphen")
    for error, value in ((caught.value, "x" * 64), (caught_hyphen.value, "-leading-hyphen")):
        (problem,) = error.problems
        assert problem.property == "model_name" and problem.value == value
        assert "1-63 characters" in problem.allowed


def test_async_inference_without_an_output_location():
    assert only_problem(async_inference=AsyncInference(output_bucket=None)) == (
        "async_inference.output_bucket = None: asynchronous inference needs an S3 output location"
    )


def test_endpoint_and_variant_names():
    problems = problems_of(endpoint_name="bad_name", variant_name="")
    assert [p.split(" = ")[0] for p in problems] == ["endpoint_name", "variant_name"]


def test_routing_strategy_outside_the_service_enum():
    message = only_problem(routing_strategy="ROUND_ROBIN")
    assert message.startswith(
        "routing_strategy = 'ROUND_ROBIN': routing strategy must be one of LEAST_OUTSTANDING_REQUESTS, RANDOM"
    )


def test_metric_publish_frequency():
    assert only_problem(metric_publish_frequency=45) == (
        "metric_publish_frequency = 45: must be one of 10, 30, 60, 120, 180, 240, 300 seconds"
    )


def test_kms_key_and_volume_size_rejected_on_local_nvme_types():
    stack = new_stack()
    key = kms.Key(stack, "Key")
    problems = problems_of(volume_kms_key=key, volume_size_gb=100)
    assert problems[0].startswith(
        "volume_kms_key = 'Test/Key': not allowed with instance types that have local NVMe storage (ml.p5.48xlarge, ml.g6e.12xlarge)"
    )
    assert problems[1].startswith(
        "volume_size_gb = 100: not allowed with instance types that have local NVMe storage"
    )


def test_kms_key_and_volume_size_accepted_on_ebs_only_types():
    stack = new_stack()
    endpoint = pool_endpoint(
        stack,
        model=serving_model(stack, image=ContainerImage.from_ecr_uri(NEURON_IMAGE)),
        pools=[InstancePool("ml.inf2.48xlarge")],
        volume_kms_key=kms.Key(stack, "Key"),
        volume_size_gb=256,
    )
    assert endpoint.cfn_endpoint_config.kms_key_id is not None


def test_volume_size_out_of_range():
    stack = new_stack()
    neuron = serving_model(stack, image=ContainerImage.from_ecr_uri(NEURON_IMAGE))
    problems = problems_of(
        stack=stack, model=neuron, pools=[InstancePool("ml.inf2.48xlarge")], volume_size_gb=600
    )
    assert problems == ["volume_size_gb = 600: must be between 1 and 512 GB"]


def test_capacity_reservation_only_with_a_single_pool():
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/reserved-p5"
    message = only_problem(capacity_reservation_arn=arn)
    assert message.startswith(
        f"capacity_reservation_arn = '{arn}': only allowed with a single pool"
    )
    endpoint = pool_endpoint(pools=[InstancePool("ml.p5.48xlarge")], capacity_reservation_arn=arn)
    assert endpoint.cfn_endpoint_config is not None


def test_capacity_reservation_arn_pattern():
    message = only_problem(
        pools=[InstancePool("ml.p5.48xlarge")], capacity_reservation_arn="not-an-arn"
    )
    assert message.startswith(
        "capacity_reservation_arn = 'not-an-arn': must be an ML reservation ARN"
    )


def test_deployment_ranges():
    deployment = BlueGreenDeployment(
        traffic=TrafficShift.all_at_once(bake=Duration.hours(2)),
        maximum_execution_timeout=Duration.minutes(5),
    )
    problems = problems_of(deployment=deployment)
    assert problems == [
        "deployment.traffic.wait = 7200: must be between 0 and 3600 seconds",
        "deployment.maximum_execution_timeout = 300: must be between 600 and 28800 seconds",
        "deployment.maximum_execution_timeout = 300: must be longer than the update's own waits "
        "(7500 s of bake and termination wait); raise it or shorten the waits",
    ]


_TEN_MIN = Duration.minutes(10)

#: Deployment policies SageMaker refuses or that cannot finish, one row per rule: the
#: endpoint's arguments and the property each problem names (botocore ``sagemaker``'s
#: TrafficRoutingConfig, RollingUpdatePolicy and BlueGreenUpdatePolicy documentation).
DEPLOYMENT_MISTAKES = [
    pytest.param(
        {"deployment": BlueGreenDeployment(traffic=TrafficShift.canary(CapacitySize.percent(60)))},
        ["deployment.traffic.step"],
        id="canary-over-half",
    ),
    pytest.param(
        {"deployment": BlueGreenDeployment(traffic=TrafficShift.linear(CapacitySize.percent(5)))},
        ["deployment.traffic.step"],
        id="linear-step-under-ten-percent",
    ),
    pytest.param(
        {"deployment": BlueGreenDeployment(traffic=TrafficShift.linear(CapacitySize.percent(75)))},
        ["deployment.traffic.step"],
        id="linear-step-over-half",
    ),
    pytest.param(
        {"deployment": BlueGreenDeployment(traffic=TrafficShift("CANARY", _TEN_MIN))},
        ["deployment.traffic.step"],
        id="canary-without-size",
    ),
    pytest.param(
        {
            "deployment": BlueGreenDeployment(
                traffic=TrafficShift("ALL_AT_ONCE", _TEN_MIN, CapacitySize.percent(10))
            )
        },
        ["deployment.traffic.step"],
        id="all-at-once-with-size",
    ),
    pytest.param(
        {
            "initial_instance_count": 2,
            "deployment": RollingDeployment(maximum_batch_size=CapacitySize.instances(2)),
        },
        ["deployment.maximum_batch_size"],
        id="rolling-batch-is-the-whole-fleet",
    ),
    pytest.param(
        {
            "initial_instance_count": 3,
            "deployment": BlueGreenDeployment(
                traffic=TrafficShift.canary(CapacitySize.instances(3))
            ),
        },
        ["deployment.traffic.step"],
        id="canary-is-the-whole-fleet",
    ),
    pytest.param(
        {
            "deployment": BlueGreenDeployment(
                traffic=TrafficShift.all_at_once(bake=Duration.minutes(50)),
                termination_wait=Duration.minutes(20),
                maximum_execution_timeout=Duration.hours(1),
            )
        },
        ["deployment.maximum_execution_timeout"],
        id="bake-and-termination-wait-exceed-timeout",
    ),
    pytest.param(
        {
            "deployment": BlueGreenDeployment(
                traffic=TrafficShift.linear(CapacitySize.percent(10), wait=Duration.minutes(30)),
                maximum_execution_timeout=Duration.hours(4),
            )
        },
        ["deployment.maximum_execution_timeout"],
        id="ten-linear-bakes-exceed-timeout",
    ),
    pytest.param(
        {
            "initial_instance_count": 10,
            "deployment": RollingDeployment(
                maximum_batch_size=CapacitySize.instances(1),
                wait=Duration.minutes(30),
                maximum_execution_timeout=Duration.hours(3),
            ),
        },
        ["deployment.maximum_execution_timeout"],
        id="ten-rolling-bakes-exceed-timeout",
    ),
]


@pytest.mark.parametrize(("arguments", "properties"), DEPLOYMENT_MISTAKES)
def test_deployment_policies_that_cannot_work_are_refused(arguments, properties):
    assert [p.split(" = ")[0] for p in problems_of(**arguments)] == properties


@pytest.mark.parametrize(
    "deployment",
    [
        BlueGreenDeployment(traffic=TrafficShift.canary(CapacitySize.percent(50))),
        BlueGreenDeployment(traffic=TrafficShift.linear(CapacitySize.percent(10))),
        BlueGreenDeployment(traffic=TrafficShift.linear(CapacitySize.percent(50))),
        BlueGreenDeployment(
            traffic=TrafficShift.all_at_once(bake=Duration.minutes(50)),
            termination_wait=Duration.minutes(9),
            maximum_execution_timeout=Duration.hours(1),
        ),
    ],
    ids=["canary-half", "linear-ten-percent", "linear-half", "waits-just-inside-timeout"],
)
def test_deployment_policies_at_the_edges_are_accepted(deployment):
    pool_endpoint(deployment=deployment)


def test_the_step_shares_are_the_ones_botocore_documents():
    """The shares ``deployment`` enforces, read against the sentences in botocore's model."""
    model = botocore.session.get_session().get_service_model("sagemaker")

    def doc(shape: str, member: str) -> str:
        return re.sub(r"<[^>]+>", "", model.shape_for(shape).members[member].documentation)

    assert f"between {rules.ROLLING_BATCH_PERCENT[0]}% to {rules.ROLLING_BATCH_PERCENT[1]}%" in doc(
        "RollingUpdatePolicy", "MaximumBatchSize"
    )
    assert f"less than or equal to {rules.CANARY_PERCENT[1]}%" in doc(
        "TrafficRoutingConfig", "CanarySize"
    )
    assert f"must be {rules.LINEAR_STEP_PERCENT[0]}-{rules.LINEAR_STEP_PERCENT[1]}%" in doc(
        "TrafficRoutingConfig", "LinearStepSize"
    )
    assert "larger than the total waiting time" in doc(
        "BlueGreenUpdatePolicy", "MaximumExecutionTimeoutInSeconds"
    )


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigurationError) as caught:
        pool_endpoint(
            pools=[InstancePool("ml.nope.xlarge"), InstancePool("ml.nope.xlarge")],
            initial_instance_count=0,
            provision_timeout=Duration.seconds(10),
            async_inference=AsyncInference(output_bucket=None),
        )
    error = caught.value
    assert [p.property for p in error.problems] == [
        "pools[0].instance_type",
        "pools[1].instance_type",
        "pools[1].instance_type",
        "initial_instance_count",
        "provision_timeout",
        "async_inference.output_bucket",
    ]
    text = str(error)
    assert text.startswith(
        "InstancePoolEndpoint 'Test/Endpoint': 6 problems\n  - pools[0].instance_type = 'ml.nope.xlarge'"
    )


def test_valid_async_endpoint_writes_to_its_bucket_and_may_write_there():
    stack = new_stack()
    bucket = s3.Bucket(stack, "Out")
    pool_endpoint(
        stack,
        async_inference=AsyncInference(
            output_bucket=bucket, max_concurrent_invocations_per_instance=4
        ),
    )
    template = template_of(stack)
    _, config = only_resource(template, "AWS::SageMaker::EndpointConfig")
    async_config = config["Properties"]["AsyncInferenceConfig"]
    assert async_config["ClientConfig"] == {"MaxConcurrentInvocationsPerInstance": 4}
    assert async_config["OutputConfig"]["S3OutputPath"]["Fn::Join"][1][-1] == "/async-output/"
    model_id, _ = only_resource(template, "AWS::SageMaker::Model")
    role_id = template["Resources"][model_id]["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    puts = [s for s in policy_statements(template, role_id) if "s3:PutObject" in actions_of(s)]
    assert puts, "the model role must be able to write async results"
    for put in puts:  # only into the bucket of the account it belongs to
        assert put["Condition"] == {
            "StringEquals": {"aws:ResourceAccount": {"Ref": "AWS::AccountId"}}
        }


def test_metric_publish_frequencies_are_cloudformations():
    """botocore has no enum for this field; CloudFormation's schema does, and wins."""
    schema = resource_schema("AWS::SageMaker::EndpointConfig")
    field = schema["definitions"]["MetricsConfig"]["properties"]["MetricPublishFrequencyInSeconds"]
    assert tuple(field["enum"]) == METRIC_PUBLISH_FREQUENCIES


def test_a_reserved_variant_names_the_reservations_instance_type_not_pools():
    """AWS: "The InstanceType field set in the ProductionVariants must match the InstanceType
    of your training plan" (use-training-plan-for-inference-endpoints-using-api-cli-sdk); pools
    replace InstanceType (realtime-endpoints-heterogeneous), so the reserved variant has none."""
    from cdk_llm_serving.core.fleet_utilization import MetricQuery
    from tests.support.builders import new_stack, template_of
    from tests.support.linting import lint_template
    from tests.support.template_helpers import only_resource

    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/reserved-p5"
    stack = new_stack()
    endpoint = pool_endpoint(
        stack,
        pools=[InstancePool("ml.p5.48xlarge", max_concurrency=20)],
        capacity_reservation_arn=arn,
    )
    endpoint.auto_scale(max_capacity=2)
    template = template_of(stack)
    (variant,) = only_resource(template, "AWS::SageMaker::EndpointConfig")[1]["Properties"][
        "ProductionVariants"
    ]
    assert variant["InstanceType"] == "ml.p5.48xlarge"
    assert "InstancePools" not in variant
    assert variant["CapacityReservationConfig"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "MlReservationArn": arn,
    }
    # Without pools the series carry no InstanceType: scaling reads the variant's own.
    queries: list[MetricQuery] = endpoint.auto_scaling.fleet_queries or []
    assert queries and all(
        "InstanceType" not in dict(q.dimensions) for q in queries if q.metric_name
    )
    assert not lint_template(template)


def test_gpu_pool_endpoints_update_rolling_by_default():
    """AWS: rolling updates need fewer extra instances, "useful especially for accelerated
    instances that are in high demand" (deployment-guardrails-rolling)."""
    from tests.support.builders import new_stack, template_of
    from tests.support.template_helpers import only_resource

    stack = new_stack()
    pool_endpoint(stack, initial_instance_count=4)
    config = only_resource(template_of(stack), "AWS::SageMaker::Endpoint")[1]["Properties"][
        "DeploymentConfig"
    ]
    assert "BlueGreenUpdatePolicy" not in config
    rolling = config["RollingUpdatePolicy"]
    one = {"Type": "INSTANCE_COUNT", "Value": 1}
    assert rolling["MaximumBatchSize"] == one and rolling["RollbackMaximumBatchSize"] == one
    assert config["AutoRollbackConfiguration"]["Alarms"]


def test_a_single_gpu_instance_stays_blue_green_and_says_why():
    from aws_cdk.assertions import Annotations, Match

    from tests.support.builders import new_stack, template_of
    from tests.support.template_helpers import only_resource

    stack = new_stack()
    pool_endpoint(stack)
    config = only_resource(template_of(stack), "AWS::SageMaker::Endpoint")[1]["Properties"][
        "DeploymentConfig"
    ]
    assert "BlueGreenUpdatePolicy" in config
    Annotations.from_stack(stack).has_warning(
        "*", Match.string_like_regexp("blueGreenOnOneGpuInstance")
    )


def test_a_rolling_batch_is_five_to_fifty_percent_of_the_fleet():
    from cdk_llm_serving import RollingDeployment
    from cdk_llm_serving.sagemaker.deployment import CapacitySize

    message = only_problem(
        deployment=RollingDeployment(maximum_batch_size=CapacitySize.percent(60))
    )
    assert "a rolling batch must be 5-50% of the variant's instances" in message


def test_a_rolling_batch_is_checked_against_the_autoscaling_range():
    """SageMaker checks the batch against the variant's count at update time: with autoscaling
    from 1 to 4 a batch of one instance is 100 % at the minimum."""
    from aws_cdk.assertions import Annotations, Match

    from tests.support.builders import new_stack, template_of

    stack = new_stack()
    endpoint = pool_endpoint(stack, pools=sized_pools(), initial_instance_count=2)
    endpoint.auto_scale(min_capacity=1, max_capacity=4)
    template_of(stack)
    Annotations.from_stack(stack).has_warning(
        "*", Match.string_like_regexp("at 1 instance.*rollingBatchOutsideScalingRange")
    )
    quiet = new_stack()
    pool_endpoint(quiet, pools=sized_pools(), initial_instance_count=2).auto_scale(
        min_capacity=2, max_capacity=4
    )
    template_of(quiet)
    Annotations.from_stack(quiet).has_no_warning(
        "*", Match.string_like_regexp("rollingBatchOutsideScalingRange")
    )

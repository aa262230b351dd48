"""InstancePoolEndpoint's programmatic surface: grants, metrics, L1 access, deployments."""

from __future__ import annotations

from aws_cdk import aws_iam as iam

from cdk_llm_serving import (
    BlueGreenDeployment,
    CapacitySize,
    InstancePool,
    RollingDeployment,
    TrafficShift,
)
from tests.support.builders import new_stack, pool_endpoint, serving_model, template_of
from tests.support.template_helpers import (
    actions_of,
    only_resource,
    policy_statements,
)


def test_grant_invoke_covers_streaming_and_the_openai_path():
    stack = new_stack()
    endpoint = pool_endpoint(stack)
    role = iam.Role(stack, "Client", assumed_by=iam.AccountRootPrincipal())
    endpoint.grant_invoke(role)
    template = template_of(stack)
    statements = policy_statements(template, stack.get_logical_id(role.node.default_child))
    invoke = next(s for s in statements if "sagemaker:InvokeEndpoint" in actions_of(s))
    assert actions_of(invoke) == [
        "sagemaker:InvokeEndpoint",
        "sagemaker:InvokeEndpointWithResponseStream",
    ]
    assert invoke["Resource"]["Fn::Join"][1][-1].endswith(
        f":endpoint/{endpoint.endpoint_name.lower()}"
    )
    bearer = next(s for s in statements if "sagemaker:CallWithBearerToken" in actions_of(s))
    assert bearer["Resource"] == "*"


def test_default_child_and_named_l1s():
    endpoint = pool_endpoint()
    assert endpoint.node.default_child is endpoint.cfn_endpoint
    assert endpoint.cfn_endpoint_config.node.id == "Config"


def test_metric_per_pool_adds_the_instance_type_dimension():
    endpoint = pool_endpoint()
    metric = endpoint.metric(
        "ConcurrentRequestsPerModel", instance_type="ml.g6e.12xlarge", statistic="Maximum"
    )
    assert metric.dimensions == {
        "EndpointName": endpoint.endpoint_name,
        "VariantName": "AllTraffic",
        "InstanceType": "ml.g6e.12xlarge",
    }
    assert metric.namespace == "AWS/SageMaker" and metric.statistic == "Maximum"


def test_a_pool_serving_the_endpoint_model_needs_no_override():
    stack = new_stack()
    model = serving_model(stack)
    endpoint = pool_endpoint(
        stack, model=model, pools=[InstancePool("ml.p5.48xlarge", model=model)]
    )
    assert endpoint.models == (model,)
    _, config = only_resource(template_of(stack), "AWS::SageMaker::EndpointConfig")
    assert (
        "ModelNameOverride" not in config["Properties"]["ProductionVariants"][0]["InstancePools"][0]
    )


def test_rolling_deployment_and_custom_rollback_alarms():
    stack = new_stack()
    endpoint = pool_endpoint(
        stack,
        deployment=RollingDeployment(maximum_batch_size=CapacitySize.percent(25)),
        rollback_alarms=[],
    )
    _, resource = only_resource(template_of(stack), "AWS::SageMaker::Endpoint")
    deployment = resource["Properties"]["DeploymentConfig"]
    assert deployment["RollingUpdatePolicy"]["MaximumBatchSize"] == {
        "Type": "CAPACITY_PERCENT",
        "Value": 25,
    }
    assert "AutoRollbackConfiguration" not in deployment
    assert endpoint.rollback_alarms == ()


def test_canary_blue_green():
    stack = new_stack()
    pool_endpoint(
        stack,
        initial_instance_count=2,  # a canary of one is at most half of the fleet
        deployment=BlueGreenDeployment(traffic=TrafficShift.canary(CapacitySize.instances(1))),
    )
    _, resource = only_resource(template_of(stack), "AWS::SageMaker::Endpoint")
    routing = resource["Properties"]["DeploymentConfig"]["BlueGreenUpdatePolicy"][
        "TrafficRoutingConfiguration"
    ]
    assert routing == {
        "Type": "CANARY",
        "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1},
        "WaitIntervalInSeconds": 600,
    }

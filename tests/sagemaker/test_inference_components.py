"""Inference components on an instance-pool endpoint: a specification per pool type."""

from __future__ import annotations

import pytest
from aws_cdk import Duration, Validations
from aws_cdk.assertions import Annotations, Match
from cdk_nag import AwsSolutionsChecks

from cdk_llm_serving import (
    ComponentSpecification,
    ConfigurationError,
    InferenceComponentEndpoint,
    InferenceComponentOnPools,
    InstancePool,
)
from cdk_llm_serving.planning.sizing import ModelSizing
from tests.support.builders import new_stack, pool_endpoint, serving_model, template_of
from tests.support.linting import lint_template
from tests.support.template_helpers import actions_of, only_resource, policy_statements

POOLS = [InstancePool("ml.g6e.12xlarge"), InstancePool("ml.g6e.2xlarge")]


def component_endpoint(stack, pools=POOLS, **options):
    return InferenceComponentEndpoint(stack, "Endpoint", pools=pools, **options)


def component_stack(**overrides):
    stack = new_stack("Components")
    full = serving_model(
        stack, "Full", sizing=ModelSizing("gpt-oss-20b", "bf16", max_context=32768)
    )
    int4 = serving_model(
        stack, "Int4", sizing=ModelSizing("gpt-oss-20b", "int4", max_context=32768)
    )
    endpoint = component_endpoint(stack, managed_instance_count=(1, 4))
    props = {
        "endpoint": endpoint,
        "specifications": [
            ComponentSpecification("ml.g6e.12xlarge", full, accelerators=4, min_memory_mb=65536),
            ComponentSpecification("ml.g6e.2xlarge", int4, accelerators=1, min_memory_mb=16384),
        ],
    }
    props.update(overrides)
    component = InferenceComponentOnPools(stack, "Component", **props)
    return stack, endpoint, component


def test_specifications_per_pool_and_an_endpoint_without_a_model():
    stack, endpoint, component = component_stack()
    component.auto_scale_copies(min_copies=1, max_copies=4, target_concurrent_requests_per_copy=8)
    template = template_of(stack)
    _, resource = only_resource(template, "AWS::SageMaker::InferenceComponent")
    specs = resource["Properties"]["Specifications"]
    assert [
        (s["InstanceType"], s["ComputeResourceRequirements"]["NumberOfAcceleratorDevicesRequired"])
        for s in specs
    ] == [("ml.g6e.12xlarge", 4), ("ml.g6e.2xlarge", 1)]
    assert "Specification" not in resource["Properties"]
    assert resource["Properties"]["RuntimeConfig"] == {"CopyCount": 1}
    _, config = only_resource(template, "AWS::SageMaker::EndpointConfig")
    variant = config["Properties"]["ProductionVariants"][0]
    assert "ModelName" not in variant and "ModelDataDownloadTimeoutInSeconds" not in variant
    assert variant["ManagedInstanceScaling"] == {
        "Status": "ENABLED",
        "MinInstanceCount": 1,
        "MaxInstanceCount": 4,
    }
    role_id = config["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    statements = policy_statements(template, role_id)
    assert any("s3:GetObject" in actions_of(s) for s in statements) and any(
        "ecr:BatchGetImage" in actions_of(s) for s in statements
    )
    _, endpoint_resource = only_resource(template, "AWS::SageMaker::Endpoint")
    assert "DeploymentConfig" not in endpoint_resource["Properties"]
    _, policy = only_resource(template, "AWS::ApplicationAutoScaling::ScalingPolicy")
    spec = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert (
        spec["PredefinedMetricSpecification"]["PredefinedMetricType"]
        == "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
    )
    matches = lint_template(template)
    assert not matches, "\n".join(map(str, matches))


def test_cdk_nag_accepts_the_component_stack():
    stack, _, _ = component_stack()
    app = stack.node.root
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    for model_id in ("Full", "Int4"):
        from aws_cdk import Acknowledgment

        Validations.of(stack.node.find_child(model_id)).acknowledge(
            Acknowledgment(id="AwsSolutions-SM1", reason="test stack: network isolation, no VPC")
        )
    app.synth()  # raises on any unacknowledged finding


def test_one_pool_uses_the_singular_specification():
    stack = new_stack()
    model = serving_model(stack)
    endpoint = component_endpoint(stack, pools=[InstancePool("ml.g6e.12xlarge")])
    InferenceComponentOnPools(
        stack,
        "Component",
        endpoint=endpoint,
        specifications=[ComponentSpecification("ml.g6e.12xlarge", model, 4, 1024)],
    )
    _, resource = only_resource(template_of(stack), "AWS::SageMaker::InferenceComponent")
    assert (
        "Specifications" not in resource["Properties"]
        and "InstanceType" not in resource["Properties"]["Specification"]
    )


def test_validation_reports_every_problem():
    stack = new_stack()
    model = serving_model(stack, sizing=ModelSizing("gpt-oss-20b", "bf16", max_context=32768))
    endpoint = component_endpoint(stack)
    with pytest.raises(ConfigurationError) as caught:
        InferenceComponentOnPools(
            stack,
            "Component",
            endpoint=endpoint,
            copy_count=-1,
            specifications=[
                ComponentSpecification("ml.p5.48xlarge", model, 9, 64),
                ComponentSpecification("ml.g6e.2xlarge", model, 2, 1024),
            ],
        )
    properties = [p.property for p in caught.value.problems]
    assert properties == [
        "specifications[0].instance_type",
        "specifications[0].accelerators",
        "specifications[0].min_memory_mb",
        "specifications[1].accelerators",
        "specifications[1].instance_type",
        "specifications",
        "copy_count",
    ]
    assert "cannot hold model" in caught.value.problems[4].allowed


def test_component_needs_an_endpoint_built_for_components():
    stack = new_stack()
    endpoint = pool_endpoint(stack, pools=[InstancePool("ml.g6e.12xlarge")])
    with pytest.raises(
        ConfigurationError, match="must be InferenceComponentEndpoint, not an InstancePoolEndpoint"
    ):
        InferenceComponentOnPools(
            stack,
            "Component",
            endpoint=endpoint,
            specifications=[ComponentSpecification("ml.g6e.12xlarge", endpoint.model, 4, 1024)],
        )


def test_component_endpoint_rejects_pool_models_and_model_options():
    stack = new_stack()
    model = serving_model(stack)
    with pytest.raises(ConfigurationError, match="hosts no models of its own"):
        component_endpoint(stack, pools=[InstancePool("ml.g6e.12xlarge", model=model)])
    endpoint = component_endpoint(new_stack())
    assert not hasattr(endpoint, "auto_scale") and endpoint.auto_scaling is None
    with pytest.raises(ConfigurationError) as caught:
        component_endpoint(new_stack(), container_startup_timeout=Duration.minutes(5))
    assert str(caught.value.problems[0]) == (
        "container_startup_timeout = '5 minutes': not an option of an inference-component "
        "endpoint: each component sets its own (InferenceComponentOnPools)"
    )
    with pytest.raises(
        ConfigurationError, match="only for endpoints that host inference components"
    ):
        pool_endpoint(new_stack(), managed_instance_count=(1, 2))


def test_a_hosting_type_the_catalog_lacks_is_accepted_and_said_unchecked():
    stack = new_stack()
    model = serving_model(stack, sizing=ModelSizing("gpt-oss-20b", "bf16", max_context=8192))
    endpoint = component_endpoint(stack, pools=[InstancePool("ml.g4dn.12xlarge")])
    InferenceComponentOnPools(
        stack,
        "Component",
        endpoint=endpoint,
        specifications=[ComponentSpecification("ml.g4dn.12xlarge", model, 4, 1024)],
    )
    Annotations.from_stack(stack).has_warning(
        "/Test/Component",
        Match.string_like_regexp("ml.g4dn.12xlarge is not in the planner's catalog"),
    )

"""Changing pools, models or counts must update the endpoint in place, never replace it.

Two versions of one stack are synthesized; CloudFormation replaces a resource when a
create-only property changes, so the test reads AWS::SageMaker::Endpoint's create-only
properties from the resource schema that cfn-lint ships and compares them.
"""

from __future__ import annotations

import json

import pytest
from aws_cdk import Duration

from cdk_llm_serving import ConfigurationError, ContainerImage, InstancePool
from cdk_llm_serving.sagemaker.update_rules import autoscaled_update_problems
from tests.support.builders import new_stack, pool_endpoint, serving_model, template_of
from tests.support.cfn_schemas import resource_schema
from tests.support.template_helpers import only_resource


def create_only_properties(resource_type: str) -> list[str]:
    schema = resource_schema(resource_type)
    return [
        pointer.removeprefix("/properties/") for pointer in schema.get("createOnlyProperties", [])
    ]


def version_one() -> dict:
    stack = new_stack("Serving")
    pool_endpoint(stack, pools=[InstancePool("ml.p5.48xlarge"), InstancePool("ml.g6e.12xlarge")])
    return template_of(stack)


def version_two() -> dict:
    """New pool order and a third pool with its own quantized model, more instances, new image tag."""
    stack = new_stack("Serving")
    from cdk_llm_serving import ContainerImage

    model = serving_model(
        stack,
        image=ContainerImage.from_ecr_uri("763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:v2"),
    )
    quantized = serving_model(stack, "Quantized")
    pool_endpoint(
        stack,
        model=model,
        pools=[
            InstancePool("ml.p5en.48xlarge"),
            InstancePool("ml.p5.48xlarge"),
            InstancePool("ml.g6e.2xlarge", model=quantized),
        ],
        initial_instance_count=3,
        provision_timeout=Duration.minutes(50),
    )
    return template_of(stack)


def test_endpoint_keeps_its_logical_id_and_every_create_only_property():
    before, after = version_one(), version_two()
    before_id, before_endpoint = only_resource(before, "AWS::SageMaker::Endpoint")
    after_id, after_endpoint = only_resource(after, "AWS::SageMaker::Endpoint")
    assert before_id == after_id
    create_only = create_only_properties("AWS::SageMaker::Endpoint")
    assert "EndpointName" in create_only
    for prop in create_only:
        assert before_endpoint["Properties"].get(prop) == after_endpoint["Properties"].get(prop), (
            prop
        )
    assert isinstance(before_endpoint["Properties"]["EndpointName"], str)


def test_the_endpoint_config_is_replaced_under_a_generated_name():
    before, after = version_one(), version_two()
    (config_id, before_config), (_, after_config) = (
        only_resource(before, "AWS::SageMaker::EndpointConfig"),
        only_resource(after, "AWS::SageMaker::EndpointConfig"),
    )
    # ProductionVariants is create-only: the change replaces the config ...
    assert "ProductionVariants" in create_only_properties("AWS::SageMaker::EndpointConfig")
    assert (
        before_config["Properties"]["ProductionVariants"]
        != after_config["Properties"]["ProductionVariants"]
    )
    # ... which works only because CloudFormation names it: a fixed name would clash with the old one.
    assert "EndpointConfigName" not in after_config["Properties"]
    _, endpoint = only_resource(after, "AWS::SageMaker::Endpoint")
    assert endpoint["Properties"]["EndpointConfigName"] == {
        "Fn::GetAtt": [config_id, "EndpointConfigName"]
    }


def test_replaced_models_get_generated_names_too():
    after = version_two()
    models = [r for r in after["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    assert len(models) == 2
    assert all("ModelName" not in model["Properties"] for model in models)
    assert "PrimaryContainer" in create_only_properties("AWS::SageMaker::Model")


# -- autoscaled endpoints -----------------------------------------------------------------


def autoscaled(pools: list[InstancePool], *, image_tag: str = "v1", count: int = 1) -> dict:
    """An autoscaled endpoint; version two changes the image, the count and the pool order."""
    stack = new_stack("Scaled")
    image = ContainerImage.from_ecr_uri(
        f"763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:{image_tag}"
    )
    endpoint = pool_endpoint(
        stack, model=serving_model(stack, image=image), pools=pools, initial_instance_count=count
    )
    endpoint.auto_scale(max_capacity=6)
    return template_of(stack)


SCALED_POOLS = [
    InstancePool("ml.p5.48xlarge", max_concurrency=64),
    InstancePool("ml.g6e.12xlarge", max_concurrency=16),
]


def test_an_autoscaled_endpoint_keeps_its_count_and_updates_in_place():
    before = autoscaled(SCALED_POOLS)
    after = autoscaled(list(reversed(SCALED_POOLS)), image_tag="v2", count=2)
    (before_id, before_endpoint), (after_id, after_endpoint) = (
        only_resource(before, "AWS::SageMaker::Endpoint"),
        only_resource(after, "AWS::SageMaker::Endpoint"),
    )
    assert before_id == after_id
    for prop in create_only_properties("AWS::SageMaker::Endpoint"):
        assert before_endpoint["Properties"].get(prop) == after_endpoint["Properties"].get(prop)
    # Keeps the instance count autoscaling set (and the weight), excludes nothing, and takes
    # the new config's deployment policy (RetainDeploymentConfig unset = false).
    properties = after_endpoint["Properties"]
    assert properties["RetainAllVariantProperties"] is True
    assert "ExcludeRetainedVariantProperties" not in properties
    assert "RetainDeploymentConfig" not in properties
    schema = resource_schema("AWS::SageMaker::Endpoint")["properties"]
    assert schema["RetainAllVariantProperties"]["type"] == "boolean"
    # Same scalable target and policy (logical ids and create-only identity).
    (target_id, target), (after_target_id, after_target) = (
        only_resource(before, "AWS::ApplicationAutoScaling::ScalableTarget"),
        only_resource(after, "AWS::ApplicationAutoScaling::ScalableTarget"),
    )
    assert target_id == after_target_id
    for prop in create_only_properties("AWS::ApplicationAutoScaling::ScalableTarget"):
        assert target["Properties"].get(prop) == after_target["Properties"].get(prop), prop
    # A model/image change on the same instance types is what AWS allows.
    assert autoscaled_update_problems(before, after) == []


def test_endpoints_without_autoscaling_take_the_counts_of_the_new_config():
    _, endpoint = only_resource(version_two(), "AWS::SageMaker::Endpoint")
    assert "RetainAllVariantProperties" not in endpoint["Properties"]


def test_changing_instance_types_of_an_autoscaled_variant_is_named_before_deploy():
    before = autoscaled(SCALED_POOLS)
    after = autoscaled([SCALED_POOLS[0], InstancePool("ml.g6.12xlarge", max_concurrency=8)])
    (problem,) = autoscaled_update_problems(before, after)
    assert problem.property.endswith("variant AllTraffic")
    assert "ml.g6.12xlarge" in problem.value and "deploy once without auto_scale" in problem.allowed
    # Without RetainAllVariantProperties the count would be reset: named too.
    _, endpoint = only_resource(after, "AWS::SageMaker::Endpoint")
    del endpoint["Properties"]["RetainAllVariantProperties"]
    assert len(autoscaled_update_problems(before, after)) == 2


def test_synth_refuses_an_instance_type_change_against_the_deployed_template(tmp_path):
    """``-c cdk-llm-serving:deployed-template=<get-template output>`` turns the rule into a synth error."""
    deployed = tmp_path / "deployed.json"
    deployed.write_text(json.dumps({"TemplateBody": autoscaled(SCALED_POOLS)}))
    changed_pools = [SCALED_POOLS[0], InstancePool("ml.g6.12xlarge", max_concurrency=8)]
    stack = new_stack("Scaled", **{"cdk-llm-serving:deployed-template": str(deployed)})
    with pytest.raises(ConfigurationError) as error:
        pool_endpoint(stack, pools=changed_pools).auto_scale(max_capacity=6)
    assert "SageMaker refuses instance-type changes of an autoscaled variant" in str(error.value)
    # Dropping auto_scale in the same deploy does not help: the deployed target still exists
    # while CloudFormation updates the endpoint.
    stack = new_stack("Scaled", **{"cdk-llm-serving:deployed-template": str(deployed)})
    with pytest.raises(ConfigurationError) as error:
        pool_endpoint(stack, pools=changed_pools)
    assert "SageMaker refuses instance-type changes of an autoscaled variant" in str(error.value)
    # The same types in another order (and another image) pass.
    stack = new_stack("Scaled", **{"cdk-llm-serving:deployed-template": str(deployed)})
    pool_endpoint(stack, pools=list(reversed(SCALED_POOLS))).auto_scale(max_capacity=6)

"""SageMaker roles write only the log groups of what they serve.

Before, every model role could create and write every log group under ``/aws/sagemaker/``
of the account. Read from the synthesized policies: each ``logs:`` statement names the
endpoint's own group (``/aws/sagemaker/Endpoints/<name>``) or an inference component's
(``/aws/sagemaker/InferenceComponents/<name>``) and their streams, nothing else.
"""

from __future__ import annotations

from aws_cdk import CfnParameter, Stack

from tests.support.builders import int4_copies_on_two_g6e, new_stack, pool_endpoint, template_of
from tests.support.template_helpers import actions_of, flatten, resources_of_type


def _log_resources(template: dict) -> dict[str, list[str]]:
    """Each policy's ``logs:`` resources, as text (deploy-time parts become ``TOKEN``)."""
    found: dict[str, list[str]] = {}
    for key, policy in {
        **resources_of_type(template, "AWS::IAM::ManagedPolicy"),
        **resources_of_type(template, "AWS::IAM::Policy"),
    }.items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if any(action.startswith("logs:") for action in actions_of(statement)):
                resources = statement["Resource"]
                found.setdefault(key, []).extend(
                    flatten(r) for r in (resources if isinstance(resources, list) else [resources])
                )
    return found


def _groups(name: str) -> list[str]:
    arn = f"arn:aws:logs:us-east-1:TOKEN:log-group:{name}"
    return [arn, f"{arn}:log-stream:*"]


def test_the_reference_models_write_their_endpoint_s_log_group_only(reference_templates):
    template = reference_templates["GptOss20bPoolEndpoint"]
    ((_, endpoint),) = resources_of_type(template, "AWS::SageMaker::Endpoint").items()
    name = endpoint["Properties"]["EndpointName"]
    found = _log_resources(template)
    models = [key for key in found if "ExecutionRolePolicy" in key]
    assert len(models) == 3
    for key in models:
        assert found[key] == [
            r.replace("us-east-1", "us-west-2") for r in _groups(f"/aws/sagemaker/Endpoints/{name}")
        ], key


def test_a_deploy_time_endpoint_name_stays_in_the_log_group_arn():
    stack = new_stack("LogsToken")
    name = CfnParameter(stack, "EndpointName").value_as_string
    pool_endpoint(stack, endpoint_name=name)
    template = template_of(stack)
    (model,) = [key for key in _log_resources(template) if key.startswith("ModelExecutionRole")]
    (policy,) = [
        p
        for key, p in resources_of_type(template, "AWS::IAM::ManagedPolicy").items()
        if key == model
    ]
    (statement,) = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if "logs:PutLogEvents" in actions_of(s)
    ]
    assert all({"Ref": "EndpointName"} in r["Fn::Join"][1] for r in statement["Resource"])
    assert sorted(flatten(r) for r in statement["Resource"]) == _groups(
        "/aws/sagemaker/Endpoints/TOKEN"
    )


def test_inference_components_write_their_own_and_their_endpoint_s_groups():
    component = int4_copies_on_two_g6e()
    template = template_of(Stack.of(component))
    endpoint_group = f"/aws/sagemaker/Endpoints/{component.endpoint.endpoint_name}"
    component_group = f"/aws/sagemaker/InferenceComponents/{component.component_name}"
    found = _log_resources(template)
    (host,) = [key for key in found if key.startswith("EndpointExecutionRolePolicy")]
    (model,) = [key for key in found if key.startswith("ModelExecutionRolePolicy")]
    assert sorted(found[host]) == sorted(_groups(endpoint_group) + _groups(component_group))
    assert sorted(found[model]) == sorted(_groups(component_group) + _groups(endpoint_group))
    assert not any(r.endswith("/aws/sagemaker/*") for rs in found.values() for r in rs)

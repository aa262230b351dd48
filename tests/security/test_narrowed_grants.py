"""The node role's network-interface grants stay in the cluster's VPC (issue 32)."""

from __future__ import annotations

from tests.support.template_helpers import resources_of_type

#: Actions that change network interfaces (Service Authorization Reference, Amazon EC2).
_MUTATING = {
    "ec2:AssignPrivateIpAddresses",
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DetachNetworkInterface",
    "ec2:ModifyNetworkInterfaceAttribute",
    "ec2:UnassignPrivateIpAddresses",
}


def _node_policy_statements(template: dict) -> list[dict]:
    (policy,) = [
        p
        for key, p in resources_of_type(template, "AWS::IAM::ManagedPolicy").items()
        if key.startswith("HyperPodExecutionRolePolicy")
    ]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def _as_list(value):
    return value if isinstance(value, list) else [value]


def test_no_network_interface_change_on_every_resource(reference_templates):
    template = reference_templates["ReferenceMoeHyperPod"]
    (vpc_id,) = resources_of_type(template, "AWS::EC2::VPC")
    for statement in _node_policy_statements(template):
        actions = set(_as_list(statement["Action"])) & _MUTATING
        if not actions:
            continue
        assert statement["Resource"] != "*", statement
        resources = str(statement["Resource"])
        if "network-interface/*" in resources and actions != {"ec2:CreateNetworkInterface"}:
            # Existing interfaces: only those of the cluster's VPC.
            vpc = statement["Condition"]["ArnEquals"]["ec2:Vpc"]
            assert vpc_id in str(vpc), statement
        if "subnet/*" in resources or "security-group/*" in resources:
            assert vpc_id in str(statement["Condition"]["ArnEquals"]["ec2:Vpc"]), statement


def test_the_api_key_is_on_its_own_key_and_names_its_reader(reference_templates):
    template = reference_templates["ReferenceMoeHyperPod"]
    (secret_id, secret) = next(
        iter(resources_of_type(template, "AWS::SecretsManager::Secret").items())
    )
    key_ref = secret["Properties"]["KmsKeyId"]["Fn::GetAtt"][0]
    key = template["Resources"][key_ref]
    assert key["Type"] == "AWS::KMS::Key" and key["Properties"]["EnableKeyRotation"] is True
    (policy,) = [
        p["Properties"]
        for p in resources_of_type(template, "AWS::SecretsManager::ResourcePolicy").values()
        if p["Properties"]["SecretId"] == {"Ref": secret_id}
    ]
    allow, deny = policy["ResourcePolicy"]["Statement"]
    reader = allow["Principal"]["AWS"]["Fn::GetAtt"][0]
    assert reader.startswith("ServingWeightsRole") and allow["Effect"] == "Allow"
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    assert deny["Condition"] == {
        "StringNotEquals": {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}
    }

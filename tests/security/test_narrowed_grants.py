"""The node role's network-interface grants stay in the cluster's VPC."""

from __future__ import annotations

import fnmatch
import json

from cdk_llm_serving.model_sources import ModelData
from tests.support.builders import new_stack, template_of
from tests.support.hyperpod import deepseek_service, small_cluster
from tests.support.template_helpers import (
    actions_of,
    manifest_objects,
    policy_statements,
    resources_of_type,
)

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


def _worker_templates(template: dict) -> list[tuple[str, str, dict]]:
    """(LeaderWorkerSet name, namespace, worker pod template) of each multi-node set."""
    found = []
    for obj in manifest_objects(template, ""):
        if obj.get("kind") != "LeaderWorkerSet":
            continue
        pods = obj["spec"]["leaderWorkerTemplate"]
        if "leaderTemplate" in pods:  # one node a replica: the only pod is the leader
            found.append((obj["metadata"]["name"], obj["metadata"]["namespace"], pods))
    return found


def _roles_of(template: dict, namespace: str, service_account: str) -> list[str]:
    """The roles Pod Identity gives ``namespace/service_account`` (their logical ids)."""
    return [
        association["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        for association in resources_of_type(template, "AWS::EKS::PodIdentityAssociation").values()
        if association["Properties"]["Namespace"] == namespace
        and association["Properties"]["ServiceAccount"] == service_account
    ]


def _reads_secret(statement: dict, secret_id: str) -> bool:
    """An Allow of ``secretsmanager:GetSecretValue`` on the secret (or on a pattern over it)."""
    if statement["Effect"] != "Allow":
        return False
    if not any(fnmatch.fnmatch("secretsmanager:GetSecretValue", a) for a in actions_of(statement)):
        return False
    resources = _as_list(statement["Resource"])
    return any(r == "*" or {"Ref": secret_id} == r or secret_id in str(r) for r in resources)


def _play_workers(template: dict) -> dict[str, list[str]]:
    """Played from each worker template: its service account, the Pod Identity association
    of that account, the role, the role's policies against each secret, and the secrets'
    resource policies. Asserts no worker reaches a reader while its leader does (the
    control); returns each worker service account's roles."""
    secrets = list(resources_of_type(template, "AWS::SecretsManager::Secret"))
    resource_policies = resources_of_type(template, "AWS::SecretsManager::ResourcePolicy")
    workers = _worker_templates(template)
    assert secrets and workers
    found: dict[str, list[str]] = {}
    for name, namespace, pods in workers:
        leader = pods["leaderTemplate"]["spec"]["serviceAccountName"]
        worker = pods["workerTemplate"]["spec"]["serviceAccountName"]
        assert worker != leader, name
        assert any(
            _reads_secret(statement, secret)
            for role in _roles_of(template, namespace, leader)
            for statement in policy_statements(template, role)
            for secret in secrets
        ), f"{name}: the leader's role reads the key"
        found[worker] = _roles_of(template, namespace, worker)
        for role in found[worker]:
            for secret in secrets:
                assert not any(
                    _reads_secret(statement, secret)
                    for statement in policy_statements(template, role)
                ), (name, role, secret)
            for policy in resource_policies.values():
                assert role not in json.dumps(policy["Properties"]["ResourcePolicy"]), (name, role)
    return found


def test_no_worker_pod_can_read_the_api_key_from_the_store(reference_templates):
    """The reference app's workers read the FSx store's volume: no role at all."""
    found = _play_workers(reference_templates["ReferenceMoeHyperPod"])
    assert found == {"reference-moe-nvfp4-vllm-worker": []}


def test_streaming_workers_read_the_weights_and_not_the_api_key():
    """Streaming from S3, each worker's role reads the weights prefix and nothing else."""
    stack = new_stack("StreamWorkers")
    cluster, addons, _ = small_cluster(stack)  # the store stays unused: weights from S3
    service = deepseek_service(
        stack,
        cluster,
        addons,
        weight_format="bf16",
        weights=ModelData.from_s3_uri("s3://weights-bucket/deepseek-v3/"),
    )
    assert service.nodes > 1
    found = _play_workers(template_of(stack))
    ((account, (role,)),) = found.items()
    assert account == service.worker_service_account
    statements = policy_statements(template_of(stack), role)
    assert sorted(a for s in statements for a in actions_of(s)) == [
        "s3:GetObject",
        "s3:ListBucket",
    ]

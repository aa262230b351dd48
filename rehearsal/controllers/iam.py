"""The HyperPod nodes' execution role carries what the VPC CNI needs when the CNI has no role
of its own.

* The Amazon VPC CNI (the ``aws-node`` DaemonSet) calls EC2 to attach network interfaces and
  assign pod addresses; without an IAM role for its service account (the add-on's
  ``ServiceAccountRoleArn``, or an EKS Pod Identity association for ``kube-system/aws-node``)
  it uses the node's role (https://docs.aws.amazon.com/eks/latest/userguide/cni-iam-role.html).
  A HyperPod node's role is its instance group's ``ExecutionRole``.
* The actions: those AWS's reference HyperPod template grants its execution role for that
  purpose (aws-samples/awsome-distributed-training
  ``1.architectures/7.sagemaker-hyperpod-eks/cfn-templates/nested-stacks/sagemaker-iam-role-stack.yaml``),
  or the managed ``AmazonEKS_CNI_Policy``. ASSUMED: ``AmazonSageMakerClusterInstanceRolePolicy``
  grants none of them (AWS's reference adds them beside it).
"""

from __future__ import annotations

import fnmatch
from typing import Any

from rehearsal.findings import Finding
from rehearsal.world import World

SOURCE = (
    "https://docs.aws.amazon.com/eks/latest/userguide/cni-iam-role.html; aws-samples/awsome-distributed-training "
    "1.architectures/7.sagemaker-hyperpod-eks/cfn-templates/nested-stacks/sagemaker-iam-role-stack.yaml"
)
CNI_ACTIONS = (
    "ec2:AssignPrivateIpAddresses",
    "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DetachNetworkInterface",
    "ec2:ModifyNetworkInterfaceAttribute",
    "ec2:UnassignPrivateIpAddresses",
    "ec2:CreateTags",
)
CNI_MANAGED_POLICY = "AmazonEKS_CNI_Policy"


def _actions(statements: list[dict[str, Any]]) -> list[str]:
    found = []
    for statement in statements:
        if statement.get("Effect") != "Allow":
            continue
        actions = statement.get("Action") or []
        found += [actions] if isinstance(actions, str) else list(actions)
    return found


def role_actions(world: World, role_id: str) -> tuple[list[str], list[str]]:
    """(allowed actions, managed policy ARNs) of the role with logical id ``role_id``."""
    resolver = world.resolver
    role = resolver.properties(role_id)
    role_name = resolver.ref(role_id)
    actions: list[str] = []
    managed = [str(a) for a in role.get("ManagedPolicyArns") or []]
    for policy in role.get("Policies") or []:
        actions += _actions((policy.get("PolicyDocument") or {}).get("Statement") or [])
    for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for resource in world.assembly.of_type(kind):
            props = resolver.properties(resource.logical_id)
            if role_name in (props.get("Roles") or []):
                actions += _actions((props.get("PolicyDocument") or {}).get("Statement") or [])
                if kind == "AWS::IAM::ManagedPolicy":
                    managed.append(str(resolver.ref(resource.logical_id)))
    return actions, managed


def cni_uses_node_role(world: World) -> bool:
    addon = world.addons.get("vpc-cni")
    if addon is None:
        return True  # the self-managed aws-node runs with the node's role
    if (world.facts.get("vpc_cni_role") or {}).get(addon.logical_id):
        return False
    return ("kube-system", "aws-node") not in world.facts.get("pod_identity", set())


def check(world: World, cluster_id: str, groups: list[dict[str, Any]]) -> Finding | None:
    """Every group's execution role allows the VPC CNI's actions (when the CNI uses it)."""
    if not cni_uses_node_role(world):
        return None
    for group in groups:
        role_arn = str(group.get("ExecutionRole", ""))
        role_id = next(
            (
                r.logical_id
                for r in world.assembly.of_type("AWS::IAM::Role")
                if world.resolver.arn(r.logical_id) == role_arn
            ),
            None,
        )
        if role_id is None:
            continue
        actions, managed = role_actions(world, role_id)
        if any(m.endswith("/" + CNI_MANAGED_POLICY) for m in managed):
            continue
        missing = [
            a
            for a in CNI_ACTIONS
            if not any(fnmatch.fnmatch(a.lower(), p.lower()) for p in actions)
        ]
        if missing:
            return Finding(
                "iam.node-role-lacks-vpc-cni",
                f"{cluster_id} (instance group {group['InstanceGroupName']}, role {role_id})",
                f"the VPC CNI uses the node's role, which does not allow {', '.join(missing)}: pods get no addresses",
                SOURCE,
            )
    return None

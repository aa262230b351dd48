"""Every EKS add-on this library creates, one way (private).

``ResolveConflicts: OVERWRITE`` on every add-on. The EKS cluster bootstraps self-managed
vpc-cni, kube-proxy and CoreDNS; creating the managed add-on over them with the default
(``NONE``: "Amazon EKS doesn't change the value. Creation of the add-on might fail", botocore's
eks model, ``CreateAddon.resolveConflicts``) can fail the deployment, as aws/amazon-network-policy-controller-k8s
issue 200 shows (vpc-cni's PolicyEndpoint CRD; the maintainers' mitigation: OVERWRITE). AWS's HyperPod EKS reference template sets ``OVERWRITE`` on every add-on
(aws-samples/awsome-distributed-training
``1.architectures/7.sagemaker-hyperpod-eks/cfn-templates/nested-stacks/eks-cluster-stack.yaml``).

On update, too: CloudFormation's ``AWS::EKS::Addon`` has one ``ResolveConflicts`` (enum NONE,
OVERWRITE, PRESERVE in its resource schema, cfn-lint 1.58.0) that it passes to CreateAddon and
UpdateAddon alike. We keep ``OVERWRITE`` there (UpdateAddon: "Amazon EKS overwrites the changed
value back to the Amazon EKS default value"): the stack is the add-on's source of truth, its
``ConfigurationValues`` included, so a field someone edited with kubectl returns to what the
stack declares on the next add-on update. ``PRESERVE`` would keep such drift, and EKS refuses
it on create ("Resolve conflicts option preserve is not supported for operation CreateAddon",
eksctl-io/eksctl PR 5880), so a single property could not hold it for both. To keep a hand edit, put it in the
add-on's configuration values instead (EKS user guide, "Determine fields you can customize for
Amazon EKS add-ons", https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-field-management.html).

aws-cdk-lib's ``aws_eks_v2.Addon`` (2.275) exposes no ``resolveConflicts``: it is set on its
``CfnAddon``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

#: What EKS does with a field that differs from the add-on's (see the module doc).
RESOLVE_CONFLICTS: Final = "OVERWRITE"


def eks_addon(
    scope: Construct,
    id: str,
    *,
    cluster: eks.ICluster,
    addon_name: str,
    addon_version: str | None,
    configuration_values: Mapping[str, Any] | None = None,
) -> eks.Addon:
    """An EKS add-on, removed with the stack, that overwrites conflicting fields."""
    addon = eks.Addon(
        scope,
        id,
        cluster=cluster,
        addon_name=addon_name,
        addon_version=addon_version,
        preserve_on_delete=False,
        configuration_values=dict(configuration_values) if configuration_values else None,
    )
    cfn = addon.node.default_child
    assert isinstance(cfn, eks.CfnAddon)
    cfn.resolve_conflicts = RESOLVE_CONFLICTS
    return addon

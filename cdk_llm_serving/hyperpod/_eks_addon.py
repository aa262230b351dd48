"""Every EKS add-on this library creates, one way (private).

``ResolveConflicts: OVERWRITE`` on create and update: the cluster bootstraps self-managed
vpc-cni, kube-proxy and CoreDNS, over which the default (``NONE``) can fail the deployment, and
the stack stays the add-on's source of truth (``PRESERVE`` is refused on create). Sources:
docs/design/hyperpod-cluster.md, "EKS add-ons". aws-cdk-lib's ``aws_eks_v2.Addon`` exposes no
``resolveConflicts``: it is set on its ``CfnAddon``."""

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

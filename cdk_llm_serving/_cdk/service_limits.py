"""Limits and enumerations read from botocore's SageMaker service model.

The service model that ships with the pinned botocore is the source of truth for
instance types, name patterns and numeric ranges, so a new botocore release
updates our validation without a hand-maintained list.

CloudFormation's resource schemas are narrower than the API in places (cfn-lint rejects the
template, e.g. E3030 for ``RoutingStrategy: KV_AWARE``). ``CLOUDFORMATION_NARROWER`` records
those places with the schema's value; ``limits`` applies them, so every check built on it
accepts only what both the API and CloudFormation accept. A test compares each entry with the
schema cfn-lint ships (``tests/sagemaker/test_cloudformation_narrower.py``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import botocore.session
from botocore.model import ServiceModel, Shape


@functools.cache
def sagemaker_model() -> ServiceModel:
    return botocore.session.get_session().get_service_model("sagemaker")


@dataclass(frozen=True)
class Limits:
    """Constraints of one shape: numeric/length bounds, regex pattern and enum."""

    minimum: int | None
    maximum: int | None
    pattern: str | None
    enum: tuple[str, ...]
    #: API values CloudFormation's schema refuses, with where (left out of ``enum``).
    cloudformation_refuses: tuple[str, ...] = ()
    cloudformation_resource: str = ""


def _shape(structure: str, member: str | None = None) -> Shape:
    shape = sagemaker_model().shape_for(structure)
    if member is None:
        return shape
    members: dict[str, Shape] = shape.members
    return members[member]


@dataclass(frozen=True)
class CfnConstraint:
    """What CloudFormation's schema allows at ``path`` of ``resource_type`` (``*`` = list item)."""

    resource_type: str
    path: str
    enum: tuple[str, ...] | None = None


#: (botocore structure, member) -> CloudFormation's narrower constraint (cfn-lint 1.58.0 schemas;
#: enum values as strings, also for integer fields).
CLOUDFORMATION_NARROWER: dict[tuple[str, str | None], CfnConstraint] = {
    ("ProductionVariantRoutingConfig", "RoutingStrategy"): CfnConstraint(
        "AWS::SageMaker::EndpointConfig",
        "ProductionVariants/*/RoutingConfig/RoutingStrategy",
        enum=("LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "RANDOM"),
    ),
    # botocore has no enum here (any integer); CloudFormation's schema has one.
    ("MetricsConfig", "MetricPublishFrequencyInSeconds"): CfnConstraint(
        "AWS::SageMaker::EndpointConfig",
        "MetricsConfig/MetricPublishFrequencyInSeconds",
        enum=("10", "30", "60", "120", "180", "240", "300"),
    ),
    ("DeepHealthCheckType", None): CfnConstraint(
        "AWS::SageMaker::Cluster",
        "InstanceGroups/*/OnStartDeepHealthChecks/*",
        enum=("InstanceStress", "InstanceConnectivity"),
    ),
}


@functools.cache
def limits(structure: str, member: str | None = None) -> Limits:
    """Constraints of ``structure`` (or of its ``member``), e.g. ``limits("ProductionVariant", "VolumeSizeInGB")``."""
    shape = _shape(structure, member)
    meta = shape.metadata
    api_enum = tuple(getattr(shape, "enum", None) or ())
    narrower = CLOUDFORMATION_NARROWER.get((structure, member))
    cfn_enum = narrower.enum if narrower is not None and narrower.enum is not None else api_enum
    return Limits(
        minimum=meta.get("min"),
        maximum=meta.get("max"),
        pattern=meta.get("pattern"),
        # No API enum (free value): CloudFormation's list is the whole allowed set.
        enum=tuple(value for value in api_enum if value in cfn_enum) if api_enum else cfn_enum,
        cloudformation_refuses=tuple(value for value in api_enum if value not in cfn_enum),
        cloudformation_resource=narrower.resource_type if narrower is not None else "",
    )


def production_variant_instance_types() -> tuple[str, ...]:
    """Instance types an endpoint variant (and its instance pools) accepts."""
    return limits("InstancePool", "InstanceType").enum


def hyperpod_instance_types() -> tuple[str, ...]:
    """Instance types a HyperPod cluster instance group accepts."""
    return limits("ClusterInstanceGroupSpecification", "InstanceType").enum

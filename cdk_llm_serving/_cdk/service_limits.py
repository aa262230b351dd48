"""Limits and enumerations read from botocore's SageMaker service model (instance types, name
patterns, ranges: a new botocore updates them), narrowed where CloudFormation's schema is
narrower than the API (``CLOUDFORMATION_NARROWER``, checked against cfn-lint's schemas by
``tests/sagemaker/test_cloudformation_narrower.py``).
"""

from __future__ import annotations

import functools
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import botocore

if TYPE_CHECKING:
    from botocore.model import ServiceModel

#: botocore's own copy of the SageMaker API description, one directory per API version.
_SAGEMAKER_DATA = Path(botocore.__file__).parent / "data" / "sagemaker"


@functools.cache
def sagemaker_description() -> dict[str, Any]:
    """botocore's ``service-2.json`` for SageMaker, newest API version, read as JSON (not
    through ``botocore.session``, whose HTTP stack costs 0.1 s of CPU on every synth)."""
    version = max(entry.name for entry in _SAGEMAKER_DATA.iterdir() if entry.is_dir())
    plain = _SAGEMAKER_DATA / version / "service-2.json"
    if plain.exists():
        return dict(json.loads(plain.read_text(encoding="utf-8")))
    with gzip.open(plain.with_name("service-2.json.gz"), "rt", encoding="utf-8") as handle:
        return dict(json.load(handle))


def sagemaker_model() -> ServiceModel:
    """The same description as botocore's ``ServiceModel`` (for tests that walk shapes)."""
    from botocore.model import ServiceModel

    return ServiceModel(sagemaker_description(), "sagemaker")


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


def _shape(structure: str, member: str | None = None) -> dict[str, Any]:
    """A shape's definition; a member's is its target shape's, with the reference's own keys
    on top, as botocore's ``ShapeResolver.resolve_shape_ref`` merges them."""
    shapes: dict[str, dict[str, Any]] = sagemaker_description()["shapes"]
    shape = shapes[structure]
    if member is None:
        return shape
    reference = dict(shape["members"][member])
    return {**shapes[reference.pop("shape")], **reference}


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
    meta = _shape(structure, member)
    api_enum = tuple(meta.get("enum") or ())
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

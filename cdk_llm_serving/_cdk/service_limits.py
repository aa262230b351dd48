"""Limits and enumerations read from botocore's SageMaker service model.

The service model that ships with the pinned botocore is the source of truth for
instance types, name patterns and numeric ranges, so a new botocore release
updates our validation without a hand-maintained list.
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


def _shape(structure: str, member: str | None = None) -> Shape:
    shape = sagemaker_model().shape_for(structure)
    if member is None:
        return shape
    members: dict[str, Shape] = shape.members
    return members[member]


@functools.cache
def limits(structure: str, member: str | None = None) -> Limits:
    """Constraints of ``structure`` (or of its ``member``), e.g. ``limits("ProductionVariant", "VolumeSizeInGB")``."""
    shape = _shape(structure, member)
    meta = shape.metadata
    return Limits(
        minimum=meta.get("min"),
        maximum=meta.get("max"),
        pattern=meta.get("pattern"),
        enum=tuple(getattr(shape, "enum", None) or ()),
    )


def production_variant_instance_types() -> tuple[str, ...]:
    """Instance types an endpoint variant (and its instance pools) accepts."""
    return limits("InstancePool", "InstanceType").enum


def hyperpod_instance_types() -> tuple[str, ...]:
    """Instance types a HyperPod cluster instance group accepts."""
    return limits("ClusterInstanceGroupSpecification", "InstanceType").enum

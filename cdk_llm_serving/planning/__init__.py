"""Pure-Python planning: instance facts, sizing and cost. Imports nothing from CDK."""

from .catalog import Catalog, UnknownInstanceTypeError, default_catalog
from .instance_types import InstanceType
from .models import ModelSpec, WeightFormat
from .sizing import ModelSizing, Plan, PlanningError, plan

__all__ = [
    "Catalog",
    "InstanceType",
    "ModelSizing",
    "ModelSpec",
    "Plan",
    "PlanningError",
    "UnknownInstanceTypeError",
    "WeightFormat",
    "default_catalog",
    "plan",
]

"""Pure-Python planning: instance facts, sizing and cost. Imports nothing from CDK."""

from .catalog import Catalog, UnknownInstanceTypeError, default_catalog
from .decode import Workload
from .instance_types import InstanceType
from .models import ModelSpec, WeightFormat
from .objective import Candidate, LatencyTargets, Objective, OperatingPoint, Performance
from .prefill import Disaggregation
from .sizing import ModelSizing, Plan, PlanningError, plan

__all__ = [
    "Candidate",
    "Catalog",
    "Disaggregation",
    "InstanceType",
    "LatencyTargets",
    "ModelSizing",
    "ModelSpec",
    "Objective",
    "OperatingPoint",
    "Performance",
    "Plan",
    "PlanningError",
    "UnknownInstanceTypeError",
    "WeightFormat",
    "Workload",
    "default_catalog",
    "plan",
]

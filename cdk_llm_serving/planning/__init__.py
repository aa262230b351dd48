"""Pure-Python planning: instance facts, sizing and cost. Imports nothing from CDK."""

from .catalog import Catalog, default_catalog
from .sizing import ModelSizing, Plan, PlanningError, plan

__all__ = ["Catalog", "ModelSizing", "Plan", "PlanningError", "default_catalog", "plan"]

"""What ``python -m cdk_llm_serving plan`` needs beyond the planner: inputs and errors as data."""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict
from typing import Any

from ..errors import ConfigurationError
from .catalog import GIB, Catalog, default_catalog
from .models import ModelSpec
from .sizing import PlanningError


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1 (``--max-context 0`` is refused, not "maximum")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number above 0 (``--tokens-per-second 0`` divides by zero)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be a positive number")
    return value


def plan_catalog(region: str | None, prices_path: str | None) -> Catalog:
    """The default catalog, with a price file's prices, checked to be ``region``'s."""
    catalog = default_catalog()
    if prices_path:
        catalog = catalog.with_price_file(prices_path)
    return catalog.for_region(region) if region else catalog


def plan_model(
    model: str | None,
    config_path: str | None,
    index_path: str | None,
    weight_format: str | None = None,
) -> ModelSpec | str:
    """A preset name, or a spec read from a local ``config.json`` (no network); a
    ``weight_format`` its ``quantization_config`` contradicts is refused."""
    if config_path:
        return ModelSpec.from_hf_config(config_path, index_path, weight_format)
    assert model is not None  # argparse requires one of --model / --model-config
    return model


def error_as_dict(error: Exception) -> dict[str, Any]:
    """A refused plan as JSON: the message, every problem, and machine-readable alternatives."""
    if isinstance(error, PlanningError):
        return {
            "error": error.message,
            "problems": [
                {"property": p.property, "value": p.value, "allowed": error.message}
                for p in error.problems
            ],
            "needed_gib": _gib(error.needed_bytes),
            "available_gib": _gib(error.available_bytes),
            "alternatives": [alternative.as_dict() for alternative in error.alternatives],
        }
    if isinstance(error, ConfigurationError):
        problems = [asdict(problem) for problem in error.problems]
        return {"error": str(error), "problems": problems, "alternatives": []}
    message = error_text(error)
    return {
        "error": message,
        "problems": [{"property": "input", "value": None, "allowed": message}],
        "alternatives": [],
    }


def error_text(error: Exception) -> str:
    """The message of a refused plan (every problem of a ``ConfigurationError``)."""
    return str(error)


def _gib(value: float | None) -> float | None:
    return None if value is None else round(value / GIB, 1)

"""What ``python -m cdk_llm_serving plan`` needs beyond the planner: inputs and errors as data."""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict
from typing import Any

from ..errors import ConfigurationError, Problems
from .catalog import GIB, Catalog, default_catalog
from .decode import Workload
from .models import ModelSpec
from .objective import LatencyTargets
from .sizing import Objective, PlanningError, objective_of


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


def _number(problems: Problems, flag: str, text: str | None, kind: type) -> Any:
    """``text`` as a positive ``kind`` (int or float), or a problem naming ``flag``."""
    if text is None:
        return None
    try:
        value = kind(text)
    except ValueError:
        problems.add(flag, text, f"{'an integer' if kind is int else 'a number'} above 0")
        return None
    if not math.isfinite(value) or value <= 0:
        problems.add(flag, text, f"{'an integer' if kind is int else 'a number'} above 0")
        return None
    return value


def objective_inputs(args: argparse.Namespace) -> tuple[Workload, LatencyTargets, Objective]:
    """The workload, latency targets and objective of ``plan``'s flags; every bad value is one
    ``ConfigurationError`` (the command prints it as one ``error:`` line, exit status 2)."""
    problems = Problems("plan")
    concurrency = _number(problems, "--concurrency", args.concurrency, int)
    rate = _number(problems, "--request-rate", args.request_rate, float)
    ttft = _number(problems, "--ttft", args.ttft, float)
    itl = _number(problems, "--itl", args.itl, float)
    tpot = _number(problems, "--tpot", args.tpot, float)
    if concurrency is not None and rate is not None:
        problems.add(
            "--request-rate", args.request_rate, "give --concurrency or --request-rate, not both"
        )
    if itl is not None and tpot is not None:
        problems.add("--tpot", args.tpot, "give --itl or --tpot, not both")
    objective = None
    if args.objective is not None:
        try:
            objective = objective_of(args.objective)
        except ConfigurationError:
            problems.add("--objective", args.objective, "one of tokens-per-dollar, min-gpus")
    problems.raise_if_any()
    workload = Workload(
        args.input_tokens, args.output_tokens, concurrency=concurrency, request_rate=rate
    )
    chosen = objective or Objective.TOKENS_PER_DOLLAR
    return workload, LatencyTargets(ttft_s=ttft, itl_ms=itl, tpot_ms=tpot), chosen

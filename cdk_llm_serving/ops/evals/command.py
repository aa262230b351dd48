"""``cdk-llm-serving eval``: arguments and the command (registered by ``ops.cli``); exit 15
(``EXIT_GATE_FAILED``) when a task misses its gate or answers came from another copy."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from ..._extras import MissingExtraError, require_extra
from ...errors import ConfigurationError
from ...evals.tasks import example_path, load_tasks
from ...planning.catalog import default_catalog
from ..exit_codes import EXIT_GATE_FAILED, EXIT_NO_CREDENTIALS, EXIT_USAGE
from ..smoke import (
    CA_BUNDLE_ENV,
    SmokeError,
    base_url_problem,
    checked_context,
    request_errors,
)
from .run import (
    estimate,
    format_results,
    gate_failures,
    read_reference,
    results_as_dict,
    run_tasks,
    smoke_figures,
)


def add_arguments(command: argparse.ArgumentParser) -> None:
    which = command.add_mutually_exclusive_group(required=True)
    which.add_argument("--tasks", help="your task file (YAML or JSON; README: how to write a task)")
    which.add_argument(
        "--example", action="store_true", help="the example set shipped with the package"
    )
    command.add_argument(
        "--base-url",
        required=True,
        help="the copy's OpenAI-compatible URL, e.g. a staging endpoint's .../openai/v1 or "
        "a HyperPod copy's https://<service>/v1",
    )
    command.add_argument(
        "--model",
        required=True,
        help="the name to send (the shared name, or the copy's own served name)",
    )
    command.add_argument(
        "--reference",
        help="results file of the reference copy's run (--output of an earlier eval): "
        "each task's delta is this copy's score minus the reference's",
    )
    command.add_argument(
        "--expect-copy",
        help="the copy's own served name: the gate fails when any answer names another model",
    )
    command.add_argument(
        "--instance-type",
        help="the copy's instance type, to price the run from the instance catalog",
    )
    command.add_argument(
        "--price-region",
        help="the catalog's price region for --instance-type (default: the catalog's, us-east-1)",
    )
    command.add_argument("--output", help="also write the results (JSON) to this file")
    command.add_argument(
        "--estimate-only",
        action="store_true",
        help="measure the copy's speed (smoke's two requests), print the estimate, stop",
    )
    command.add_argument("--json", action="store_true", help="print JSON instead of the table")


def run_eval(
    args: argparse.Namespace,
    auth_headers: Callable[[argparse.Namespace], dict[str, str]],
    fail: Callable[[argparse.Namespace, str, int], int],
) -> int:
    problem = base_url_problem(args.base_url)
    if problem:
        return fail(args, f"--base-url {args.base_url!r}: {problem}", EXIT_USAGE)
    try:
        require_extra("eval", "jsonschema", "cdk-llm-serving eval")
    except MissingExtraError as error:
        return fail(args, str(error), EXIT_USAGE)
    tasks = load_tasks(example_path() if args.example else args.tasks)  # ConfigurationError
    reference = read_reference(args.reference, tasks) if args.reference else {}
    price = _price(args)
    ca_bundle = args.ca_bundle or os.environ.get(CA_BUNDLE_ENV) or None
    try:
        headers = auth_headers(args)
        context = checked_context(args.base_url, headers, ca_bundle)
        print(
            estimate(tasks, instance_type=args.instance_type, price_per_hour=price).line(),
            file=sys.stderr,
        )
        with request_errors(args.base_url, ca_bundle):
            smoke, ttft, speed = smoke_figures(
                args.base_url, args.model, headers, args.timeout, context
            )
            planned = estimate(tasks, ttft, speed, args.instance_type, price)
            print(planned.line(), file=sys.stderr)
            if args.estimate_only:
                return 0
            results = run_tasks(tasks, args.base_url, args.model, headers, args.timeout, context)
    except SmokeError as error:
        return fail(args, str(error), error.exit_code)
    except RuntimeError as error:  # no credentials for a SageMaker bearer token
        return fail(args, str(error), EXIT_NO_CREDENTIALS)
    for result in results:
        result.reference_score = reference.get(result.task.name)
    data = results_as_dict(
        tasks,
        results,
        base_url=args.base_url,
        model=args.model,
        smoke=smoke,
        planned=planned,
        expect_copy=args.expect_copy,
        reference=args.reference,
    )
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
    print(json.dumps(data, indent=2) if args.json else format_results(data))
    return EXIT_GATE_FAILED if gate_failures(results, args.expect_copy) else 0


def _price(args: argparse.Namespace) -> float | None:
    """$/h of ``--instance-type`` from the instance catalog (``ConfigurationError`` if unknown)."""
    if not args.instance_type:
        return None
    catalog = default_catalog()
    if args.price_region:
        catalog = catalog.for_region(args.price_region)
    price: Any = catalog.get(args.instance_type).price_per_hour
    return float(price)


__all__ = ["ConfigurationError", "add_arguments", "run_eval"]

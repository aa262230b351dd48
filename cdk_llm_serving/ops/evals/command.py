"""``cdk-llm-serving eval``: arguments and the command (registered by ``ops.cli``); exit 15
(``EXIT_GATE_FAILED``) when a task misses its gate or answers came from another copy."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from ssl import SSLContext
from typing import Any

from ..._extras import require_extra
from ...evals.tasks import example_path, load_tasks
from ...planning.catalog import default_catalog
from ..exit_codes import EXIT_GATE_FAILED
from . import run


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


def prepare_eval(args: argparse.Namespace) -> Callable[[dict[str, str], SSLContext | None], int]:
    """The eval of ``args`` to run once connected; its input is read and checked first
    (``ConfigurationError`` for a bad task file, reference or instance type)."""
    require_extra("eval", "jsonschema", "cdk-llm-serving eval")
    tasks = load_tasks(example_path() if args.example else args.tasks)
    reference = run.read_reference(args.reference, tasks) if args.reference else {}
    price = _price(args)

    def evaluate(headers: dict[str, str], tls: SSLContext | None) -> int:
        print(
            run.estimate(tasks, instance_type=args.instance_type, price_per_hour=price).line(),
            file=sys.stderr,
        )
        smoke, ttft, speed = run.smoke_figures(
            args.base_url, args.model, headers, args.timeout, tls
        )
        planned = run.estimate(tasks, ttft, speed, args.instance_type, price)
        print(planned.line(), file=sys.stderr)
        if args.estimate_only:
            return 0
        results = run.run_tasks(tasks, args.base_url, args.model, headers, args.timeout, tls)
        for result in results:
            result.reference_score = reference.get(result.task.name)
        data = run.results_as_dict(
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
        print(json.dumps(data, indent=2) if args.json else run.format_results(data))
        return EXIT_GATE_FAILED if run.gate_failures(results, args.expect_copy) else 0

    return evaluate


def _price(args: argparse.Namespace) -> float | None:
    """$/h of ``--instance-type`` from the instance catalog (``ConfigurationError`` if unknown)."""
    if not args.instance_type:
        return None
    catalog = default_catalog()
    if args.price_region:
        catalog = catalog.for_region(args.price_region)
    price: Any = catalog.get(args.instance_type).price_per_hour
    return float(price)

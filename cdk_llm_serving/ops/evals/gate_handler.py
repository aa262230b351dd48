"""The eval gate as a Lambda handler (``StagingEndpoints.eval_gate``): every staging copy scored,
each gated on its delta to the first; the event and the answer: docs/design/cli.md, "The gate".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ...errors import ConfigurationError, Problems
from ...evals.tasks import parse_tasks
from ..bearer_token import generate_bearer_token
from ..smoke import SmokeError, connection
from .run import gate_failures, run_tasks

DEFAULT_TIMEOUT = 300.0


def handler(event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
    try:
        tasks = parse_tasks(event.get("tasks"), "(event.tasks)")
        copies = _copies(event.get("copies"))
    except ConfigurationError as error:
        return {"gate": "ERROR", "failures": [str(p) for p in error.problems], "copies": []}
    headers: dict[str, str] = {}
    if event.get("auth", "sagemaker") == "sagemaker":
        headers["Authorization"] = f"Bearer {generate_bearer_token(os.environ.get('AWS_REGION'))}"
    timeout = float(event.get("timeout", DEFAULT_TIMEOUT))
    reference: dict[str, float] = {}
    failures: list[str] = []
    report: list[dict[str, Any]] = []
    for index, copy in enumerate(copies):
        try:
            with connection(copy["base_url"], headers, None) as tls:
                results = run_tasks(tasks, copy["base_url"], copy["model"], headers, timeout, tls)
        except SmokeError as error:
            failures.append(f"{copy['expect_copy']}: {error}")
            report.append({"copy": copy["expect_copy"], "error": str(error)})
            continue
        if index == 0:
            reference = {r.task.name: r.score for r in results}
        else:
            for result in results:
                result.reference_score = reference.get(result.task.name)
        failures += [
            f"{copy['expect_copy']}: {f}" for f in gate_failures(results, copy["expect_copy"])
        ]
        report.append(
            {
                "copy": copy["expect_copy"],
                "scores": {r.task.name: r.score for r in results},
                "deltas": {r.task.name: r.delta for r in results},
            }
        )
    return {"gate": "FAIL" if failures else "PASS", "failures": failures, "copies": report}


def _copies(raw: Any) -> list[dict[str, str]]:
    """The event's copies, the reference first; ``ConfigurationError`` naming each bad one."""
    problems = Problems("gate event")
    keys = ("base_url", "model", "expect_copy")
    if not isinstance(raw, list) or not raw:
        problems.add("copies", raw, "a non-empty list, the reference copy first")
        problems.raise_if_any()
    for i, copy in enumerate(raw):
        if not isinstance(copy, Mapping) or not all(isinstance(copy.get(k), str) for k in keys):
            problems.add(f"copies[{i}]", copy, "{base_url, model, expect_copy}")
    problems.raise_if_any()
    return [{k: copy[k] for k in keys} for copy in raw]

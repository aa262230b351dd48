"""One eval run against one copy: estimate, requests (``smoke.stream_chat``, one at a time,
``temperature: 0``), scores, deltas to a reference, the gate."""

from __future__ import annotations

import json
import ssl
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ...errors import Problems
from ...evals.tasks import Task, TaskSet
from ..smoke import StreamResult, percentile, report, request_line, run_smoke, stream_chat
from .scoring import score

#: Results file format (``--output``, ``--json``): a later run reads it as ``--reference``.
RESULTS_VERSION = 1
#: Prompt characters per token, for the estimate only (a rough rule for English text: OpenAI's
#: "What are tokens and how to count them?", https://help.openai.com/en/articles/4936856).
CHARS_PER_TOKEN = 4


@dataclass
class SampleResult:
    id: str
    passed: bool
    detail: str
    model: str | None
    ttft_ms: float | None
    output_tokens: int
    seconds: float


@dataclass
class TaskResult:
    task: Task
    samples: list[SampleResult] = field(default_factory=list)
    reference_score: float | None = None

    @property
    def score(self) -> float:
        """Points of 100: the share of samples that passed."""
        return round(100 * sum(s.passed for s in self.samples) / len(self.samples), 2)

    @property
    def delta(self) -> float | None:
        """This copy's score minus the reference's, in points (``None`` without a reference)."""
        return None if self.reference_score is None else round(self.score - self.reference_score, 2)

    @property
    def failures(self) -> list[str]:
        """Why this task fails the gate (empty when it passes)."""
        found = []
        delta = self.delta
        if delta is not None and delta < -self.task.threshold_points:
            found.append(
                f"{self.task.name}: {delta:+.1f} points against the reference "
                f"(allowed -{self.task.threshold_points:g})"
            )
        if self.task.min_score is not None and self.score < self.task.min_score:
            found.append(
                f"{self.task.name}: score {self.score:g} below min_score {self.task.min_score:g}"
            )
        return found


@dataclass(frozen=True)
class Estimate:
    requests: int
    prompt_tokens: int
    max_output_tokens: int
    #: Upper bound, from smoke's measured TTFT and tokens/s (``None`` before measuring).
    seconds: float | None = None
    instance_type: str | None = None
    price_per_hour: float | None = None

    @property
    def cost(self) -> float | None:
        """The copy's instance time for the run (one instance), at the catalog's price."""
        if self.seconds is None or self.price_per_hour is None:
            return None
        return round(self.seconds / 3600 * self.price_per_hour, 4)

    def line(self) -> str:
        text = (
            f"estimate: {self.requests} requests, ~{self.prompt_tokens} prompt tokens, "
            f"at most {self.max_output_tokens} output tokens"
        )
        if self.seconds is not None:
            text += f", at most {self.seconds:.0f} s at the measured speed"
        if self.cost is not None:
            text += f", ~${self.cost:.4f} of {self.instance_type} time (${self.price_per_hour}/h)"
        elif self.instance_type is None:
            text += " (give --instance-type for a price)"
        return text


def estimate(
    tasks: TaskSet,
    ttft_seconds: float | None = None,
    tokens_per_second: float | None = None,
    instance_type: str | None = None,
    price_per_hour: float | None = None,
) -> Estimate:
    """Requests and tokens of a run and, at the copy's measured speed, an upper bound on its
    time (each request runs to its ``max_tokens``)."""
    prompt_chars = sum(
        len(json.dumps(list(s.messages))) + len(json.dumps(list(s.tools)))
        for task in tasks.tasks
        for s in task.samples
    )
    max_output = sum(task.max_tokens * len(task.samples) for task in tasks.tasks)
    seconds = None
    if tokens_per_second:
        seconds = max_output / tokens_per_second + (ttft_seconds or 0.0) * tasks.requests
    return Estimate(
        requests=tasks.requests,
        prompt_tokens=prompt_chars // CHARS_PER_TOKEN,
        max_output_tokens=max_output,
        seconds=seconds,
        instance_type=instance_type,
        price_per_hour=price_per_hour,
    )


def run_tasks(
    tasks: TaskSet,
    base_url: str,
    model: str,
    headers: dict[str, str],
    timeout: float,
    context: ssl.SSLContext | None = None,
) -> list[TaskResult]:
    """Every sample of every task, one request at a time, scored."""
    results = []
    for task in tasks.tasks:
        result = TaskResult(task)
        for sample in task.samples:
            body: dict[str, Any] = {
                "model": model,
                "messages": list(sample.messages),
                "max_tokens": task.max_tokens,
                "temperature": 0,
            }
            if sample.tools:
                body["tools"] = list(sample.tools)
                body["tool_choice"] = "auto"
            answer: StreamResult = stream_chat(base_url, headers, body, timeout, context)
            verdict = score(task, sample, answer)
            entry = SampleResult(
                id=sample.id,
                passed=verdict.passed,
                detail=verdict.detail,
                model=answer.model,
                ttft_ms=answer.ttft_ms,
                output_tokens=answer.output_tokens,
                seconds=round(answer.total_seconds, 3),
            )
            result.samples.append(entry)
        results.append(result)
    return results


def smoke_figures(
    base_url: str,
    model: str,
    headers: dict[str, str],
    timeout: float,
    context: ssl.SSLContext | None,
) -> tuple[dict[str, Any], float | None, float | None]:
    """``smoke``'s two requests and report (latency figures), its TTFT and tokens/s."""
    checks, streams = run_smoke(base_url, model, headers, timeout, context=context)
    data = report(checks, streams)
    ttfts = [s.ttft_seconds for s in streams.values() if s.ttft_seconds is not None]
    speeds = [s.tokens_per_second for s in streams.values() if s.tokens_per_second > 0]
    return data, (max(ttfts) if ttfts else None), (min(speeds) if speeds else None)


def read_reference(path: str, tasks: TaskSet) -> dict[str, float]:
    """Task name -> the reference copy's score, from an earlier run's results file; refused
    when it is no results file, lacks a task, or scored another version of a task."""
    problems = Problems(f"reference {path}")
    with open(path, encoding="utf-8") as handle:
        try:
            data = json.load(handle)
        except json.JSONDecodeError as error:
            data = None
            problems.add("(file)", path, f"a results file, JSON ({error})")
    if not problems and (
        not isinstance(data, Mapping) or data.get("results_version") != RESULTS_VERSION
    ):
        version = data.get("results_version") if isinstance(data, Mapping) else None
        problems.add("results_version", version, f"{RESULTS_VERSION}")
    problems.raise_if_any()
    scored = {t["name"]: t for t in data.get("tasks", []) if isinstance(t, Mapping)}
    for task in tasks.tasks:
        entry = scored.get(task.name)
        if entry is None:
            problems.add(f"tasks.{task.name}", None, "scored in the reference run")
        elif entry.get("digest") != task.digest:
            allowed = f"{task.digest}: the reference scored another version of the task; run the reference copy again"
            problems.add(f"tasks.{task.name}.digest", entry.get("digest"), allowed)
    problems.raise_if_any()
    return {task.name: float(scored[task.name]["score"]) for task in tasks.tasks}


def attribution(results: list[TaskResult]) -> dict[str, int]:
    """Answers per answering copy (the responses' ``model``); ``"(none)"`` when unnamed."""
    counts = Counter(s.model or "(none)" for r in results for s in r.samples)
    return dict(sorted(counts.items()))


def gate_failures(results: list[TaskResult], expect_copy: str | None) -> list[str]:
    failures = [reason for result in results for reason in result.failures]
    if expect_copy is not None:
        others = {k: v for k, v in attribution(results).items() if k != expect_copy}
        if others:
            failures.append(
                f"answers came from {', '.join(f'{k} ({v})' for k, v in others.items())}, "
                f"not only {expect_copy}: the scores are not this copy's"
            )
    return failures


def results_as_dict(
    tasks: TaskSet,
    results: list[TaskResult],
    *,
    base_url: str,
    model: str,
    smoke: dict[str, Any],
    planned: Estimate,
    expect_copy: str | None,
    reference: str | None,
) -> dict[str, Any]:
    failures = gate_failures(results, expect_copy)
    answers = [s for r in results for s in r.samples]
    ttfts = [s.ttft_ms for s in answers if s.ttft_ms is not None]
    return {
        "results_version": RESULTS_VERSION,
        "task_file": tasks.source,
        "base_url": base_url,
        "model": model,
        "copies": attribution(results),
        "expected_copy": expect_copy,
        "reference": reference,
        "estimate": {
            **asdict(planned),
            "seconds": round(planned.seconds, 1) if planned.seconds is not None else None,
            "cost": planned.cost,
        },
        "latency": smoke["requests"],
        "smoke_checks": smoke["checks"],
        "eval_ttft_ms": {f"p{q}": percentile(ttfts, q) for q in (50, 90, 99)},
        "seconds": round(sum(s.seconds for s in answers), 2),
        "tasks": [
            {
                "name": r.task.name,
                "digest": r.task.digest,
                "score": r.score,
                "passed": sum(s.passed for s in r.samples),
                "samples": len(r.samples),
                "reference_score": r.reference_score,
                "delta": r.delta,
                "threshold_points": r.task.threshold_points,
                "min_score": r.task.min_score,
                "gate": "fail"
                if r.failures
                else ("pass" if r.delta is not None or r.task.min_score is not None else "n/a"),
                "answers": [vars(s) for s in r.samples],
            }
            for r in results
        ],
        "gate": {"passed": not failures, "failures": failures},
    }


def format_results(data: dict[str, Any]) -> str:
    copies = ", ".join(f"{k} ({v})" for k, v in data["copies"].items())
    lines = [f"{data['base_url']}  model {data['model']!r}; answered by: {copies}"]
    header = f"{'task':<28} {'score':>6} {'ref':>6} {'delta':>7} {'allowed':>8}  gate"
    lines += [header, "-" * len(header)]
    for t in data["tasks"]:
        ref = f"{t['reference_score']:.1f}" if t["reference_score"] is not None else "-"
        delta = f"{t['delta']:+.1f}" if t["delta"] is not None else "-"
        lines.append(
            f"{t['name']:<28} {t['score']:>6.1f} {ref:>6} {delta:>7} "
            f"{-t['threshold_points'] or 0.0:>8.1f}  {t['gate']}"
        )
        for a in t["answers"]:
            if not a["passed"]:
                lines.append(f"    FAIL {a['id']} ({a['model']}): {a['detail']}")
    lines += [f"latency {request_line(name, r)}" for name, r in data["latency"].items()]
    gate = data["gate"]
    lines.append(
        "gate: PASS"
        if gate["passed"]
        else "gate: FAIL\n" + "\n".join(f"  {f}" for f in gate["failures"])
    )
    return "\n".join(lines)

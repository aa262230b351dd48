"""The SageMaker container rehearsal's run: every copy started, asked, scraped; the construct's
PromQL evaluated on what detailed observability would store. Returns findings
(``rehearsal.findings.Finding``) and a report of what ran."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rehearsal.findings import Finding
from rehearsal.live import generated_model
from rehearsal.sagemaker import container
from rehearsal.sagemaker.copies import MODEL_DIR, Copy
from rehearsal.sagemaker.native import prometheus_path
from rehearsal.sagemaker.observability import (
    Instance,
    QueryResult,
    StorageRule,
    StoredSeries,
    evaluate,
    promtool_path,
    stored_series,
)
from rehearsal.sagemaker.substitutions import Substitution, SubstitutionError, substitute

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV = ROOT / ".venv" / "vllm"

_CHECK_RULES = {
    "ping": ("sagemaker.ping-failed", "sagemaker/latest/dg/your-algorithms-inference-code.html"),
    "invocations": (
        "sagemaker.invocations-failed",
        "../shared/aws-dlc-vllm/sagemaker_serve.py (falls through to vLLM's /invocations)",
    ),
    "invocations route header": (
        "sagemaker.route-header-ignored",
        "../shared/aws-dlc-vllm/sagemaker_serve.py (_parse_route, SageMakerRouteMiddleware)",
    ),
    "chat completions (shared name)": (
        "sagemaker.shared-name-refused",
        "vLLM serving.py _is_model_supported (../shared/FACTS.md); the copy's first served name",
    ),
    "streaming (SSE)": (
        "sagemaker.streaming-broken",
        "sagemaker/latest/dg/realtime-endpoints-openai.html (the container must stream SSE)",
    ),
}


class SetupError(Exception):
    """Something the rehearsal needs is missing (exit status 2)."""


@dataclass
class CopyReport:
    copy: Copy
    own: str
    shared: str
    substitutions: list[Substitution] = field(default_factory=list)
    ready_seconds: float | None = None
    passed: list[str] = field(default_factory=list)
    scrapes: list[str] = field(default_factory=list)
    arguments: str = ""


@dataclass
class Report:
    copies: list[CopyReport] = field(default_factory=list)
    queries: list[QueryResult] = field(default_factory=list)
    model_seconds: float | None = None
    seconds: float = 0.0


def served_names(copy: Copy) -> list[str]:
    """The names the copy's environment asks vLLM to serve: ``SM_VLLM_SERVED_MODEL_NAME`` (a
    JSON array: one name per element, sagemaker_args.py ``tokens_for``), else the
    ``served-model-name`` of the ``SM_VLLM_CONFIG`` file when the stack writes it into the
    model directory, else the model path (vLLM's default served name)."""
    value = copy.environment.get("SM_VLLM_SERVED_MODEL_NAME")
    if value is not None:
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                parsed = json.loads(stripped)
            except ValueError:
                return [value]
            return [str(v) for v in parsed]
        return [value]
    config = copy.environment.get("SM_VLLM_CONFIG", "")
    if config.startswith(MODEL_DIR + "/"):
        body = copy.deploy_files.get(config[len(MODEL_DIR) + 1 :])
        if body is not None:
            names = (yaml.safe_load(body) or {}).get("served-model-name")
            if isinstance(names, list):
                return [str(n) for n in names]
            if isinstance(names, str):
                return [names]
    return [copy.environment.get("SM_VLLM_MODEL", MODEL_DIR)]


def shared_names(copies: Sequence[Copy]) -> dict[tuple[str, str], str | None]:
    """Per (endpoint, variant): the one name every copy serves (the client's), or ``None``."""
    by_variant: dict[tuple[str, str], list[list[str]]] = {}
    for copy in copies:
        by_variant.setdefault((copy.endpoint_name, copy.variant_name), []).append(
            served_names(copy)
        )
    out: dict[tuple[str, str], str | None] = {}
    for key, lists in by_variant.items():
        common = [n for n in lists[0] if all(n in other for other in lists[1:])]
        own_names = {names[0] for names in lists}
        common = [n for n in common if n not in own_names or len(lists) == 1]
        out[key] = common[0] if common else None
    return out


def check_setup(vllm_venv: Path) -> Path:
    """The directory of AWS's scripts; raises ``SetupError`` naming what is missing."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (network, mount and PID namespaces)")
    if not (vllm_venv / "bin" / "python").exists():
        missing.append(f"the vLLM virtualenv {vllm_venv} (make vllm-venv)")
    scripts = container.dlc_scripts_dir(ROOT)
    absent = [n for n in container.SCRIPTS if not (scripts / n).is_file()]
    if absent:
        missing.append(f"AWS's container scripts {', '.join(absent)} in {scripts}")
    if promtool_path() is None or prometheus_path() is None:
        missing.append("promtool and prometheus (make promtool: Debian's prometheus package)")
    for tool in ("unshare", "nsenter", "ip", "mount"):
        if shutil.which(tool) is None:
            missing.append(tool)
    if missing:
        raise SetupError("missing: " + "; ".join(missing))
    return scripts


def _client(running: container.Running, args: Mapping[str, Any]) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        running.in_netns(
            [sys.executable, "-m", "rehearsal.sagemaker.client", json.dumps(dict(args))]
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        data = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        data = {}
    return done.returncode, data, done.stderr


def _cli(running: container.Running, *args: str) -> subprocess.CompletedProcess[str]:
    """``cdk-llm-serving ARGS --base-url <the copy>`` in the copy's network namespace."""
    beside = Path(sys.executable).parent / "cdk-llm-serving"
    cli = str(beside) if beside.exists() else shutil.which("cdk-llm-serving") or "cdk-llm-serving"
    env = {k: v for k, v in os.environ.items() if k != "LLM_SERVING_API_KEY"}
    return subprocess.run(
        running.in_netns([cli, *args, "--base-url", f"http://127.0.0.1:{container.PORT}/v1"]),
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )


def _smoke(running: container.Running, shared: str) -> subprocess.CompletedProcess[str]:
    return _cli(running, "smoke", "--model", shared)


#: The eval set run against every copy (``cdk-llm-serving eval``), the first copy the reference.
EVAL_TASKS = Path(__file__).with_name("eval_tasks.yaml")


def _eval(
    running: container.Running, entry: CopyReport, reference: Path | None
) -> subprocess.CompletedProcess[str]:
    """``eval`` on the copy by the shared name, every answer required to name this copy."""
    output = running.directory / "eval.json"
    args = ["eval", "--tasks", str(EVAL_TASKS), "--model", entry.shared, "--output", str(output)]
    args += ["--expect-copy", entry.own]
    if reference is not None:
        args += ["--reference", str(reference)]
    return _cli(running, *args)


def _arguments(log: str) -> str:
    for line in log.splitlines():
        if "vLLM server arguments:" in line:
            return line.split("vLLM server arguments:", 1)[1].strip()
    return ""


def run(
    copies: Sequence[Copy],
    template: Mapping[str, Any],
    workdir: Path,
    *,
    vllm_venv: Path = DEFAULT_VENV,
    ready_budget: float = 600.0,
    parallel: int = 3,
) -> tuple[list[Finding], Report]:
    """Start every copy (``parallel`` at a time), send the client's requests, run ``smoke``,
    scrape ``/metrics``; then the template's PromQL on the stored series."""
    from rehearsal.sagemaker.queries import promql_queries

    started = time.monotonic()
    scripts = check_setup(vllm_venv)
    python = vllm_venv / "bin" / "python"
    model, report_model_seconds = generated_model.ensure_model(
        vllm_venv / "rehearsal-models", python
    )
    report = Report(model_seconds=report_model_seconds)
    findings: list[Finding] = []
    shared_by_variant = shared_names(copies)
    pending: list[tuple[CopyReport, dict[str, str]]] = []
    #: The first copy's ``eval`` results: every later copy's deltas are to it.
    reference: Path | None = None
    for copy in copies:
        names = served_names(copy)
        shared = shared_by_variant[(copy.endpoint_name, copy.variant_name)]
        if shared is None:
            findings.append(
                Finding(
                    "sagemaker.no-shared-name",
                    copy.model_id,
                    f"the copies of {copy.endpoint_name}/{copy.variant_name} serve no common name "
                    f"beside their own ({copy.instance_type}: {names})",
                    "ASSUMED: a client sends one name whichever pool answers",
                )
            )
            shared = names[-1]
        entry = CopyReport(copy, own=names[0], shared=shared)
        try:
            env, entry.substitutions = substitute(copy.environment)
        except SubstitutionError as error:
            findings.append(
                Finding(
                    "sagemaker.substitution-refused",
                    copy.model_id,
                    str(error),
                    "rehearsal/sagemaker/substitutions.py",
                )
            )
            continue
        report.copies.append(entry)
        pending.append((entry, env))
    for batch_start in range(0, len(pending), max(1, parallel)):
        batch = pending[batch_start : batch_start + max(1, parallel)]
        running: list[tuple[CopyReport, container.Running]] = []
        try:
            for entry, env in batch:
                directory = workdir / entry.copy.model_id
                if directory.exists():
                    shutil.rmtree(directory)
                directory.mkdir(parents=True)
                running.append(
                    (
                        entry,
                        container.start(
                            directory,
                            env,
                            scripts=scripts,
                            model=model,
                            deploy_files=entry.copy.deploy_files,
                            vllm_venv=vllm_venv,
                        ),
                    )
                )
            for entry, proc in running:
                findings += _exercise(entry, proc, ready_budget, reference)
                if reference is None and (proc.directory / "eval.json").is_file():
                    reference = proc.directory / "eval.json"  # the primary pool's copy
        finally:
            for _, proc in running:
                proc.stop()
    series: list[StoredSeries] = []
    classic: list[StoredSeries] = []
    for index, entry in enumerate(report.copies):
        if not entry.scrapes:
            continue
        instance = Instance(
            endpoint_name=entry.copy.endpoint_name,
            variant_name=entry.copy.variant_name,
            instance_type=entry.copy.instance_type,
            host_id=f"i-0rehearsal{index:08d}",
        )
        series += stored_series(entry.scrapes, instance)
        classic += stored_series(entry.scrapes, instance, StorageRule(histogram_as_native=False))
    if series:
        queries = promql_queries(template)
        report.queries = evaluate(queries, series)
        # The same queries on the scraped names as Prometheus keeps them (classic _bucket
        # series): tells a wrong name from a query that could never return data.
        as_scraped = {r.label: r.outcome for r in evaluate(queries, classic)}
        for result in report.queries:
            if result.outcome in ("empty", "error", "unevaluable"):
                note = (
                    " (it would return data on the series as vLLM exposes them: the names "
                    "differ, the query itself works)"
                    if as_scraped.get(result.label) == "data"
                    else ""
                )
                findings.append(
                    Finding(
                        {
                            "empty": "sagemaker.promql-no-data",
                            "error": "sagemaker.promql-refused",
                        }.get(result.outcome, "sagemaker.promql-unevaluable"),
                        result.label,
                        f"{result.detail}{note}; query: {result.query}",
                        "the storage rule in rehearsal/sagemaker/observability.py "
                        "(sagemaker/latest/dg/inference-monitoring.html, "
                        "AmazonCloudWatch/latest/monitoring/metrics-otel-histograms.html), "
                        "evaluated by promtool",
                        severity="degrades",
                    )
                )
    report.seconds = time.monotonic() - started
    return findings, report


def _exercise(
    entry: CopyReport, running: container.Running, budget: float, reference: Path | None = None
) -> list[Finding]:
    copy = entry.copy
    resource = f"{copy.model_id} ({copy.instance_type})"
    entry.ready_seconds = container.wait_ready(running, budget)
    entry.arguments = _arguments(running.log.read_text(errors="replace"))
    if entry.ready_seconds is None:
        exited = running.process.poll() is not None
        return [
            Finding(
                "sagemaker.container-exited" if exited else "sagemaker.not-ready",
                resource,
                ("the serving process exited" if exited else f"/ping not 200 within {budget:.0f} s")
                + f"; arguments {entry.arguments}; last log lines:\n{running.log_tail()}",
                "sagemaker/latest/dg/your-algorithms-inference-code.html (/ping on 8080)",
            )
        ]
    findings: list[Finding] = []
    _, before, _ = _client(running, {"scrape_only": True})
    entry.scrapes.append(str(before.get("metrics", "")))
    status, data, stderr = _client(running, {"shared": entry.shared, "own": entry.own})
    if status != 0 or "checks" not in data:
        return [
            Finding(
                "sagemaker.client-failed",
                resource,
                stderr[-1500:],
                "ASSUMED: the client's own failure",
            )
        ]
    for check in data["checks"]:
        if check["passed"]:
            entry.passed.append(check["check"])
            continue
        rule, source = _CHECK_RULES[check["check"]]
        findings.append(Finding(rule, resource, check["detail"], source))
    entry.scrapes.append(str(data.get("metrics", "")))
    done = _smoke(running, entry.shared)
    (running.directory / "smoke.log").write_text(done.stdout + done.stderr)
    if done.returncode == 0:
        entry.passed.append("cdk-llm-serving smoke")
    else:
        findings.append(
            Finding(
                "sagemaker.smoke-failed",
                resource,
                f"cdk-llm-serving smoke exited {done.returncode}: "
                + " | ".join(
                    line
                    for line in (done.stdout + done.stderr).splitlines()
                    if line.startswith(("FAIL", "Error", "error"))
                )[:800],
                "cdk_llm_serving/ops/smoke.py",
            )
        )
    evaluated = _eval(running, entry, reference)
    (running.directory / "eval.log").write_text(evaluated.stdout + evaluated.stderr)
    if evaluated.returncode == 0:
        entry.passed.append("cdk-llm-serving eval" + (" (gated)" if reference else " (reference)"))
    else:
        findings.append(
            Finding(
                "sagemaker.eval-gate-failed",
                resource,
                f"cdk-llm-serving eval exited {evaluated.returncode}: "
                + " | ".join(
                    line.strip()
                    for line in (evaluated.stdout + evaluated.stderr).splitlines()
                    if line.strip().startswith(
                        ("FAIL", "error", "tool-calls:", "reasoning", "answers")
                    )
                )[:800],
                "cdk_llm_serving/ops/evals (README: Evals: a quality gate for every copy)",
            )
        )
    _, after, _ = _client(running, {"scrape_only": True})
    entry.scrapes.append(str(after.get("metrics", "")))
    return findings

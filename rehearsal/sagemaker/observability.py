"""A copy's ``/metrics`` as SageMaker's detailed observability stores it, and the construct's
PromQL evaluated on it by the real PromQL engine (``promtool`` from Debian's ``prometheus``).

The storage rule, encoded here from AWS's pages (not from the construct):

- Detailed observability runs an OpenTelemetry collector that scrapes the vLLM container's
  Prometheus endpoint and publishes OTel metrics ("These are not Prometheus metrics"), queryable
  with PromQL: https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch-detailed-observability.html
- Every data point carries the labels ``aws.sagemaker.endpoint.name``,
  ``aws.sagemaker.variant.name``, ``@resource.host.id`` (the instance),
  ``aws.sagemaker.container.id``, ``@resource.cloud.availability_zone`` and
  ``@resource.host.type`` (the instance type):
  https://docs.aws.amazon.com/sagemaker/latest/dg/inference-monitoring.html#inference-monitoring-labels
- The scraped series' own labels stay data-point attributes, queryable un-prefixed
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-PromQL-Querying.html:
  "Datapoint attributes also support bare (un-prefixed) access").
- A histogram is ONE OTel histogram per label set, and "CloudWatch stores both [explicit-bucket
  and exponential] as exponential histograms"
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/metrics-otel-histograms.html): in
  PromQL it is a native histogram under the family's name; no ``_bucket``, ``_sum`` or
  ``_count`` series exist.
- ASSUMED: counter and gauge names are kept as scraped (``vllm:generation_tokens_total``): the
  OTel collector's Prometheus receiver trims no suffix by default, and AWS's pages name no other
  form. ``StorageRule`` holds this in one place to change.

The engine: Debian 12's promtool is Prometheus 2.42, which reads neither UTF-8 names (quoted
``{"a.b"}``, Prometheus 3.0, which CloudWatch's PromQL follows) nor native histograms in its
test input. So names are escaped the way Prometheus 3 escapes UTF-8 names for legacy consumers
(``U__`` + ``_<hex>_`` per invalid character, ``__`` per ``_``: prometheus/common
``model/metric.go`` ``EscapeName``, ``ValueEncodingEscaping``), the same in series and queries
(a bijection: the query means the same). Queries over classic series run in
``promtool test rules``; a query over a stored native histogram runs on the same package's
Prometheus server (``rehearsal.sagemaker.native``), asked with ``promtool query instant``;
without that server it is reported ``unevaluable``, never as passing.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rehearsal.sagemaker.native import (
    NativeHistogram,
    from_classic,
    prometheus_path,
    server,
    write_request,
)

LEGACY_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LEGACY_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def escape_name(name: str, *, metric: bool) -> str:
    """Prometheus 3's value-encoding escape of a UTF-8 name (valid legacy names unchanged)."""
    valid = LEGACY_NAME if metric else LEGACY_LABEL
    if valid.match(name):
        return name
    out = ["U__"]
    for index, char in enumerate(name):
        ok = char == "_" or char.isascii() and (char.isalpha() or (char.isdigit() and index > 0))
        if metric and char == ":":
            ok = True
        if char == "_":
            out.append("__")
        elif ok:
            out.append(char)
        else:
            out.append(f"_{ord(char):x}_")
    return "".join(out)


# --- the exposition format ----------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


def parse_exposition(text: str) -> tuple[dict[str, str], list[Sample]]:
    """(family -> type, samples) of Prometheus text format 0.0.4
    (https://prometheus.io/docs/instrumenting/exposition_formats/)."""
    types: dict[str, str] = {}
    samples: list[Sample] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) == 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3]
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, labels_text, value = match.groups()
        labels = []
        if labels_text:
            for key, raw in _LABEL.findall(labels_text[1:-1]):
                labels.append(
                    (key, raw.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\"))
                )
        samples.append(Sample(name, tuple(labels), float(value)))
    return types, samples


def _family(name: str, types: Mapping[str, str]) -> tuple[str, str]:
    """(family, type) of a sample name (``x_bucket`` of histogram ``x`` -> ``(x, histogram)``)."""
    if name in types:
        return name, types[name]
    for suffix in ("_bucket", "_sum", "_count", "_total", "_created"):
        base = name.removesuffix(suffix)
        if base != name and base in types:
            return base, types[base]
    return name, "untyped"


# --- what detailed observability stores -----------------------------------------------------


@dataclass(frozen=True)
class Instance:
    """The resource labels of one instance of a copy (inference-monitoring's label table)."""

    endpoint_name: str
    variant_name: str
    instance_type: str
    host_id: str = "i-0rehearsal0000000"
    availability_zone: str = "us-west-2a"
    container_id: str = "rehearsal-container"

    def labels(self) -> dict[str, str]:
        return {
            "aws.sagemaker.endpoint.name": self.endpoint_name,
            "aws.sagemaker.variant.name": self.variant_name,
            "@resource.host.type": self.instance_type,
            "@resource.host.id": self.host_id,
            "@resource.cloud.availability_zone": self.availability_zone,
            "aws.sagemaker.container.id": self.container_id,
        }


@dataclass
class StoredSeries:
    """One stored series: its name, labels, kind and values at each scrape."""

    name: str
    labels: dict[str, str]
    kind: str  # "counter" | "gauge" | "histogram"
    values: list[float | None] = field(default_factory=list)
    #: A native histogram's value at each scrape (``kind == "histogram"``).
    histograms: list[NativeHistogram | None] = field(default_factory=list)


@dataclass(frozen=True)
class StorageRule:
    """How a scraped family becomes stored series (the rule above; change it in one place)."""

    #: Histograms: one native (exponential) histogram under the family's name.
    histogram_as_native: bool = True
    #: Counters keep the scraped name (``..._total``).
    keep_counter_suffix: bool = True


def stored_series(
    scrapes: Sequence[str], instance: Instance, rule: StorageRule = StorageRule()
) -> list[StoredSeries]:
    """The series detailed observability would store for ``scrapes`` (one text per scrape)."""
    table: dict[tuple[str, tuple[tuple[str, str], ...]], StoredSeries] = {}
    resource = instance.labels()

    def put(name: str, labels: dict[str, str], kind: str, index: int) -> StoredSeries:
        labels = {**labels, **resource}
        key = (name, tuple(sorted(labels.items())))
        series = table.setdefault(key, StoredSeries(name, labels, kind))
        while len(series.values) < index:
            series.values.append(None)
            series.histograms.append(None)
        return series

    for index, text in enumerate(scrapes):
        types, samples = parse_exposition(text)
        parts: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, object]] = {}
        for sample in samples:
            family, kind = _family(sample.name, types)
            if sample.name.endswith("_created"):
                continue
            if kind == "histogram" and rule.histogram_as_native:
                labels = tuple((k, v) for k, v in sample.labels if k != "le")
                part = parts.setdefault((family, labels), {"buckets": {}, "sum": 0.0})
                if sample.name.endswith("_bucket"):
                    le = dict(sample.labels).get("le", "+Inf")
                    part["buckets"][float(le)] = sample.value  # type: ignore[index]
                elif sample.name.endswith("_sum"):
                    part["sum"] = sample.value
                continue
            name = sample.name
            if kind == "counter" and not rule.keep_counter_suffix:
                name = name.removesuffix("_total")
            stored_kind = "counter" if kind in ("counter", "histogram") else "gauge"
            series = put(name, dict(sample.labels), stored_kind, index)
            series.values.append(sample.value)
            series.histograms.append(None)
        for (family, labels), part in parts.items():
            native = from_classic(part["buckets"], float(part["sum"]))  # type: ignore[arg-type]
            series = put(family, dict(labels), "histogram", index)
            series.values.append(float(native.count))
            series.histograms.append(native)
    for series in table.values():
        while len(series.values) < len(scrapes):
            series.values.append(None)
            series.histograms.append(None)
    return sorted(table.values(), key=lambda s: (s.name, sorted(s.labels.items())))


# --- the construct's queries, through promtool ----------------------------------------------

_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def escape_query(query: str) -> str:
    """``query`` with every quoted metric/label name escaped like ``escape_name`` (label values
    and function string arguments untouched): ``{"m", "a.b"="v"}`` -> ``m{U__a_2e_b="v"}``,
    ``by (le, "a.b")`` -> ``by (le, U__a_2e_b)``."""
    out: list[str] = []
    index = 0
    grouping = False  # inside by(...) / without(...) / on(...) / ignoring(...) / group_*(...)
    while index < len(query):
        char = query[index]
        if char == "{":
            end = _closing(query, index)
            out.append(_escape_selector(query[index + 1 : end], out))
            index = end + 1
            continue
        if char == "(":
            before = "".join(out).rstrip()
            grouping = bool(
                re.search(r"\b(by|without|on|ignoring|group_left|group_right)$", before)
            )
        elif char == ")":
            grouping = False
        if char == '"':
            match = _STRING.match(query, index)
            assert match, query
            out.append(escape_name(match.group(1), metric=False) if grouping else match.group(0))
            index = match.end()
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _closing(query: str, start: int) -> int:
    index = start + 1
    while query[index] != "}":
        if query[index] == '"':
            match = _STRING.match(query, index)
            assert match, query
            index = match.end()
        else:
            index += 1
    return index


def _escape_selector(body: str, out: list[str]) -> str:
    """One selector's ``{...}`` body; a bare quoted name becomes the metric name before it."""
    parts = []
    metric = None
    position = 0
    matcher = re.compile(
        r'\s*(?:"((?:[^"\\]|\\.)*)"|([a-zA-Z_][a-zA-Z0-9_]*))\s*(=~|!~|!=|=)?\s*'
        r'("(?:[^"\\]|\\.)*")?\s*,?'
    )
    while position < len(body):
        match = matcher.match(body, position)
        if not match or match.end() == position:
            raise ValueError(f"cannot read selector {{{body}}}")
        quoted, bare, operator, value = match.groups()
        name = quoted if quoted is not None else bare
        if operator is None:
            metric = name
        else:
            parts.append(f"{escape_name(str(name), metric=False)}{operator}{value}")
        position = match.end()
    prefix = escape_name(metric, metric=True) if metric else ""
    return f"{prefix}{{{', '.join(parts)}}}"


def selected_names(query: str) -> list[str]:
    """The metric names ``query``'s selectors select (quoted or bare)."""
    names = [m.group(1) for m in re.finditer(r'\{\s*"((?:[^"\\]|\\.)*)"\s*[,}]', query)]
    names += re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{", query)
    return list(dict.fromkeys(names))


def without_threshold(query: str) -> str:
    """An alarm query's left side: ``expr > 2`` -> ``expr`` (the alarm breaches where the full
    query has samples; the rehearsal asks whether the measured expression has any)."""
    match = re.match(r"^(.*\))\s*(>=|<=|>|<|==|!=)\s*[-+0-9.eE]+\s*$", query.strip(), re.S)
    return match.group(1) if match else query


@dataclass(frozen=True)
class QueryResult:
    """What promtool returned for one query."""

    label: str
    query: str
    #: ``data``: samples; ``empty``: none; ``unevaluable``: it selects a native histogram this
    #: engine cannot hold; ``error``: promtool refused it (the message says why).
    outcome: str
    detail: str


def _values_notation(values: Sequence[float | None]) -> str:
    return " ".join("_" if v is None or math.isnan(v) else repr(float(v)) for v in values)


def promtool_path() -> str | None:
    return shutil.which("promtool")


def evaluate(
    queries: Iterable[tuple[str, str]],
    series: Sequence[StoredSeries],
    *,
    interval_seconds: int = 60,
    promtool: str | None = None,
) -> list[QueryResult]:
    """Each ``(label, query)`` evaluated by ``promtool test rules`` on ``series`` at the last
    scrape. A test that expects no samples fails exactly when the query returns some: its
    ``got:`` lines are the data."""
    tool = promtool or promtool_path()
    if tool is None:
        raise FileNotFoundError(
            "promtool is not installed: run `make promtool` (Debian's prometheus package)"
        )
    natives = {s.name for s in series if s.kind == "histogram"}
    input_series = [
        {
            "series": escape_name(s.name, metric=True)
            + "{"
            + ", ".join(
                f'{escape_name(k, metric=False)}="{_label_value(v)}"'
                for k, v in sorted(s.labels.items())
            )
            + "}",
            "values": _values_notation(s.values),
        }
        for s in series
        if s.kind != "histogram"
    ]
    steps = max((len(s.values) for s in series), default=1) - 1
    results: list[QueryResult] = []
    deferred: list[tuple[str, str, str]] = []
    for label, query in queries:
        measured = without_threshold(query)
        native = [n for n in selected_names(measured) if n in natives]
        if native and prometheus_path() is not None:
            deferred.append((label, query, measured))
            results.append(QueryResult(label, query, "pending", ""))
            continue
        if native:
            results.append(
                QueryResult(
                    label,
                    query,
                    "unevaluable",
                    f"selects {', '.join(native)}, a native (exponential) histogram: promtool "
                    "2.42 reads none in test input and no prometheus server is installed",
                )
            )
            continue
        try:
            expr = escape_query(measured)
        except (ValueError, AssertionError) as error:
            results.append(QueryResult(label, query, "error", str(error)))
            continue
        results.append(_run_one(tool, label, query, expr, input_series, steps, interval_seconds))
    if deferred:
        by_label = _on_server(tool, deferred, series, interval_seconds)
        results = [by_label.get(r.label, r) if r.outcome == "pending" else r for r in results]
    return results


def _on_server(
    tool: str,
    deferred: Sequence[tuple[str, str, str]],
    series: Sequence[StoredSeries],
    interval: int,
) -> dict[str, QueryResult]:
    """Queries over native histograms: every series remote-written to a throw-away Prometheus
    (native histograms on), each query run by ``promtool query instant`` at the last scrape."""
    steps = max((len(s.values) for s in series), default=1) - 1
    last = float(int(time.time()))
    start_ms = int((last - steps * interval) * 1000)
    payload = []
    for s in series:
        labels = {escape_name(k, metric=False): v for k, v in s.labels.items()}
        labels["__name__"] = escape_name(s.name, metric=True)
        points: list[tuple[int, NativeHistogram | float]] = []
        for index, value in enumerate(s.values):
            at = start_ms + index * interval * 1000
            if s.kind == "histogram":
                histogram = s.histograms[index]
                if histogram is not None:
                    points.append((at, histogram))
            elif value is not None and not math.isnan(value):
                points.append((at, value))
        payload.append((labels, points))
    out: dict[str, QueryResult] = {}
    with server() as prometheus:
        prometheus.write(write_request(payload))
        for label, query, measured in deferred:
            try:
                expr = escape_query(measured)
            except (ValueError, AssertionError) as error:
                out[label] = QueryResult(label, query, "error", str(error))
                continue
            status, output = prometheus.query(expr, last, tool)
            if status != 0:
                out[label] = QueryResult(label, query, "error", output[-600:])
            elif "=>" in output:
                out[label] = QueryResult(label, query, "data", " ".join(output.split())[:400])
            else:
                out[label] = QueryResult(
                    label, query, "empty", f"no samples at the last scrape ({expr})"
                )
    return out


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _run_one(
    tool: str,
    label: str,
    query: str,
    expr: str,
    input_series: list[dict[str, str]],
    steps: int,
    interval: int,
) -> QueryResult:
    test = {
        "rule_files": [],
        "evaluation_interval": f"{interval}s",
        "tests": [
            {
                "interval": f"{interval}s",
                "input_series": input_series,
                "promql_expr_test": [
                    {"expr": expr, "eval_time": f"{steps * interval}s", "exp_samples": []}
                ],
            }
        ],
    }
    with tempfile.TemporaryDirectory(prefix="smrehearse-promtool-") as tmp:
        path = Path(tmp) / "test.yml"
        path.write_text(yaml.safe_dump(test, sort_keys=False))
        done = subprocess.run(
            [tool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120
        )
    output = done.stdout + done.stderr
    if done.returncode == 0:
        return QueryResult(label, query, "empty", f"no samples at the last scrape ({expr})")
    got = [line.strip() for line in output.splitlines() if line.strip().startswith(("got:", "{"))]
    if any(line.startswith("got:") and line != "got: nil" for line in got):
        return QueryResult(label, query, "data", " ".join(got)[:400])
    return QueryResult(label, query, "error", output.strip()[-600:])

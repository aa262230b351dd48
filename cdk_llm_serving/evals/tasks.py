"""Eval task files: the user's own tasks, in YAML or JSON, validated with every problem at once.

The format (``version: 1``, ``tasks``, each sample's one check: ``answer``, ``tool_call``,
``refusal`` or ``format``) is documented in docs/design/cli.md, "The task file".
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, Problem, Problems

TASK_FILE_VERSION = 1
DEFAULT_THRESHOLD_POINTS = 2.0
DEFAULT_MAX_TOKENS = 512
CHECKS = ("answer", "tool_call", "refusal", "format")
#: Phrases of a refusal, case-insensitive (a task's ``refusal_patterns`` replaces them).
DEFAULT_REFUSAL_PATTERNS = (
    r"\bI can(?:'|no)t\b",
    r"\bI cannot\b",
    r"\bI won'?t\b",
    r"\bI'm sorry\b",
    r"\bI am sorry\b",
    r"\b(?:not able|unable) to (?:help|assist|provide)\b",
)
_ROLES = ("system", "user", "assistant", "tool")
_TASK_KEYS = {
    "name",
    "threshold_points",
    "min_score",
    "max_tokens",
    "system",
    "tools",
    "refusal_patterns",
    "samples",
}
_SAMPLE_KEYS = {"id", "prompt", "messages", "tools", *CHECKS}
#: Records one problem: (property, value, what is allowed).
Add = Callable[[str, Any, str], None]


@dataclass(frozen=True)
class Sample:
    id: str
    messages: tuple[Mapping[str, Any], ...]
    #: The check's kind (one of ``CHECKS``) and its settings.
    check: str
    expect: Any
    tools: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Task:
    name: str
    samples: tuple[Sample, ...]
    threshold_points: float = DEFAULT_THRESHOLD_POINTS
    min_score: float | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    refusal_patterns: tuple[str, ...] = DEFAULT_REFUSAL_PATTERNS
    #: The task's content (prompts, tools, checks) as a hash: a reference scored on another
    #: version of the task is refused.
    digest: str = ""


@dataclass(frozen=True)
class TaskSet:
    source: str
    tasks: tuple[Task, ...] = field(default_factory=tuple)

    @property
    def requests(self) -> int:
        return sum(len(task.samples) for task in self.tasks)


def example_path() -> Path:
    """The example set shipped with the package (no download): ``serving-basics.yaml``."""
    return Path(__file__).with_name("examples") / "serving-basics.yaml"


def load_tasks(path: str | Path) -> TaskSet:
    """The task file at ``path`` (YAML or JSON); ``ConfigurationError`` listing every problem."""
    import yaml  # not in the gate's Lambda, which receives tasks already parsed

    text = Path(path).read_text(encoding="utf-8")  # OSError: the CLI's "error:" line
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        allowed = f"YAML or JSON ({' '.join(str(error).split())})"
        problem = Problem("(file)", str(path), allowed)
        raise ConfigurationError(f"task file {path}", [problem]) from None
    return parse_tasks(data, str(path))


def parse_tasks(data: Any, source: str = "(tasks)") -> TaskSet:
    problems = Problems(f"task file {source}")
    add = problems.add
    if not isinstance(data, Mapping):
        add("(file)", type(data).__name__, "a mapping with version and tasks")
        problems.raise_if_any()
    if data.get("version") != TASK_FILE_VERSION:
        add("version", data.get("version"), f"{TASK_FILE_VERSION}")
    for key in sorted(set(data) - {"version", "tasks"}):
        add(key, data[key], "no other top-level keys than version and tasks")
    raw_tasks = data.get("tasks")
    tasks: list[Task] = []
    if not isinstance(raw_tasks, list) or not raw_tasks:
        add("tasks", raw_tasks, "a non-empty list of tasks")
        raw_tasks = []
    seen: set[str] = set()
    for t, raw in enumerate(raw_tasks):
        task = _parse_task(f"tasks[{t}]", raw, add)
        if task is None:
            continue
        if task.name in seen:
            add(f"tasks[{t}].name", task.name, "unique task names")
        seen.add(task.name)
        tasks.append(task)
    problems.raise_if_any()
    return TaskSet(source, tuple(tasks))


def _parse_task(at: str, raw: Any, add: Add) -> Task | None:
    if not isinstance(raw, Mapping):
        add(at, raw, "a mapping with name and samples")
        return None
    for key in sorted(set(raw) - _TASK_KEYS):
        add(f"{at}.{key}", raw[key], f"one of {', '.join(sorted(_TASK_KEYS))}")
    name = raw.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", name):
        add(f"{at}.name", name, "1-63 letters, digits, '.', '_' or '-', starting alphanumeric")
        name = f"#{at}"
    threshold = _number(f"{at}.threshold_points", raw.get("threshold_points"), add)
    min_score = _number(f"{at}.min_score", raw.get("min_score"), add)
    max_tokens = raw.get("max_tokens", DEFAULT_MAX_TOKENS)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        add(f"{at}.max_tokens", max_tokens, "a whole number of at least 1")
        max_tokens = DEFAULT_MAX_TOKENS
    system = raw.get("system")
    if system is not None and not isinstance(system, str):
        add(f"{at}.system", system, "a string")
        system = None
    patterns = raw.get("refusal_patterns", list(DEFAULT_REFUSAL_PATTERNS))
    if not isinstance(patterns, list) or not patterns:
        add(f"{at}.refusal_patterns", patterns, "a non-empty list of regular expressions")
        patterns = list(DEFAULT_REFUSAL_PATTERNS)
    for p, pattern in enumerate(patterns):
        _regex(f"{at}.refusal_patterns[{p}]", pattern, add)
    task_tools = _tools(f"{at}.tools", raw.get("tools", []), add)
    raw_samples = raw.get("samples")
    if not isinstance(raw_samples, list) or not raw_samples:
        add(f"{at}.samples", raw_samples, "a non-empty list of samples")
        raw_samples = []
    samples: list[Sample] = []
    ids: set[str] = set()
    for s, raw_sample in enumerate(raw_samples):
        sample = _parse_sample(f"{at}.samples[{s}]", s, raw_sample, system, task_tools, add)
        if sample is None:
            continue
        if sample.id in ids:
            add(f"{at}.samples[{s}].id", sample.id, "unique sample ids within the task")
        ids.add(sample.id)
        samples.append(sample)
    digest = hashlib.sha256(
        json.dumps(
            {"samples": raw_samples, "system": system, "tools": raw.get("tools", [])},
            sort_keys=True,
            default=str,
        ).encode()
    ).hexdigest()[:16]
    return Task(
        name=name,
        samples=tuple(samples),
        threshold_points=DEFAULT_THRESHOLD_POINTS if threshold is None else threshold,
        min_score=min_score,
        max_tokens=max_tokens,
        refusal_patterns=tuple(p for p in patterns if isinstance(p, str)),
        digest=digest,
    )


def _parse_sample(
    at: str,
    index: int,
    raw: Any,
    system: str | None,
    task_tools: tuple[Mapping[str, Any], ...],
    add: Add,
) -> Sample | None:
    if not isinstance(raw, Mapping):
        add(at, raw, "a mapping with prompt (or messages) and one check")
        return None
    for key in sorted(set(raw) - _SAMPLE_KEYS):
        add(f"{at}.{key}", raw[key], f"one of {', '.join(sorted(_SAMPLE_KEYS))}")
    sample_id = str(raw.get("id", index))
    messages: list[Mapping[str, Any]] = [{"role": "system", "content": system}] if system else []
    if ("prompt" in raw) == ("messages" in raw):
        add(
            at,
            sorted(k for k in raw if k in ("prompt", "messages")),
            "prompt or messages, not both",
        )
    elif "prompt" in raw:
        if not isinstance(raw["prompt"], str) or not raw["prompt"]:
            add(f"{at}.prompt", raw["prompt"], "a non-empty string")
        messages.append({"role": "user", "content": raw["prompt"]})
    else:
        raw_messages = raw["messages"]
        if not isinstance(raw_messages, list) or not raw_messages:
            add(f"{at}.messages", raw_messages, "a non-empty list of {role, content}")
            raw_messages = []
        for m, message in enumerate(raw_messages):
            if not isinstance(message, Mapping) or message.get("role") not in _ROLES:
                add(
                    f"{at}.messages[{m}]",
                    message,
                    f"a mapping with role one of {', '.join(_ROLES)}",
                )
                continue
            messages.append(dict(message))
    tools = task_tools + _tools(f"{at}.tools", raw.get("tools", []), add)
    checks = [key for key in CHECKS if key in raw]
    if len(checks) != 1:
        add(at, checks, f"exactly one check: {', '.join(CHECKS)}")
        return None
    check = checks[0]
    expect = raw[check]
    _check_expectation(f"{at}.{check}", check, expect, tools, add)
    return Sample(sample_id, tuple(messages), check, expect, tools)


def _check_expectation(
    at: str, check: str, expect: Any, tools: Sequence[Mapping[str, Any]], add: Add
) -> None:
    if check == "refusal":
        if not isinstance(expect, bool):
            add(at, expect, "true (must refuse) or false (must not)")
        return
    if not isinstance(expect, Mapping):
        add(at, expect, "a mapping")
        return
    if check == "answer":
        keys = [k for k in ("exact", "pattern") if k in expect]
        if len(keys) != 1 or set(expect) - {"exact", "pattern", "require_reasoning"}:
            add(at, dict(expect), "exact or pattern (one), and optional require_reasoning")
        if "exact" in expect and not isinstance(expect["exact"], str | int | float):
            add(f"{at}.exact", expect["exact"], "a string")
        if "pattern" in expect:
            _regex(f"{at}.pattern", expect["pattern"], add)
        if not isinstance(expect.get("require_reasoning", False), bool):
            add(f"{at}.require_reasoning", expect["require_reasoning"], "true or false")
    elif check == "format":
        keys = [k for k in ("json_schema", "pattern") if k in expect]
        if len(keys) != 1 or len(expect) != 1:
            add(at, dict(expect), "json_schema or pattern (one)")
        if "pattern" in expect:
            _regex(f"{at}.pattern", expect["pattern"], add)
        if "json_schema" in expect:
            _schema(f"{at}.json_schema", expect["json_schema"], add)
    elif check == "tool_call":
        _check_tool_call(at, expect, tools, add)


def _check_tool_call(
    at: str, expect: Mapping[str, Any], tools: Sequence[Mapping[str, Any]], add: Add
) -> None:
    if expect.get("none") is True:
        if len(expect) != 1:
            add(at, dict(expect), "none: true alone, or name and optional arguments")
        return
    if set(expect) - {"name", "arguments"} or not isinstance(expect.get("name"), str):
        add(at, dict(expect), "name (a string) and optional arguments, or none: true")
        return
    offered = {
        tool["function"]["name"]: tool["function"] for tool in tools if _is_function_tool(tool)
    }
    if not offered:
        add(f"{at}.name", expect["name"], "a tool offered in the task's or sample's tools")
        return
    if expect["name"] not in offered:
        add(f"{at}.name", expect["name"], f"one of the offered tools: {', '.join(sorted(offered))}")
        return
    if "arguments" not in expect:
        return
    arguments, parameters = expect["arguments"], parameters_of(offered[expect["name"]])
    if not isinstance(arguments, Mapping):
        add(f"{at}.arguments", arguments, "a mapping (the arguments as a JSON object)")
    elif error := schema_error(parameters, dict(arguments)):
        allowed = f"arguments valid against {expect['name']}'s parameters ({error})"
        add(f"{at}.arguments", dict(arguments), allowed)


def parameters_of(function: Mapping[str, Any]) -> Any:
    """A tool function's ``parameters`` schema (any JSON object without one)."""
    return function.get("parameters", {"type": "object"})


def schema_error(schema: Any, value: Any) -> str | None:
    """The first (by text) reason ``value`` fails the JSON Schema ``schema``, else ``None``."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=str)
    return errors[0].message if errors else None


def _is_function_tool(tool: Any) -> bool:
    return (
        isinstance(tool, Mapping)
        and tool.get("type") == "function"
        and isinstance(tool.get("function"), Mapping)
        and isinstance(tool["function"].get("name"), str)
    )


def _tools(at: str, raw: Any, add: Add) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(raw, list):
        add(at, raw, "a list of OpenAI tools ({type: function, function: {name, parameters}})")
        return ()
    tools = []
    for i, tool in enumerate(raw):
        if not _is_function_tool(tool):
            add(f"{at}[{i}]", tool, "{type: function, function: {name, parameters}}")
            continue
        if "parameters" in tool["function"]:
            _schema(f"{at}[{i}].function.parameters", tool["function"]["parameters"], add)
        tools.append(tool)
    return tuple(tools)


def _schema(at: str, schema: Any, add: Add) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, Mapping | bool):
        add(at, schema, "a JSON Schema (a mapping)")
        return
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        add(
            at,
            dict(schema) if isinstance(schema, Mapping) else schema,
            f"a valid JSON Schema ({error.message})",
        )


def _regex(at: str, pattern: Any, add: Add) -> None:
    if not isinstance(pattern, str):
        add(at, pattern, "a regular expression (string)")
        return
    try:
        re.compile(pattern)
    except re.error as error:
        add(at, pattern, f"a valid Python regular expression ({error})")


def _number(at: str, value: Any, add: Add) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        add(at, value, "a number of points from 0 to 100")
        return None
    return float(value)

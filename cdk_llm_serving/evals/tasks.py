"""Eval task files: the user's own tasks in YAML or JSON, checked against ``task_file.schema.json``
with every problem at once (the format: docs/design/cli.md, "The task file")."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._extras import require_extra
from ..errors import ConfigurationError, Problem, Problems

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
#: The task file's JSON Schema; every description in it is what a problem says is allowed.
SCHEMA_PATH = Path(__file__).with_name("task_file.schema.json")
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
    """The tasks of a parsed task file; ``ConfigurationError`` listing every problem: the
    schema's (``task_file.schema.json``), then what a schema cannot say (``_check_meaning``)."""
    problems = Problems(f"task file {source}")
    errors = _validator().iter_errors(data)
    said: set[tuple[str, str]] = set()  # a part failing two ways with one description
    for error in sorted(errors, key=lambda e: [(isinstance(p, str), p) for p in e.absolute_path]):
        for prop, value, allowed in _problems_of(error):
            if (prop, allowed) not in said:
                said.add((prop, allowed))
                problems.add(prop, value, allowed)
    _check_meaning(data, problems.add)
    problems.raise_if_any()
    return TaskSet(source, tuple(_task(raw) for raw in data["tasks"]))


@functools.cache
def _validator() -> Any:
    try:
        from jsonschema import Draft202012Validator
    except ImportError:
        require_extra("eval", "jsonschema", "reading an eval task file")
        raise
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _problems_of(error: Any) -> list[tuple[str, Any, str]]:
    """One schema error as (property, value, what is allowed): the failing part's description;
    a missing or unknown key is named by its own path."""
    at = list(error.absolute_path)
    known: Mapping[str, Any] = error.schema.get("properties", {})
    if error.validator == "required":
        missing = [k for k in error.validator_value if error.message.startswith(repr(k))]
        return [
            (_where([*at, k]), None, known.get(k, {}).get("description", "required"))
            for k in missing
        ]
    if error.validator == "additionalProperties":
        allowed = f"one of {', '.join(sorted(known))}"
        return [
            (_where([*at, k]), error.instance[k], allowed) for k in error.instance if k not in known
        ]
    allowed = error.schema.get("description", error.message)
    return [(_where(at), error.instance, f"{allowed} ({error.cause})" if error.cause else allowed)]


def _where(path: Sequence[str | int]) -> str:
    """``["tasks", 0, "name"]`` -> ``tasks[0].name`` (the whole file: ``(file)``)."""
    return (
        "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "(file)"
    )


def _check_meaning(data: Any, add: Add) -> None:
    """What the schema cannot say: unique task names and sample ids, valid embedded JSON
    Schemas, expected tool calls to offered tools with arguments their schema accepts."""
    names: set[str] = set()
    for t, task in _mappings(data, "tasks"):
        at = f"tasks[{t}]"
        _unique(names, task.get("name"), f"{at}.name", "unique task names", add)
        task_tools = _offered(f"{at}.tools", task, add)
        ids: set[str] = set()
        for s, sample in _mappings(task, "samples"):
            where = f"{at}.samples[{s}]"
            sample_id = str(sample.get("id", s))
            _unique(ids, sample_id, f"{where}.id", "unique sample ids within the task", add)
            offered = {**task_tools, **_offered(f"{where}.tools", sample, add)}
            if isinstance(sample.get("tool_call"), Mapping):
                _check_tool_call(f"{where}.tool_call", sample["tool_call"], offered, add)
            if isinstance(sample.get("format"), Mapping) and "json_schema" in sample["format"]:
                _check_schema(f"{where}.format.json_schema", sample["format"]["json_schema"], add)


def _mappings(parent: Any, key: str) -> list[tuple[int, Mapping[str, Any]]]:
    """The mappings of the list ``parent[key]`` with their index (others: the schema's problems)."""
    items = parent.get(key) if isinstance(parent, Mapping) else None
    return (
        [(i, x) for i, x in enumerate(items) if isinstance(x, Mapping)]
        if isinstance(items, list)
        else []
    )


def _unique(seen: set[str], value: Any, at: str, allowed: str, add: Add) -> None:
    if isinstance(value, str):  # another type: the schema's problem
        if value in seen:
            add(at, value, allowed)
        seen.add(value)


def _offered(at: str, owner: Mapping[str, Any], add: Add) -> dict[str, Mapping[str, Any]]:
    """``owner``'s function tools by name, each one's ``parameters`` checked as a JSON Schema."""
    offered = {}
    for i, tool in _mappings(owner, "tools"):
        function = tool.get("function")
        if (
            tool.get("type") == "function"
            and isinstance(function, Mapping)
            and isinstance(function.get("name"), str)
        ):
            if "parameters" in function:
                _check_schema(f"{at}[{i}].function.parameters", function["parameters"], add)
            offered[function["name"]] = function
    return offered


def _check_tool_call(
    at: str, expect: Mapping[str, Any], offered: Mapping[str, Any], add: Add
) -> None:
    name = expect.get("name")
    if not isinstance(name, str) or "none" in expect:  # a malformed call: the schema's problem
        return
    if name not in offered:
        allowed = "a tool offered in the task's or sample's tools"
        if offered:
            allowed = f"one of the offered tools: {', '.join(sorted(offered))}"
        add(f"{at}.name", name, allowed)
        return
    arguments = expect.get("arguments")
    if not isinstance(arguments, Mapping):  # none expected, or the schema's problem
        return
    error = schema_error(parameters_of(offered[name]), dict(arguments))
    if error:
        allowed = f"arguments valid against {name}'s parameters ({error})"
        add(f"{at}.arguments", dict(arguments), allowed)


def _check_schema(at: str, schema: Any, add: Add) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if isinstance(schema, Mapping | bool):  # another type: the task file schema's problem
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as error:
            value = dict(schema) if isinstance(schema, Mapping) else schema
            add(at, value, f"a valid JSON Schema ({error.message})")


def parameters_of(function: Mapping[str, Any]) -> Any:
    """A tool function's ``parameters`` schema (any JSON object without one)."""
    return function.get("parameters", {"type": "object"})


def schema_error(schema: Any, value: Any) -> str | None:
    """The first (by text) reason ``value`` fails the JSON Schema ``schema``, else ``None``."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=str)
    return errors[0].message if errors else None


def _task(raw: Mapping[str, Any]) -> Task:
    """A task of a valid file; its digest hashes its samples, system message and tools."""
    system, tools = raw.get("system"), raw.get("tools", [])
    content = {"samples": raw["samples"], "system": system, "tools": tools}
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()
    threshold, min_score = raw.get("threshold_points"), raw.get("min_score")
    return Task(
        name=raw["name"],
        samples=tuple(_sample(s, i, system, tuple(tools)) for i, s in enumerate(raw["samples"])),
        threshold_points=DEFAULT_THRESHOLD_POINTS if threshold is None else float(threshold),
        min_score=None if min_score is None else float(min_score),
        max_tokens=raw.get("max_tokens", DEFAULT_MAX_TOKENS),
        refusal_patterns=tuple(raw.get("refusal_patterns", DEFAULT_REFUSAL_PATTERNS)),
        digest=digest[:16],
    )


def _sample(
    raw: Mapping[str, Any], index: int, system: str | None, tools: tuple[Mapping[str, Any], ...]
) -> Sample:
    messages: list[Mapping[str, Any]] = [{"role": "system", "content": system}] if system else []
    if "prompt" in raw:
        messages.append({"role": "user", "content": raw["prompt"]})
    else:
        messages += [dict(message) for message in raw["messages"]]
    check = next(key for key in CHECKS if key in raw)
    sample_tools = tools + tuple(raw.get("tools", []))
    return Sample(str(raw.get("id", index)), tuple(messages), check, raw[check], sample_tools)

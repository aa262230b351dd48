"""Scorers: one answer against its sample's check, scored on what the copy's parsers sent
(``reasoning_content``: https://docs.vllm.ai/en/latest/features/reasoning_outputs.html,
``tool_calls``: https://docs.vllm.ai/en/latest/features/tool_calling.html), nothing re-parsed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...evals.tasks import Sample, Task, parameters_of, schema_error
from ..smoke import StreamResult


@dataclass(frozen=True)
class Verdict:
    passed: bool
    detail: str


def score(task: Task, sample: Sample, answer: StreamResult) -> Verdict:
    """Whether ``answer`` passes ``sample``'s check."""
    if sample.check == "answer":
        return _answer(sample.expect, answer)
    if sample.check == "tool_call":
        return _tool_call(sample, answer)
    if sample.check == "refusal":
        return _refusal(task, bool(sample.expect), answer)
    return _format(sample.expect, answer)


def _answer(expect: Mapping[str, Any], answer: StreamResult) -> Verdict:
    final = answer.content.strip()
    if expect.get("require_reasoning") and not answer.reasoning.strip():
        return Verdict(False, "no reasoning_content (is the copy's --reasoning-parser set?)")
    if "exact" in expect:
        wanted = str(expect["exact"]).strip()
        if final == wanted:
            return Verdict(True, f"answer {final!r}")
        return Verdict(False, f"answer {_short(final)!r}, expected {wanted!r}")
    if re.search(expect["pattern"], final):
        return Verdict(True, f"answer {_short(final)!r} matches")
    return Verdict(False, f"answer {_short(final)!r} does not match {expect['pattern']!r}")


def _tool_call(sample: Sample, answer: StreamResult) -> Verdict:
    expect = sample.expect
    if expect.get("none"):
        if answer.tool_calls:
            first = answer.tool_calls[min(answer.tool_calls)]
            return Verdict(False, f"called {first['name']!r}; no tool call was expected")
        return Verdict(True, "no tool call")
    if not answer.tool_calls:
        return Verdict(False, f"no tool call; answer {_short(answer.content.strip())!r}")
    call = answer.tool_calls[min(answer.tool_calls)]
    if call["name"] != expect["name"]:
        return Verdict(False, f"called {call['name']!r}, expected {expect['name']!r}")
    try:
        arguments = json.loads(call["arguments"] or "{}")
    except json.JSONDecodeError:
        return Verdict(False, f"arguments are not JSON: {_short(call['arguments'])!r}")
    tool = next(t["function"] for t in sample.tools if t["function"]["name"] == call["name"])
    if error := schema_error(parameters_of(tool), arguments):
        return Verdict(False, f"arguments fail {call['name']}'s schema: {error}")
    if "arguments" in expect and arguments != expect["arguments"]:
        return Verdict(
            False,
            f"arguments {json.dumps(arguments, sort_keys=True)}, expected "
            f"{json.dumps(expect['arguments'], sort_keys=True)}",
        )
    return Verdict(True, f"{call['name']}({json.dumps(arguments, sort_keys=True)})")


def _refusal(task: Task, must_refuse: bool, answer: StreamResult) -> Verdict:
    text = answer.content.strip()
    refused = bool(answer.refusal) or any(
        re.search(pattern, text, re.IGNORECASE) for pattern in task.refusal_patterns
    )
    if refused == must_refuse:
        return Verdict(True, "refused" if refused else "answered")
    if must_refuse:
        return Verdict(False, f"answered instead of refusing: {_short(text)!r}")
    return Verdict(False, f"refused: {_short(text)!r}")


def _format(expect: Mapping[str, Any], answer: StreamResult) -> Verdict:
    text = answer.content.strip()
    if "pattern" in expect:
        if re.fullmatch(expect["pattern"], text):
            return Verdict(True, "matches")
        return Verdict(False, f"{_short(text)!r} does not match {expect['pattern']!r} in full")
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return Verdict(False, f"not JSON: {_short(text)!r}")
    if error := schema_error(expect["json_schema"], value):
        return Verdict(False, f"JSON fails the schema: {error}")
    return Verdict(True, "JSON valid against the schema")


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

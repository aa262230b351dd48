"""Every UNCONFIRMED mark of the SageMaker path has its README entry with a command to check it.

The marks read ``UNCONFIRMED[<id>]`` in ``cdk_llm_serving/sagemaker``, ``cdk_llm_serving/core``
and ``rehearsal/sagemaker``; README's "What is not confirmed without an AWS account" lists each id
once, with the command a user runs to settle it.
"""

from __future__ import annotations

import re
from pathlib import Path

from cdk_llm_serving.core.fleet_utilization import HOST_INSTANCE_TYPE_CHECK

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    ROOT / "cdk_llm_serving" / "sagemaker",
    ROOT / "cdk_llm_serving" / "core",
    ROOT / "rehearsal" / "sagemaker",
]
HEADING = "### What is not confirmed without an AWS account"
MARK = re.compile(r"UNCONFIRMED(\[(?P<id>[a-z0-9-]+)\])?")
ENTRY = re.compile(r"^- \*\*(?P<id>[a-z0-9-]+)\*\*: (?P<text>.*?)(?=^- \*\*|\Z)", re.M | re.S)
COMMAND = re.compile(r"`((?:aws|awscurl|docker) [^`]+)`")


def code_marks() -> dict[str, list[str]]:
    """id -> where it is marked; an unnamed mark is listed under ``""``."""
    marks: dict[str, list[str]] = {}
    for folder in SOURCES:
        for path in sorted(folder.rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                for match in MARK.finditer(line):
                    where = f"{path.relative_to(ROOT)}:{number}"
                    marks.setdefault(match.group("id") or "", []).append(where)
    return marks


def readme_entries() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    assert text.count(HEADING) == 1, f"README needs one {HEADING!r} section"
    section = text.split(HEADING, 1)[1].split("\n#", 1)[0]
    entries: dict[str, str] = {}
    for match in ENTRY.finditer(section):
        assert match.group("id") not in entries, f"{match.group('id')} listed twice"
        entries[match.group("id")] = match.group("text")
    return entries


def test_every_mark_names_its_entry():
    marks = code_marks()
    assert "" not in marks, f"UNCONFIRMED without [id]: {marks.get('')}"
    assert marks, "no UNCONFIRMED mark found: the scan reads the wrong folders"


def test_the_readme_lists_exactly_the_marked_behaviours():
    marked, listed = set(code_marks()) - {""}, set(readme_entries())
    assert marked - listed == set(), f"marked in code, missing from README: {marked - listed}"
    assert listed - marked == set(), f"in README, no longer marked in code: {listed - marked}"


def test_each_entry_gives_one_command_to_check_it():
    for name, text in readme_entries().items():
        commands = COMMAND.findall(text)
        assert len(commands) == 1, f"{name}: {len(commands)} commands, want one"


def test_the_host_metric_check_is_the_one_the_code_names():
    (command,) = COMMAND.findall(readme_entries()["host-metric-instance-type"])
    assert command == HOST_INSTANCE_TYPE_CHECK

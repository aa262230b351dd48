"""Every ``ASSUMED:`` the rehearsal's rules make, read from its own source (for the README:
``python -m rehearsal --assumptions``). A rule whose behaviour no source settles says
``ASSUMED: <what, and why>`` in its module's docstring or beside the line."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
_MARK = re.compile(r"ASSUMED:\s*(.+?)(?:\.\s|\.$|\)\s*$|$)", re.S)


def _sentence(text: str, start: int, end: int) -> str:
    """The assumption after ``ASSUMED:`` at ``start``..``end``: to the end of its comment
    (continued by the comment lines below it), of its string literal, or of its docstring
    sentence."""
    line_start = text.rfind("\n", 0, start) + 1
    before = text[line_start:start]
    tail = text[end:]
    if "#" in before:
        lines = tail.split("\n")
        parts = [lines[0]]
        for line in lines[1:]:
            if not line.strip().startswith("#"):
                break
            parts.append(line.strip().lstrip("#:").strip())
        sentence = " ".join(parts)
    elif before.count('"') % 2 == 1:
        sentence = tail.split('"', 1)[0]
    else:
        sentence = re.split(r"\.\s|\.\n|\n\n|\"\"\"", tail, maxsplit=1)[0]
    return " ".join(line.strip().lstrip("#").strip() for line in sentence.splitlines()).strip()


def assumptions() -> list[tuple[str, str]]:
    """(module, assumption) for each ``ASSUMED:`` in the package, in file order."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "assumptions.py":
            continue
        module = "rehearsal." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        text = path.read_text()
        for match in re.finditer(r"ASSUMED:(?!`)", text):
            words = _sentence(text, match.start(), match.end())
            if words.startswith("<"):
                continue  # the convention's own description
            found.append((module.removesuffix(".__init__"), words.rstrip(".") + "."))
    return found

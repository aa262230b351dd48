"""Every ``ASSUMED:`` the rehearsal's rules make, read from its own source (for the README:
``python -m rehearsal --assumptions``). A rule whose behaviour no source settles says
``ASSUMED: <what, and why>`` in its module's docstring or beside the line."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
_MARK = re.compile(r"ASSUMED:\s*(.+?)(?:\.\s|\.$|\)\s*$|$)", re.S)


def assumptions() -> list[tuple[str, str]]:
    """(module, assumption) for each ``ASSUMED:`` in the package, in file order."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "assumptions.py" or "live" in path.relative_to(PACKAGE).parts:
            continue
        module = "rehearsal." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        text = path.read_text()
        for match in re.finditer(r"ASSUMED:(?!`)", text):
            tail = text[match.end() :]
            sentence = re.split(r"\.\s|\.\n|\n\n|\"\"\"", tail, maxsplit=1)[0]
            words = " ".join(line.strip().lstrip("#").strip() for line in sentence.splitlines())
            if words.startswith("<"):
                continue  # the convention's own description
            found.append((module.removesuffix(".__init__"), words.strip() + "."))
    return found

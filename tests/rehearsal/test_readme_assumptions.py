"""The README lists every rehearsal rule no source settles ("unsourced ones marked
ASSUMED and listed in the README")."""

from __future__ import annotations

import re
from pathlib import Path

from rehearsal.assumptions import assumptions

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_lists_every_assumption_of_the_rehearsal():
    block = re.search(
        r"<!-- rehearsal-assumptions -->\n(.*?)<!-- /rehearsal-assumptions -->",
        README.read_text(),
        re.S,
    )
    assert block, "README has no rehearsal-assumptions block"
    listed = [line for line in block.group(1).splitlines() if line.startswith("- ")]
    expected = [f"- `{module}`: {text}" for module, text in assumptions()]
    assert listed == expected
    assert len(expected) > 10  # the scan found them

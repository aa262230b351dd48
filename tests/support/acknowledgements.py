"""Every acknowledgement an app records, and the findings it would have without them.

``recorded_acknowledgements()`` stands in for ``Validations.of(x)`` while an app is built:
each ``acknowledge`` call is recorded (construct path, id, reason) instead of written to
the construct's metadata, so the app's packs report every finding, acknowledged or not.
``stale(...)`` then lists the acknowledgements that match no finding at or under their
construct: they would silently cover a later finding.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Validations

from cdk_llm_serving._cdk.nag import STATEMENT_PLUGIN


@dataclass(frozen=True)
class Recorded:
    path: str
    id: str
    reason: str


class _Recorder:
    def __init__(self, real: Any, scope: Any, into: list[Recorded]) -> None:
        self._real, self._scope, self._into = real, scope, into

    def acknowledge(self, *rules: Any) -> None:
        path = self._scope.node.path
        self._into.extend(Recorded(path, rule.id, rule.reason) for rule in rules)

    def __getattr__(self, name: str) -> Any:  # add_plugins, add_warning, add_error
        return getattr(self._real(self._scope), name)


@contextmanager
def recorded_acknowledgements() -> Iterator[list[Recorded]]:
    recorded: list[Recorded] = []
    real = Validations.of
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            Validations, "of", staticmethod(lambda scope: _Recorder(real, scope, recorded))
        )
        yield recorded


def findings(outdir: Path) -> dict[str, set[str]]:
    """Acknowledgement id -> construct paths of the validation report's violations."""
    report = json.loads((outdir / "validation-report.json").read_text())
    found: dict[str, set[str]] = {}
    for plugin in report["pluginReports"]:
        namespace = plugin["pluginName"].replace(" ", "-")
        for violation in plugin.get("violations", []):
            rule = violation["ruleName"]
            # cdk-nag matches its own ids (``AwsSolutions-IAM5[...]``, no namespace); aws-cdk-lib
            # matches other plugins' as ``<plugin>::<rule>``.
            if namespace == STATEMENT_PLUGIN:
                rule = f"{namespace}::{rule}"
            for construct in violation.get("violatingConstructs", []):
                found.setdefault(rule, set()).add(construct["constructPath"])
    return found


def stale(recorded: list[Recorded], found: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The (path, id) acknowledgements no finding at or under their construct matches."""

    def matched(entry: Recorded) -> bool:
        paths = found.get(entry.id, set())
        return any(p == entry.path or p.startswith(f"{entry.path}/") for p in paths)

    return sorted({(e.path, e.id) for e in recorded if not matched(e)})

"""The reference app synthesized in a process of its own, with aws-cdk-lib's built-in
CloudFormation validation on: the validation finds nothing, and the templates are those of the
suite's synthesis byte for byte.

The suite's own synths run without the validation (``tests/support/app.py``); here its report
must hold no finding of any severity: stronger than a synth that passes, since
``@aws-cdk/core:validateAgainstDefaultRules`` fails synth on errors only and leaves warnings in
the report. The other process (another hash seed, the validation on) also makes the
determinism check stronger than a second synthesis in the same process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdk_llm_serving._cdk.nag import STATEMENT_PLUGIN
from tests.support.builtin_validation import (
    BROKEN_RETENTION,
    PLUGIN,
    findings,
    plugin_reports,
    synthesize,
)


@pytest.fixture(scope="module")
def validated_synth(tmp_path_factory) -> Path:
    """The reference app (and one broken app) synthesized with the validation on, once."""
    outdir = tmp_path_factory.mktemp("validated")
    synthesize(outdir)
    return outdir


def test_the_reference_app_has_no_builtin_validation_finding(validated_synth):
    assert findings(validated_synth / "reference") == []


def test_the_reference_app_keeps_its_other_report_entries(validated_synth):
    """Only our own entries (construct annotations' warnings, the acknowledged wildcard
    statements) are in the report, nothing else failed."""
    reports = plugin_reports(validated_synth / "reference")
    assert {r["pluginName"] for r in reports} <= {"Construct Annotations", STATEMENT_PLUGIN}
    assert all(r["conclusion"] == "success" for r in reports)


def test_the_check_can_fail(validated_synth):
    """The engine ran in that process and its findings are read: a queue CloudFormation refuses."""
    [finding] = findings(validated_synth / "broken")
    assert finding.startswith("F3034 (warning) Broken/Queue: ")
    assert f"MessageRetentionPeriod: {BROKEN_RETENTION} is less than the minimum" in finding
    assert PLUGIN in {r["pluginName"] for r in plugin_reports(validated_synth / "broken")}


def test_reference_app_synthesizes_identically_in_another_process(
    reference_templates, validated_synth
):
    again = {
        path.name.removesuffix(".template.json"): json.loads(path.read_text())
        for path in (validated_synth / "reference").glob("*.template.json")
    }
    assert set(again) == set(reference_templates)
    for name, template in reference_templates.items():
        assert json.dumps(template, sort_keys=True) == json.dumps(again[name], sort_keys=True), name

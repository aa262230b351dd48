"""aws-cdk-lib's built-in CloudFormation validation finds nothing in the reference app.

The suite's own synths run without it (``tests/support/app.py``); here the reference app is
synthesized once with it on, in a process of its own, and its report must hold no finding of
any severity: stronger than a synth that passes, since ``@aws-cdk/core:validateAgainstDefaultRules``
fails synth on errors only and leaves warnings in the report.
"""

from __future__ import annotations

from tests.support.builtin_validation import BROKEN_RETENTION, PLUGIN, findings, plugin_reports


def test_the_reference_app_has_no_builtin_validation_finding(validated_synth):
    assert findings(validated_synth / "reference") == []


def test_the_reference_app_keeps_its_other_report_entries(validated_synth):
    """Only our own warnings (construct annotations) are in the report, nothing else failed."""
    reports = plugin_reports(validated_synth / "reference")
    assert {r["pluginName"] for r in reports} <= {"Construct Annotations"}
    assert all(r["conclusion"] == "success" for r in reports)


def test_the_check_can_fail(validated_synth):
    """The engine ran in that process and its findings are read: a queue CloudFormation refuses."""
    [finding] = findings(validated_synth / "broken")
    assert finding.startswith("F3034 (warning) Broken/Queue: ")
    assert f"MessageRetentionPeriod: {BROKEN_RETENTION} is less than the minimum" in finding
    assert PLUGIN in {r["pluginName"] for r in plugin_reports(validated_synth / "broken")}

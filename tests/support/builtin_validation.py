"""aws-cdk-lib's built-in CloudFormation validation, run once with it on, in a process of its own.

The suite's process turns the validation off (``tests/support/app.py``), so ``synthesize`` runs
``tests/support/validated_apps.py OUTDIR`` with ``CDK_VALIDATION=true``, which synthesizes in one
process (one start of the validation engine) two apps:

- ``OUTDIR/reference``: the reference app as the suite builds it (``new_app``), its cdk-nag packs
  included;
- ``OUTDIR/broken``: one queue whose retention is below CloudFormation's minimum, under
  ``@aws-cdk/core:validateAgainstDefaultRules=false`` so that the finding lands in the report as
  a warning instead of failing synth: it proves the engine ran and that ``findings`` reads it.

aws-cdk-lib writes every plugin with a finding (or a failure) to ``validation-report.json`` in
the cloud assembly (``core/lib/private/synthesis-validation.js``, ``VALIDATION_REPORT_FILE``;
plugins without findings are left out); the built-in plugin is named "CloudFormation Validate"
(``core/lib/validation/cloudformation-validate-plugin.js``, ``PLUGIN_NAME``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.doc_snippets import ROOT, environment

PLUGIN = "CloudFormation Validate"
REPORT = "validation-report.json"
#: A retention period below SQS's minimum of 60 seconds (AWS::SQS::Queue resource schema).
BROKEN_RETENTION = 10


def synthesize(outdir: Path) -> None:
    """Run this module in a fresh process with the validation on; fail with its output."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.validated_apps", str(outdir)],
        cwd=ROOT,
        env={**environment(), "PYTHONPATH": str(ROOT), "CDK_VALIDATION": "true"},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def plugin_reports(assembly_dir: Path) -> list[dict[str, Any]]:
    """The report's plugin entries: those that found something or failed."""
    report = assembly_dir / REPORT
    if not report.is_file():
        return []
    reports: list[dict[str, Any]] = json.loads(report.read_text())["pluginReports"]
    return reports


def findings(assembly_dir: Path) -> list[str]:
    """Every finding (any severity) and failure of the built-in validation, one line each."""
    found = []
    for report in plugin_reports(assembly_dir):
        if report["pluginName"] != PLUGIN:
            continue
        if report.get("conclusion") != "success" and not report["violations"]:
            found.append(f"plugin failed: {report.get('metadata')}")
        for violation in report["violations"]:
            for construct in violation.get("violatingConstructs") or [{}]:
                found.append(
                    f"{violation['ruleName']} ({violation['severity']}) "
                    f"{construct.get('constructPath')}: {violation['description']}"
                )
    return found

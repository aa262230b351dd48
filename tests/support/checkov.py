"""Run the pinned checkov (its own virtualenv, ``.venv/checkov``) on templates and Kubernetes objects.

checkov pins ``boto3`` to a release older than the project's (checkov 3.3.30 needs
boto3==1.35.49; botocore's service model here is 1.44.8), so it cannot share ``.venv``:
``make install`` gives it a virtualenv of its own from ``requirements-checkov.txt``, and the
suite runs it once per session as a process over a directory of every file to check.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.app import ROOT
from tests.support.template_helpers import manifest_objects

CHECKOV = ROOT / ".venv" / "checkov" / "bin" / "checkov"
SUPPRESSIONS = ROOT / "tests" / "security" / "checkov_suppressions.yaml"


def kubernetes_objects(template: dict) -> list[dict]:
    """Every object the template applies with kubectl; a LeaderWorkerSet's pod templates as Pods.

    Deploy-time values inside a manifest (an ARN, the VPC's CIDR) become placeholder text.
    """
    return [obj for found in manifest_objects(template, "") for obj in _as_checked(found)]


def _as_checked(obj: dict) -> list[dict]:
    if obj.get("kind") != "LeaderWorkerSet":
        return [obj]
    lws = obj["spec"]["leaderWorkerTemplate"]
    name = obj["metadata"]["name"]
    pods = [obj]
    for role, key in (("leader", "leaderTemplate"), ("worker", "workerTemplate")):
        if key in lws:
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        **lws[key].get("metadata", {}),
                        "name": f"{name}-{role}",
                        "namespace": obj["metadata"].get("namespace", "default"),
                    },
                    "spec": lws[key]["spec"],
                }
            )
    return pods


def write_inputs(directory: Path, templates: dict[str, dict]) -> None:
    """Each template as ``<stack>.template.json``, its Kubernetes objects as ``<stack>.k8s.yaml``."""
    for name, template in templates.items():
        (directory / f"{name}.template.json").write_text(json.dumps(template, indent=1))
        objects = kubernetes_objects(template)
        if objects:
            (directory / f"{name}.k8s.yaml").write_text(yaml.safe_dump_all(objects))


def run_checkov(directory: Path) -> list[dict[str, Any]]:
    """checkov's reports over ``directory``, one per framework (CloudFormation, Kubernetes)."""
    result = subprocess.run(
        [
            str(CHECKOV),
            "--directory",
            str(directory),
            "--framework",
            "cloudformation",
            "kubernetes",
            "--output",
            "json",
            "--compact",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode not in (0, 1):  # 1: some check failed
        raise RuntimeError(f"checkov failed ({result.returncode}): {result.stderr[-2000:]}")
    reports = json.loads(result.stdout)
    return reports if isinstance(reports, list) else [reports]


def failed_checks(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [failed for report in reports for failed in report["results"]["failed_checks"]]


def checked_resources(reports: list[dict[str, Any]]) -> set[str]:
    """Every resource checkov ran a check on (passed or failed)."""
    return {
        check["resource"]
        for report in reports
        for outcome in ("passed_checks", "failed_checks")
        for check in report["results"][outcome]
    }


def load_suppressions() -> list[dict[str, Any]]:
    """The accepted findings: ``check``, ``resources`` (regexes on checkov's name), ``reason``."""
    return list(yaml.safe_load(SUPPRESSIONS.read_text()))


def unsuppressed(findings: list[dict[str, Any]], suppressions: list[dict[str, Any]]) -> list[str]:
    """``check resource`` of every finding that no suppression names."""
    left = []
    for finding in findings:
        if not any(
            entry["check"] == finding["check_id"]
            and any(re.fullmatch(pattern, finding["resource"]) for pattern in entry["resources"])
            for entry in suppressions
        ):
            left.append(f"{finding['check_id']} {finding['resource']} ({finding['check_name']})")
    return sorted(left)

"""checkov on every synthesized reference template and the Kubernetes objects it applies."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.checkov import (
    CHECKOV,
    checked_resources,
    failed_checks,
    kubernetes_objects,
    load_suppressions,
    run_checkov,
    unsuppressed,
    write_inputs,
)


@pytest.fixture(scope="module")
def checkov_reports(reference_templates, tmp_path_factory) -> list[dict[str, Any]]:
    """One checkov run (both frameworks) over every reference template: ~20 s."""
    assert CHECKOV.exists(), f"{CHECKOV} is missing: run `make install`"
    directory = tmp_path_factory.mktemp("checkov")
    write_inputs(directory, reference_templates)
    return run_checkov(directory)


def test_every_checkov_finding_is_fixed_or_suppressed_with_a_reason(checkov_reports):
    assert unsuppressed(failed_checks(checkov_reports), load_suppressions()) == []


def test_the_leader_worker_set_pod_templates_are_checked_as_pods(
    reference_templates, checkov_reports
):
    pods = [
        obj
        for template in reference_templates.values()
        for obj in kubernetes_objects(template)
        if obj["kind"] == "Pod"
    ]
    names = {f"Pod.{pod['metadata']['namespace']}.{pod['metadata']['name']}" for pod in pods}
    assert {n.rsplit("-", 1)[-1] for n in names} == {"leader", "worker"}
    assert names <= checked_resources(checkov_reports)


def test_checkov_checked_every_template_and_manifest(reference_templates, checkov_reports):
    files = {
        check["file_path"].rsplit("/", 1)[-1]
        for report in checkov_reports
        for outcome in ("passed_checks", "failed_checks")
        for check in report["results"][outcome]
    }
    expected = {f"{name}.template.json" for name in reference_templates}
    expected |= {
        f"{name}.k8s.yaml" for name, t in reference_templates.items() if kubernetes_objects(t)
    }
    assert expected == files


def test_every_suppression_still_matches_a_finding(checkov_reports):
    """Fixed findings leave the list: it stays short and honest."""
    findings = failed_checks(checkov_reports)
    stale = [entry["check"] for entry in load_suppressions() if not _matches(entry, findings)]
    assert stale == []


def _matches(entry: dict[str, Any], findings: list[dict[str, Any]]) -> bool:
    """``entry`` suppresses at least one of ``findings``."""
    return any(not unsuppressed([finding], [entry]) for finding in findings)


def test_each_suppression_names_resources_and_a_reason():
    for entry in load_suppressions():
        assert entry["check"].startswith(("CKV_", "CKV2_")), entry
        assert entry["resources"] and all(p not in (".*", ".+") for p in entry["resources"])
        assert len(str(entry["reason"])) > 10, entry

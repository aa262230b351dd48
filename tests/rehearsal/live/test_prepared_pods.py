"""The reference's pods as the live run would start them, and what its cache keys on
(no vLLM needed: the command lines, environments and content keys only)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rehearsal.live import run_report
from rehearsal.live.runner import DEFAULT_VENV, content_key, prepare
from rehearsal.pods import ContainerRun, LiveDeployment, PodRun, ServiceAddress

from .reference_pods import reference_deployment

#: Reads the synthesized reference pods from cdk.out: run with the live tests (make rehearse-live
#: synthesizes first), so CI never skips it.
needs_synth = pytest.mark.live


@needs_synth
def test_the_synthesized_pods_start_as_written_apart_from_the_table(tmp_path: Path) -> None:
    prepared, refused = prepare(reference_deployment(tmp_path), DEFAULT_VENV, "")
    assert refused == []
    leader, worker = prepared
    # The leader's start script: Kubernetes reduced its $$ to $, and it execs vllm "$@".
    assert leader.argv[:2] == ("/bin/sh", "-c")
    assert 'u="$(umask)"' in leader.argv[2] and "$$" not in leader.argv[2]
    assert leader.argv[3:5] == ("vllm", "serve")
    for p in (leader, worker):
        at = p.argv.index("--data-parallel-address")
        assert p.argv[at + 1] == "reference-moe-nvfp4-0.reference-moe-nvfp4.inference"
        assert p.argv[p.argv.index("--tensor-parallel-size") + 1] == "1"
        assert "--quantization" not in p.argv and "--enable-expert-parallel" not in p.argv
        assert p.env["FI_PROVIDER"] == "efa"  # kept: no effect on the CPU build
        assert p.env["VLLM_TARGET_DEVICE"] == "cpu"
        assert p.env["PATH"].startswith(f"{DEFAULT_VENV}/bin:")
    assert worker.argv[worker.argv.index("--data-parallel-start-rank") + 1] == "1"
    assert worker.argv[-1] == "--headless"
    assert "--ssl-certfile" in leader.argv and "--enable-ssl-refresh" in leader.argv


def _deployment(*args: str) -> LiveDeployment:
    container = ContainerRun(
        "vllm", "image", ("vllm",), ("serve", "/models/m", *args), (("A", "1"),)
    )
    pod = PodRun("lws-0", "inference", "lws-0", "lws", "10.1.0.10", "node", "leader", container)
    service = ServiceAddress("inference/lws", 443, 8000, ("10.1.0.10",), True, b"ca", ("lws",))
    return LiveDeployment((pod,), {"lws-0.lws.inference": "10.1.0.10"}, service, ("k",), "m")


def _key(deployment: LiveDeployment) -> str:
    prepared, _ = prepare(deployment, DEFAULT_VENV, "")
    return content_key(deployment, prepared)


def test_deployments_equal_after_substitution_share_a_run() -> None:
    p6 = _deployment("--tensor-parallel-size", "8", "--gpu-memory-utilization", "0.9")
    p5en = _deployment("--tensor-parallel-size", "4", "--gpu-memory-utilization", "0.85")
    assert _key(p6) == _key(p5en)


def test_anything_else_that_differs_is_run_again() -> None:
    base = _deployment("--tensor-parallel-size", "8")
    assert _key(base) != _key(_deployment("--tensor-parallel-size", "8", "--enforce-eager"))
    assert _key(base) != _key(dataclasses.replace(base, dns={}))
    assert _key(base) != _key(dataclasses.replace(base, api_keys=("other",)))


def test_a_flag_the_table_does_not_know_is_a_blocking_finding_on_the_pod(tmp_path: Path) -> None:
    deployment = _deployment("--quantization", "fp8")
    findings = run_report(deployment, tmp_path, vllm_venv=tmp_path / "absent").findings
    assert [(f.rule, f.resource, f.severity) for f in findings] == [
        ("live.substitution-refused", "Pod inference/lws-0", "blocking")
    ]
    assert "--quantization 'fp8'" in findings[0].message

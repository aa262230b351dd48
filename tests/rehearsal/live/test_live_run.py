"""The live run on the reference's own pods: real vLLM, a leader and a headless worker in
network namespaces, requests through the Service (needs root and .venv/vllm: ``-m live``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rehearsal.live import run_report

from .reference_pods import ROOT, reference_deployment

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("live")


def test_the_reference_pods_serve_after_substitution(workdir: Path) -> None:
    deployment = reference_deployment(workdir / "reference")
    started = time.perf_counter()
    report = run_report(deployment, workdir)
    print(f"live run: {time.perf_counter() - started:.0f} s, timings {report.timings}")
    print("\n".join(report.substitutions))
    assert report.findings == []
    assert not report.cached
    names = ", ".join(deployment.service.dns_names)
    assert report.passed == [
        *(f"tls {name}" for name in names.split(", ")),
        "no key 401",
        "wrong key 401",
        "api key 1 of 2 200 on /v1/models naming reference-moe-nvfp4",
        "api key 2 of 2 200 on /v1/models naming reference-moe-nvfp4",
        "chat completion",
        "reasoning parser on (message carries reasoning)",
        "streaming chat (SSE, data: [DONE])",
        "tools with tool_choice auto accepted",
        "POST /invocations 404 (closed by the route guard)",
        "POST /pause 404 (closed by the route guard)",
        "POST /abort_requests 404 (closed by the route guard)",
        "GET /docs 404 (closed by the route guard)",
        "GET /openapi.json 404 (closed by the route guard)",
        "GET /ping 404 (closed by the route guard)",
        "GET /health 200",
        "GET /metrics 200",
        "cdk-llm-serving smoke",
    ]
    flags = {line.split(": ", 1)[1].split(" ")[0] for line in report.substitutions}
    assert flags == {
        "--tensor-parallel-size",
        "--enable-expert-parallel",
        "--quantization",
        "--speculative-config",
        "--max-model-len",
        "--gpu-memory-utilization",
        "--kv-offloading-size",
    }
    again = run_report(deployment, workdir)
    assert again.cached and again.findings == [] and again.passed == report.passed


def test_a_leader_without_a_dns_record_blocks_naming_a_pod(workdir: Path) -> None:
    deployment = reference_deployment(workdir / "no-record", leader_record=False)
    findings = run_report(deployment, workdir, ready_budget=300).findings
    assert findings, "the group served without the leader's DNS record"
    first = findings[0]
    assert first.severity == "blocking"
    assert first.rule in {"live.pod-exited", "live.pod-not-ready"}
    assert first.resource in {
        "Pod inference/reference-moe-nvfp4-0",
        "Pod inference/reference-moe-nvfp4-0-1",
    }
    print(first)


def test_a_missing_api_key_file_blocks_naming_the_leader(workdir: Path) -> None:
    deployment = reference_deployment(workdir / "no-key", api_key_file=None)
    findings = run_report(deployment, workdir, ready_budget=300).findings
    assert [f.rule for f in findings] == ["live.pod-exited"]
    assert findings[0].resource == "Pod inference/reference-moe-nvfp4-0"
    assert (
        "API key file /var/run/secrets/vllm-api-key/api-key is missing or empty"
        in findings[0].message
    )


def _leftovers(prefix: str, root: Path) -> list[str]:
    """Namespaces, /etc/netns entries, mount points and processes a run left behind."""
    found = (
        [f"netns {n}" for n in os.listdir("/run/netns") if n.startswith(prefix)]
        if Path("/run/netns").exists()
        else []
    )
    if Path("/etc/netns").exists():
        found += [f"/etc/netns/{n}" for n in os.listdir("/etc/netns") if n.startswith(prefix)]
    found += [path for path in ("/models", "/run/secrets") if Path(path).exists()]
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(root) in command:
            found.append(f"process {proc.name}: {command[:120]}")
    return found


def test_an_interrupted_run_leaves_nothing_behind(workdir: Path) -> None:
    """SIGINT (Ctrl-C) while the pods start: every process, namespace and mount point goes."""
    root = workdir / "interrupted"
    script = (
        "import sys; from pathlib import Path\n"
        "from rehearsal.live import run_report\n"
        "from tests.rehearsal.live.reference_pods import reference_deployment\n"
        f"d = reference_deployment(Path({str(root)!r}) / 'input')\n"
        f"print(run_report(d, Path({str(root)!r})).key, flush=True)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(
        root.glob("runs/*/reference-moe-nvfp4-0-1/container.log")
    ):
        time.sleep(1)
    time.sleep(15)  # vLLM importing, the leader's script run: mid-start
    assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert "KeyboardInterrupt" in err
    assert _leftovers("rl", root) == []

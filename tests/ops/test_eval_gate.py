"""The eval gate's Lambda: its handler against local scripted copies, and its code asset run as
Lambda runs it (the asset's modules and jsonschema, botocore from the runtime, nothing else)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from cdk_llm_serving.evals.tasks import example_path
from cdk_llm_serving.ops.evals.gate_handler import handler
from tests.support.eval_stub_server import GOOD, WORSE, stub_copy

TASKS = yaml.safe_load(example_path().read_text())


def event(*copies) -> dict:
    return {
        "tasks": TASKS,
        "auth": "none",
        "copies": [
            {"base_url": c.base_url, "model": "shared", "expect_copy": c.model_name} for c in copies
        ],
    }


def test_the_gate_passes_copies_as_good_as_the_reference():
    with stub_copy(GOOD, "bf16") as reference, stub_copy(GOOD, "int4") as candidate:
        result = handler(event(reference, candidate))
    assert result["gate"] == "PASS", result
    assert result["copies"][1]["deltas"]["tool-calls"] == 0


def test_the_gate_fails_a_copy_that_answers_worse():
    with stub_copy(GOOD, "bf16") as reference, stub_copy(WORSE, "int4") as candidate:
        result = handler(event(reference, candidate))
    assert result["gate"] == "FAIL"
    assert result["failures"] == [
        "int4: tool-calls: -33.3 points against the reference (allowed -2)"
    ]


def test_a_copy_answering_under_another_name_fails_the_gate():
    with stub_copy(GOOD, "bf16") as reference, stub_copy(GOOD, "bf16") as candidate:
        data = event(reference, candidate)
        data["copies"][1]["expect_copy"] = "int4"
        result = handler(data)
    assert result["gate"] == "FAIL" and "answers came from bf16 (9)" in result["failures"][0]


def test_an_unreachable_copy_fails_the_gate():
    with stub_copy(GOOD, "bf16") as reference:
        data = event(reference)
    data["copies"].append({"base_url": "http://127.0.0.1:9/v1", "model": "m", "expect_copy": "x"})
    data["copies"][0]["base_url"] = data["copies"][1]["base_url"]
    result = handler(data)
    assert result["gate"] == "FAIL" and all("cannot reach" in f for f in result["failures"])


def test_a_malformed_event_is_an_error_verdict():
    result = handler({"tasks": {"version": 1, "tasks": []}, "copies": []})
    assert result["gate"] == "ERROR" and result["failures"][0].startswith("tasks")


def _runtime_path(tmp_path: Path) -> Path:
    """botocore and its imports, as the Lambda runtime provides them (and nothing else)."""
    import importlib.util

    runtime = tmp_path / "runtime"
    runtime.mkdir()
    for name in ("botocore", "dateutil", "jmespath", "urllib3", "six"):
        origin = Path(importlib.util.find_spec(name).origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        (runtime / source.name).symlink_to(source)
    return runtime


def test_the_asset_runs_the_gate_with_only_what_lambda_provides(tmp_path):
    from cdk_llm_serving.sagemaker.staging_endpoints import _gate_code

    asset = _gate_code()
    assert not (asset / "yaml").exists() and (asset / "jsonschema").is_dir()
    with stub_copy(GOOD, "bf16") as reference, stub_copy(WORSE, "int4") as candidate:
        script = (
            "import json, sys\n"
            f"sys.path[:0] = [{str(asset)!r}, {str(_runtime_path(tmp_path))!r}]\n"
            "from cdk_llm_serving.ops.evals.gate_handler import handler\n"
            "import cdk_llm_serving.ops.evals.gate_handler as h\n"
            "assert h.__file__.startswith(sys.path[0]), h.__file__\n"
            "print(json.dumps(handler(json.loads(sys.stdin.read()))))\n"
        )
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", script],
            input=json.dumps(event(reference, candidate)),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gate"] == "FAIL"

"""The deploy-time integration tests (``integ_*.py``), in snapshot mode: no AWS account.

Each integration app is synthesized the way ``integ-runner`` synthesizes it (a fresh
``python3 integ_x.py`` whose context is integ-runner's own recommended feature flags, read
from its package) and every template of its assembly, the test stack and the assertion
stack, must match its committed snapshot. ``integ-runner`` cannot do this itself yet: see
``test_integ_runner_reads_our_assemblies``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cdk_llm_serving.testing.snapshots import TemplateSnapshotExtension
from tests.support.doc_snippets import NO_VALIDATION, ROOT, environment

INTEG_DIR = Path(__file__).parent
INTEG_TESTS = sorted(path.stem for path in INTEG_DIR.glob("integ_*.py"))
INTEG_RUNNER = ROOT / "node_modules" / "@aws-cdk" / "integ-runner"
#: What integ-runner puts into every integration app's context (its runner-base.js).
RUNNER_FLAGS = INTEG_RUNNER / "lib" / "recommended-feature-flags.json"
#: integ-runner leaves target partitions unset (runner-base.js ``getContext``).
TARGET_PARTITIONS = "@aws-cdk/core:target-partitions"


def _synthesize(name: str, outdir: Path) -> dict[str, dict]:
    context = json.loads(RUNNER_FLAGS.read_text())
    context.pop(TARGET_PARTITIONS, None)
    env = {
        **{k: v for k, v in environment().items() if not k.startswith("CDK_LLM_SERVING_INTEG")},
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps(context),
    }
    subprocess.run(
        [sys.executable, str(INTEG_DIR / f"{name}.py")],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    return {
        path.name.removesuffix(".template.json"): _without_salt(json.loads(path.read_text()))
        for path in sorted(outdir.glob("*.template.json"))
    }


def _without_salt(template: dict) -> dict:
    """Assertion resources carry ``salt`` = the synthesis time, so that they run on every
    deployment (integ-tests-alpha ``AwsApiCall``); a snapshot holds a marker instead."""
    for resource in template.get("Resources", {}).values():
        if (
            resource["Type"].startswith("Custom::DeployAssert@")
            and "salt" in resource["Properties"]
        ):
            resource["Properties"]["salt"] = "<synthesis time>"
    return template


@pytest.fixture(scope="module")
def integ_templates(tmp_path_factory) -> dict[str, dict[str, dict]]:
    base = tmp_path_factory.mktemp("integ")
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = pool.map(lambda name: _synthesize(name, base / name), INTEG_TESTS)
        return dict(zip(INTEG_TESTS, found, strict=True))


@pytest.mark.parametrize("integ", INTEG_TESTS)
def test_integ_test_matches_its_snapshot(integ, integ_templates, snapshot):
    templates = integ_templates[integ]
    assert len(templates) == 2, sorted(templates)  # the test stack and its assertion stack
    for stack, template in templates.items():
        name = f"{integ}-{re.sub(r'[0-9A-F]{8}$', '', stack)}"
        assert template == snapshot(name=name, extension_class=TemplateSnapshotExtension)


def _resources(templates: dict[str, dict], resource_type: str) -> list[dict]:
    return [
        resource
        for template in templates.values()
        for resource in template["Resources"].values()
        if resource["Type"] == resource_type
    ]


def test_one_integ_test_per_serving_path_each_asserting_a_chat_completion(integ_templates):
    assert INTEG_TESTS == [
        "integ_hyperpod_multi_node",
        "integ_sagemaker_eval_gate",
        "integ_sagemaker_pool_endpoint",
    ]
    sagemaker = integ_templates["integ_sagemaker_pool_endpoint"]
    assert len(_resources(sagemaker, "AWS::SageMaker::Endpoint")) == 1
    [call] = _resources(sagemaker, "Custom::DeployAssert@SdkCallSageMakerRuntimeinvokeEndpoint")
    assert call["Properties"]["outputPaths"] == ["Body.choices.0.message.role"]
    assert "messages" in json.loads(call["Properties"]["parameters"]["Body"])
    hyperpod = integ_templates["integ_hyperpod_multi_node"]
    assert _resources(hyperpod, "AWS::SageMaker::Cluster")
    [invoke] = _resources(hyperpod, "Custom::DeployAssert@SdkCallLambdainvoke")
    assert invoke["Properties"]["outputPaths"] == ["Payload.choices.0.message.role"]
    [client] = [
        f
        for f in _resources(hyperpod, "AWS::Lambda::Function")
        if f["Properties"].get("FunctionName") == "cdk-llm-serving-integ-chat-client"
    ]
    assert "VpcConfig" in client["Properties"]  # inside the VPC, where the internal NLB is


def test_the_eval_gate_integ_fails_unless_every_copy_passes(integ_templates):
    gate = integ_templates["integ_sagemaker_eval_gate"]
    # The pool endpoint and one staging endpoint per copy.
    assert len(_resources(gate, "AWS::SageMaker::Endpoint")) == 3
    [function] = [
        f
        for f in _resources(gate, "AWS::Lambda::Function")
        if f["Properties"].get("Handler") == "cdk_llm_serving.ops.evals.gate_handler.handler"
    ]
    [invoke] = _resources(gate, "Custom::DeployAssert@SdkCallLambdainvoke")
    assert invoke["Properties"]["outputPaths"] == ["Payload.gate"]
    assert json.loads(invoke["Properties"]["expected"]) == {"$StringLike": "^PASS$"}
    assert (
        json.loads(invoke["Properties"]["parameters"]["FunctionName"])
        == (function["Properties"]["FunctionName"])
    )
    payload = json.dumps(invoke["Properties"]["parameters"]["Payload"])
    assert "qwen3-0-6b-bf16" in payload and "qwen3-0-6b-fp8" in payload


def test_integ_runner_reads_our_assemblies(tmp_path):
    """The pinned integ-runner takes a snapshot of one integration test (``--dry-run``: no
    deployment). integ-runner 2.197.10, the newest release, reads cloud assembly schema 53;
    aws-cdk-lib 2.275 writes 55, so until a release catches up this is an expected failure
    and the snapshots above are compared by this suite instead."""
    work = tmp_path / "integ"
    work.mkdir()
    shutil.copy(INTEG_DIR / "integ_sagemaker_pool_endpoint.py", work)
    done = subprocess.run(
        [str(ROOT / "node_modules" / ".bin" / "integ-runner"), "--directory", str(work),
         "--language", "python", "--update-on-failed", "--dry-run", "--parallel-regions", "us-east-1"],
        cwd=ROOT,
        # The app's template is the one integ_templates synthesized and validated under the
        # same runner flags: aws-cdk-lib's built-in validation would only repeat that.
        env={**environment(), "PYTHONPATH": str(ROOT), **NO_VALIDATION},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )  # fmt: skip
    output = done.stdout + done.stderr
    if done.returncode != 0 and "Cloud assembly schema version mismatch" in output:
        pytest.xfail("integ-runner reads an older cloud assembly schema than aws-cdk-lib writes")
    assert done.returncode == 0, output
    assert (work / "integ_sagemaker_pool_endpoint.py.snapshot" / "integ.json").is_file()

"""Under ``cdk synth``, in an app that calls ``install_error_display()``, a ``ConfigurationError``
is the first and whole thing the user reads, not the last lines of a traceback through jsii. Each case runs a real app in a
subprocess (what the CDK CLI runs), and one runs the real CDK CLI (how it shows an app's
failure is the constraint)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: A pool property the construct refuses (a plain constructor error).
BAD_PROP = """
from aws_cdk import App, Stack
from cdk_llm_serving import ContainerImage, ModelData, ServingModel, install_error_display
install_error_display()
app = App()
stack = Stack(app, "S", env={"region": "us-west-2"})
ServingModel(stack, "Model", image=ContainerImage.from_dlc("vllm", "server-sagemaker-cuda-v1"),
             model_data=ModelData.from_s3_uri("s3://bucket/weights/"), served_model_name="a b")
app.synth()
"""
#: An error raised while the CDK resolves a token: it crosses jsii twice.
IN_A_TOKEN = """
import jsii
from aws_cdk import App, CfnResource, IStableAnyProducer, Lazy, Stack
from cdk_llm_serving import ConfigurationError, Problem, install_error_display

@jsii.implements(IStableAnyProducer)
class Late:
    def produce(self):
        raise ConfigurationError("Late 'S/R'", [Problem("a", 1, "must be 2"),
                                               Problem("b", "x" * 80, "must be short")])

install_error_display()
app = App()
stack = Stack(app, "S")
CfnResource(stack, "R", type="AWS::SNS::Topic", properties={"TopicName": Lazy.any(Late())})
app.synth()
"""
OTHER = """
import cdk_llm_serving
cdk_llm_serving.install_error_display()
raise RuntimeError("not ours")
"""


def run(tmp_path: Path, source: str, **env: str) -> subprocess.CompletedProcess[str]:
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(source))
    environment = {**os.environ, "CDK_OUTDIR": str(tmp_path / "out"), **env}
    environment.pop("CDK_LLM_SERVING_TRACEBACK", None) if not env else None
    return subprocess.run(
        [sys.executable, str(app)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=300,
    )


def _lines(stderr: str) -> list[str]:
    """Standard error without Node.js's own notices (jsii's Node.js version banner)."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("b'")]


def test_a_construct_error_is_the_first_line_and_whole(tmp_path):
    result = run(tmp_path, BAD_PROP)
    lines = _lines(result.stderr)
    assert result.returncode == 1
    assert lines[0].startswith("error: ServingModel 'S/Model': 1 problem"), result.stderr
    assert lines[1].startswith("  - served_model_name = 'a b': ")
    assert "Traceback" not in result.stderr and len(lines) == 3, result.stderr
    assert "raised at cdk_llm_serving/sagemaker/serving_model.py:" in lines[2]
    assert "app.py:7" in lines[2]  # the app's own line that led there


def test_an_error_raised_while_a_token_resolves_is_shown_whole(tmp_path):
    """jsii hands back only JavaScript's text of it ("Resolution error: ...", cut with "...")."""
    result = run(tmp_path, IN_A_TOKEN)
    lines = _lines(result.stderr)
    assert result.returncode == 1
    assert lines[:3] == [
        "error: Late 'S/R': 2 problems",
        "  - a = 1: must be 2",
        f"  - b = '{'x' * 80}': must be short",
    ], result.stderr
    assert "Traceback" not in result.stderr and "JavaScriptError" not in result.stderr


def test_the_traceback_on_request(tmp_path):
    result = run(tmp_path, BAD_PROP, CDK_LLM_SERVING_TRACEBACK="1")
    assert "Traceback (most recent call last)" in result.stderr
    assert "cdk_llm_serving.errors.ConfigurationError: ServingModel" in result.stderr


def test_importing_the_package_leaves_the_excepthook_alone():
    """No global side effect on import: the display is the app's choice, one call."""
    script = """
import sys
hook = sys.excepthook
import cdk_llm_serving
from cdk_llm_serving import InstancePoolEndpoint, error_display
assert sys.excepthook is hook, "import replaced sys.excepthook"
cdk_llm_serving.install_error_display()
cdk_llm_serving.install_error_display()  # idempotent: the earlier hook is kept once
assert sys.excepthook is not hook and error_display._previous_hook is hook
"""
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, timeout=300)


def test_without_the_call_python_s_traceback_stays(tmp_path):
    result = run(tmp_path, BAD_PROP.replace("install_error_display()\n", ""))
    assert "Traceback (most recent call last)" in result.stderr
    assert not result.stderr.startswith("error:")


def test_other_errors_keep_their_traceback(tmp_path):
    result = run(tmp_path, OTHER)
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.rstrip().endswith("RuntimeError: not ours")


@pytest.mark.skipif(
    not (ROOT / "node_modules" / ".bin" / "cdk").exists(), reason="needs the CDK CLI (npm ci)"
)
def test_under_the_cdk_cli_the_message_comes_first(tmp_path):
    """The CDK CLI prints the app's standard error, then "Subprocess exited with error 1"."""
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(BAD_PROP))
    result = subprocess.run(
        [
            str(ROOT / "node_modules" / ".bin" / "cdk"),
            "synth",
            "--quiet",
            "--no-notices",
            "--app",
            f"{sys.executable} {app}",
            "--output",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "CDK_DISABLE_VERSION_CHECK": "1"},
        timeout=300,
    )
    lines = [
        line for line in _lines(result.stdout + result.stderr) if not line.startswith("npm warn")
    ]
    assert result.returncode != 0
    assert lines[0].startswith("error: ServingModel 'S/Model': 1 problem"), lines
    assert "Traceback" not in result.stderr
    assert lines[-1].endswith("Subprocess exited with error 1"), lines

"""A vLLM flag set to ``False`` never disappears silently. Where vLLM has a
``--no-<flag>`` form (a boolean option whose default may be on, or vLLM's own choice, as prefix
caching's is) the ``False`` becomes that form on the command line and, through AWS's SageMaker
container, ``SM_VLLM_NO_<FLAG>=true``; a hand-written ``SM_VLLM_<FLAG>=false``, which AWS's
script drops, is refused. Checked through AWS's real ``sagemaker_args.py`` and vLLM's own parser
where they are present."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdk_llm_serving.vllm import VllmConfig
from cdk_llm_serving.vllm.registry import registry, sagemaker_environment_problems

ROOT = Path(__file__).resolve().parents[2]
ARGS_SCRIPT = ROOT.parent / "shared" / "aws-dlc-vllm" / "sagemaker_args.py"
VLLM_PYTHON = ROOT / ".venv" / "vllm" / "bin" / "python"
OFF = VllmConfig(model="m", extra_flags={"enable-prefix-caching": False})


def test_a_false_boolean_option_becomes_its_no_form():
    assert "--no-enable-prefix-caching" in OFF.to_args()
    assert "--enable-prefix-caching" not in OFF.to_args()
    assert OFF.to_sagemaker_environment()["SM_VLLM_NO_ENABLE_PREFIX_CACHING"] == "true"


def test_true_stays_the_bare_flag():
    on = VllmConfig(model="m", extra_flags={"enable-prefix-caching": True})
    assert "--enable-prefix-caching" in on.to_args()


def test_a_false_store_true_flag_is_left_out_as_its_default():
    """``--disable-log-stats`` has no ``--no-`` form: off unless given, so False is left out."""
    assert "disable-log-stats" in registry().flags
    assert "disable-log-stats" not in registry().negatable_flags
    config = VllmConfig(model="m", extra_flags={"disable-log-stats": False})
    assert config.to_args() == ["m"]


def test_the_negatable_flags_are_flags():
    assert registry().negatable_flags <= registry().flags
    assert "enable-prefix-caching" in registry().negatable_flags


def test_a_hand_written_false_that_aws_would_drop_is_refused():
    (problem,) = sagemaker_environment_problems({"SM_VLLM_ENABLE_PREFIX_CACHING": "false"})
    assert "SM_VLLM_NO_ENABLE_PREFIX_CACHING=true" in problem.allowed
    assert sagemaker_environment_problems({"SM_VLLM_NO_ENABLE_PREFIX_CACHING": "true"}) == []
    (bare,) = sagemaker_environment_problems({"SM_VLLM_NO_ENABLE_PREFIX_CACHING": "1"})
    assert "bare flag" in bare.allowed


@pytest.mark.skipif(not ARGS_SCRIPT.exists(), reason="needs ../shared/aws-dlc-vllm (AWS's scripts)")
def test_aws_container_passes_the_no_form_to_vllm(tmp_path):
    env = {"PATH": os.environ.get("PATH", ""), **OFF.to_sagemaker_environment()}
    done = subprocess.run(
        [sys.executable, str(ARGS_SCRIPT)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        check=True,
        timeout=60,
    )
    argv = [token for token in done.stdout.decode().split("\0") if token]
    assert "--no-enable-prefix-caching" in argv


@pytest.mark.skipif(not VLLM_PYTHON.exists(), reason="needs .venv/vllm (make vllm-venv)")
def test_vllms_parser_reads_the_no_form_as_off():
    program = (
        "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
        "from vllm.entrypoints.launchers.cli_args import make_arg_parser; "
        "a = make_arg_parser(FlexibleArgumentParser()).parse_args(sys.argv[1:]); "
        "print(a.enable_prefix_caching)"
    )
    done = subprocess.run(
        [str(VLLM_PYTHON), "-c", program, *OFF.to_args()[1:]],
        capture_output=True,
        text=True,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"

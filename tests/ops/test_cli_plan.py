"""`python -m cdk_llm_serving plan`: table, JSON, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cdk_llm_serving.ops.cli import main


@pytest.mark.parametrize("instance_type", ["ml.p6-b200.48xlarge", "ml.p5en.48xlarge"])
def test_plan_prints_a_table_for_the_reference_model(instance_type, capsys):
    code = main(
        [
            "plan",
            "--model",
            "reference-2.4t-a95b",
            "--quantization",
            "nvfp4",
            "--instance-type",
            instance_type,
            "--max-context",
            "131072",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "nodes          2 (16 GPUs per replica)" in out
    assert "parallelism    tensor 8, pipeline 2, data 1, expert on" in out
    assert ("warning" in out) is (instance_type == "ml.p5en.48xlarge")


def test_plan_json(capsys):
    assert (
        main(
            [
                "plan",
                "--model",
                "deepseek-v3",
                "--quantization",
                "fp8",
                "--instance-type",
                "ml.p5en.48xlarge",
                "--max-context",
                "65536",
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert (
        data["nodes"] == 1
        and data["tensor_parallel_size"] == 8
        and data["enable_expert_parallel"] is True
    )
    assert data["cold_start"]["path"] == "s3_download"
    assert data["cost"]["fleet_price_per_hour"] == 132.0


def test_plan_that_cannot_fit_exits_2_with_the_explanation(capsys):
    code = main(
        [
            "plan",
            "--model",
            "kimi-k2",
            "--quantization",
            "fp8",
            "--instance-type",
            "ml.p5en.48xlarge",
            "--max-nodes",
            "1",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert (
        err.startswith("error: kimi-k2 in fp8 does not fit one node of ml.p5en.48xlarge")
        and "Would fit:" in err
    )


def test_module_runs_without_loading_the_cdk():
    """The planner CLI must start fast: no jsii runtime, no aws_cdk import."""
    code = (
        "import sys, runpy; sys.argv=['x','plan','--model','gpt-oss-20b','--quantization','mxfp4','--instance-type','ml.g6.xlarge','--max-context','8192']\n"
        "try:\n    runpy.run_module('cdk_llm_serving', run_name='__main__')\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "assert 'aws_cdk' not in sys.modules and 'jsii' not in sys.modules, 'CDK loaded'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)

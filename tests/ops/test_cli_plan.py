"""`python -m cdk_llm_serving plan`: table, JSON, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cdk_llm_serving.ops.cli import main

#: kimi-k2 in FP8 on one p5en node: does not fit, so the plan is refused.
KIMI_ON_ONE_NODE = [
    "plan",
    "--model",
    "kimi-k2",
    "--weight-format",
    "fp8",
    "--instance-type",
    "ml.p5en.48xlarge",
    "--max-nodes",
    "1",
    "--objective",
    "min-gpus",
]
#: gpt-oss-20b in MXFP4 on one L4; add --max-context.
GPT_OSS_20B_ON_L4 = [
    "plan",
    "--model",
    "gpt-oss-20b",
    "--weight-format",
    "mxfp4",
    "--instance-type",
    "ml.g6.xlarge",
]


@pytest.mark.parametrize("instance_type", ["ml.p6-b200.48xlarge", "ml.p5en.48xlarge"])
def test_plan_prints_a_table_for_the_reference_model(instance_type, capsys):
    code = main(
        [
            "plan",
            "--model",
            "reference-2.4t-a95b",
            "--weight-format",
            "nvfp4",
            "--instance-type",
            instance_type,
            "--max-context",
            "131072",
            "--objective",
            "min-gpus",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    # Across nodes the MoE runs one data-parallel replica per node (was tensor 8 x pipeline 2).
    assert "nodes          2 (8 GPUs per replica x 2 data-parallel replicas)" in out
    assert "parallelism    tensor 8, pipeline 1, data 2, expert on" in out
    assert ("warning" in out) is (instance_type == "ml.p5en.48xlarge")


def test_plan_json(capsys):
    assert (
        main(
            [
                "plan",
                "--model",
                "deepseek-v3",
                "--weight-format",
                "fp8",
                "--instance-type",
                "ml.p5en.48xlarge",
                "--max-context",
                "65536",
                "--objective",
                "min-gpus",
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
    code = main(KIMI_ON_ONE_NODE)
    err = capsys.readouterr().err
    assert code == 2
    assert (
        err.startswith("error: kimi-k2 in fp8 does not fit one node of ml.p5en.48xlarge")
        and "Would fit:" in err
    )


def test_module_runs_without_loading_the_cdk():
    """The planner CLI must start fast: no jsii runtime, no aws_cdk import."""
    code = (
        "import sys, runpy; sys.argv=['x','plan','--model','gpt-oss-20b','--weight-format','mxfp4','--instance-type','ml.g6.xlarge','--max-context','8192']\n"
        "try:\n    runpy.run_module('cdk_llm_serving', run_name='__main__')\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "assert 'aws_cdk' not in sys.modules and 'jsii' not in sys.modules, 'CDK loaded'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_plan_a_model_from_a_published_config_json(capsys):
    """`plan --model-config` on DeepSeek-R1's real config.json (tests/data, source in its README)."""
    config = str(
        __import__("pathlib").Path(__file__).parents[1] / "data" / "deepseek-r1-config.json"
    )
    code = main(
        [
            "plan",
            "--model-config",
            config,
            "--weight-format",
            "fp8",
            "--instance-type",
            "ml.p5en.48xlarge",
            "--max-context",
            "65536",
            "--objective",
            "min-gpus",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["nodes"] == 1 and data["enable_expert_parallel"] is True
    assert data["decode"]["step"]["expert_gb"] > 0 and data["decode"]["curve"][0]["batch"] == 1
    assert [s["method"] for s in data["decode"]["speculative"]] == ["mtp", "eagle3", "ngram"]


def test_json_errors_are_an_object_with_problems_and_alternatives(capsys):
    code = main([*KIMI_ON_ONE_NODE, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert (
        code == 2 and data["problems"] and data["error"].startswith("kimi-k2 in fp8 does not fit")
    )
    first = data["alternatives"][0]
    assert first == {
        "instance_type": "ml.p5en.48xlarge",
        "nodes": 2,
        "tensor_parallel_size": 8,
        "pipeline_parallel_size": 1,
        "data_parallel_size": 2,
        "weight_format": "fp8",
        "reason": "more nodes",
    }


@pytest.mark.parametrize("value", ["0", "-5"])
def test_max_context_must_be_at_least_one(value, capsys):
    code = main([*GPT_OSS_20B_ON_L4, "--max-context", value, "--json"])
    assert code == 2 and "outside 1..131072" in json.loads(capsys.readouterr().out)["error"]


def test_bad_model_config_is_reported_as_problems(tmp_path, capsys):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"hidden_size": 0}))
    code = main(
        [
            "plan",
            "--model-config",
            str(bad),
            "--weight-format",
            "bf16",
            "--instance-type",
            "ml.g6.xlarge",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 2 and {"hidden_size", "num_hidden_layers", "vocab_size"} <= {
        p["property"] for p in data["problems"]
    }


def test_an_itl_target_trades_tensor_parallel_size_for_batch(capsys):
    args = [
        "plan",
        "--model",
        "llama-3.1-405b",
        "--weight-format",
        "nvfp4",
        "--instance-type",
        "ml.p6-b200.48xlarge",
        "--max-context",
        "2048",
        "--input-tokens",
        "1024",
        "--output-tokens",
        "1024",
        "--itl-target-ms",
        "20",
        "--json",
    ]
    assert main([*args, "--objective", "min-gpus"]) == 0
    smallest = json.loads(capsys.readouterr().out)
    assert main([*args, "--objective", "tokens-per-dollar", "--itl", "20"]) == 0
    best = json.loads(capsys.readouterr().out)
    assert smallest["tensor_parallel_size"] == 2 and best["tensor_parallel_size"] == 8
    assert best["decode"]["meets_target"] and not smallest["decode"]["meets_target"]


def test_plan_reads_a_saved_price_file_for_its_region(tmp_path, capsys):
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps({"region": "us-west-2", "source": "test", "prices": {"ml.g6.xlarge": 0.9}})
    )
    args = [*GPT_OSS_20B_ON_L4, "--max-context", "8192", "--json"]
    assert main([*args, "--region", "us-west-2", "--prices", str(prices)]) == 0
    assert json.loads(capsys.readouterr().out)["cost"]["fleet_price_per_hour"] == 0.9
    assert main([*args, "--region", "us-west-2"]) == 2
    assert (
        "no recorded prices for region 'us-west-2'" in json.loads(capsys.readouterr().out)["error"]
    )

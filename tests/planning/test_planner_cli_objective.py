"""``cdk-llm-serving plan`` with a workload, latency targets and an objective."""

from __future__ import annotations

import json

from cdk_llm_serving.ops.cli import main
from cdk_llm_serving.ops.exit_codes import EXIT_USAGE

LLAMA_405B_1K = [
    "plan",
    "--model",
    "llama-3.1-405b",
    "--weight-format",
    "fp8",
    "--instance-type",
    "ml.p5en.48xlarge",
    "--input-tokens",
    "1024",
    "--output-tokens",
    "1024",
    "--ttft",
    "10",
    "--tpot",
    "100",
]


def test_table_shows_the_best_layouts_side_by_side(capsys):
    assert main(LLAMA_405B_1K) == 0
    out = capsys.readouterr().out
    assert "tensor 8, pipeline 1, data 1" in out
    header = next(line for line in out.splitlines() if line.startswith("layout "))
    for column in ("tokens/s", "per GPU", "TTFT s", "ITL ms", "TPOT ms", "$/M tok", "why it loses"):
        assert column in header
    assert "TP8 fp8-KV *" in out and "fewer tokens per dollar" in out
    assert "does not pay: colocated" in out


def test_json_carries_the_choice_candidates_and_disaggregation(capsys):
    assert main([*LLAMA_405B_1K, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    choice = data["layout_choice"]
    assert data["tensor_parallel_size"] == 8 and choice["objective"] == "tokens-per-dollar"
    assert choice["performance"]["meets_targets"] and choice["performance"]["max_num_seqs"] >= 128
    assert choice["targets"] == {"ttft_s": 10.0, "itl_ms": None, "tpot_ms": 100.0}
    assert choice["candidates"] and all(c["loses_because"] for c in choice["candidates"])
    assert choice["disaggregation"]["source"].startswith("https://docs.aws.amazon.com/")
    assert data["cost"]["output_tokens_per_second"] == round(
        choice["performance"]["output_tokens_per_second"]
    )


def test_min_gpus_keeps_the_smallest_layout(capsys):
    assert main([*LLAMA_405B_1K, "--objective", "min-gpus", "--max-context", "2048", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["tensor_parallel_size"], data["data_parallel_size"]) == (4, 2)


def test_bad_arguments_are_one_error_line_with_exit_status_2(capsys):
    code = main(
        [
            *LLAMA_405B_1K,
            "--itl",
            "20",
            "--concurrency",
            "0",
            "--request-rate",
            "3",
            "--objective",
            "fast",
        ]
    )
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert err.count("\n") == 1 and err.startswith("error: plan: 3 problems")
    for text in ("--concurrency = '0'", "--itl or --tpot", "--objective = 'fast'"):
        assert text in err


def test_decode_rows_come_from_the_model_behind_the_choice(capsys):
    """The table's and the JSON's decode step and curve are the objective's
    (``objective.operating_point``), not the ITL-target curve: the step is at the chosen
    ``max_num_seqs`` and the curve's point there is ``Plan.performance``."""
    assert main([*LLAMA_405B_1K, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    perf, decode = data["layout_choice"]["performance"], data["decode"]
    assert decode["batch"] == perf["max_num_seqs"]
    assert decode["step"]["step_ms"] == perf["itl_ms"]
    (chosen,) = [point for point in decode["curve"] if point["batch"] == perf["max_num_seqs"]]
    for key in ("ttft_s", "itl_ms", "tpot_ms", "output_tokens_per_second"):
        shown = chosen["tokens_per_second" if key == "output_tokens_per_second" else key]
        assert shown == perf[key], key
    assert [p["batch"] for p in decode["curve"]][0] == 1  # the curve still starts at batch 1
    assert main(LLAMA_405B_1K) == 0
    table = capsys.readouterr().out
    step_row = next(line for line in table.splitlines() if line.startswith("decode step"))
    assert (
        f"batch {perf['max_num_seqs']} x " in step_row and f"= {perf['itl_ms']:.1f} ms" in step_row
    )
    curve_row = next(line for line in table.splitlines() if line.startswith("curve"))
    assert (
        f"{perf['max_num_seqs']}*: {perf['ttft_s']:,.2f} s / {perf['itl_ms']:,.1f} ms" in curve_row
    )

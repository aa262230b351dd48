"""The planner and NVIDIA's AIConfigurator side by side (`make compare-aiconfigurator`).

AIConfigurator (PyPI ``aiconfigurator`` / ``aiconfigurator-core`` 0.12.0, an optional dev
dependency in ``.venv/aiconfigurator``: requirements-aiconfigurator.txt) searches serving
layouts against a database of kernel timings collected on each GPU ("silicon" data, shipped
inside ``aiconfigurator-core``: ``aiconfigurator_core/systems/data/<system>/``) and the Hugging
Face configs it ships (``aiconfigurator_core/model_configs``). It runs offline, on a CPU, in a
few seconds per case. Its command line:

    aiconfigurator cli default --model-path M --system h200_sxm --backend vllm --total-gpus 8
        --serving-mode agg --isl 1024 --osl 1024 --ttft 10000 --tpot 100 --save-dir DIR

writes ``DIR/<model>_<system>_.../agg/best_config_topn.csv`` (tokens/s/gpu, tp, pp, dp,
moe_tp, moe_ep, bs, ttft, tpot per configuration, best first), which this reads.
``--serving-mode agg`` (no prefill/decode disaggregation): the layouts the constructs deploy.

For an FP8 run of a model whose bundled config is BF16 (Llama-3.1-405B), the case writes that
config with ``quantization_config = {"quant_method": "fp8"}`` into a directory of its own and
hands AIConfigurator the directory (its ``--model-path`` takes a local directory with a
``config.json``); AIConfigurator then reports ``quant_algo=fp8``.

The planner's side calls ``cdk_llm_serving.planning.plan`` with a ``Workload`` and
``LatencyTargets`` (its tokens-per-dollar objective).

    python bench/aiconfigurator_side_by_side.py            # both sides, the recorded AIC results
    python bench/aiconfigurator_side_by_side.py --run      # run AIConfigurator now (needs its venv)
    python bench/aiconfigurator_side_by_side.py --record   # run it and rewrite the recorded file
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "bench" / "aiconfigurator_cases.json"
AIC_VENV = ROOT / ".venv" / "aiconfigurator"
AIC_BIN = AIC_VENV / "bin" / "aiconfigurator"
#: The planner should land within this factor of AIConfigurator's tokens/s per GPU.
TARGET_RATIO = 1.5


@dataclass(frozen=True)
class Case:
    """One comparison: a preset on an instance type, and the same model on AIConfigurator.

    ``aic_model``: the Hugging Face id AIConfigurator ships a config for; ``aic_quant``: a
    ``quantization_config`` to add to it (``None``: the shipped config's own).
    """

    id: str
    model: str
    weight_format: str
    instance_type: str
    aic_model: str
    aic_system: str
    gpus: int
    aic_quant: dict[str, Any] | None = None
    input_tokens: int = 1024
    output_tokens: int = 1024
    ttft_s: float = 10.0
    tpot_ms: float = 100.0


#: The FP8 checkpoints of these models (Meta's Llama-3.1-405B-Instruct-FP8, RedHat's and
#: NVIDIA's Llama-3.x-70B FP8) scale activations dynamically, per token.
FP8_DYNAMIC = {"quant_method": "fp8", "activation_scheme": "dynamic"}

CASES = (
    Case("llama-3.1-405b-fp8-h200", "llama-3.1-405b", "fp8", "ml.p5en.48xlarge",
         "meta-llama/Meta-Llama-3.1-405B", "h200_sxm", 8, FP8_DYNAMIC),
    Case("llama-3.1-405b-fp8-b200", "llama-3.1-405b", "fp8", "ml.p6-b200.48xlarge",
         "meta-llama/Meta-Llama-3.1-405B", "b200_sxm", 8, FP8_DYNAMIC),
    Case("llama-3.3-70b-fp8-h200", "llama-3.3-70b", "fp8", "ml.p5en.48xlarge",
         "meta-llama/Meta-Llama-3.1-70B", "h200_sxm", 8, FP8_DYNAMIC),
    Case("llama-3.3-70b-fp8-b200", "llama-3.3-70b", "fp8", "ml.p6-b200.48xlarge",
         "meta-llama/Meta-Llama-3.1-70B", "b200_sxm", 8, FP8_DYNAMIC),
    Case("qwen3-235b-fp8-h200", "qwen3-235b-a22b", "fp8", "ml.p5en.48xlarge",
         "Qwen/Qwen3-235B-A22B-FP8", "h200_sxm", 8),
    Case("qwen3-235b-fp8-b200", "qwen3-235b-a22b", "fp8", "ml.p6-b200.48xlarge",
         "Qwen/Qwen3-235B-A22B-FP8", "b200_sxm", 8),
    Case("deepseek-r1-fp8-h200", "deepseek-r1", "fp8", "ml.p5en.48xlarge",
         "deepseek-ai/DeepSeek-R1", "h200_sxm", 8),
    Case("deepseek-r1-fp8-b200", "deepseek-r1", "fp8", "ml.p6-b200.48xlarge",
         "deepseek-ai/DeepSeek-R1", "b200_sxm", 8),
)  # fmt: skip


def _aic_python() -> Path:
    return AIC_VENV / "bin" / "python"


def aic_available() -> bool:
    return AIC_BIN.is_file() and _aic_python().is_file()


def aic_version() -> str:
    out = subprocess.run(
        [str(_aic_python()), "-c", "import importlib.metadata as m; print(m.version('aiconfigurator'))"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return out.stdout.strip()


def _bundled_config(model: str) -> dict[str, Any]:
    out = subprocess.run(
        [str(_aic_python()), "-c", "import aiconfigurator_core, os; "
         "print(os.path.dirname(aiconfigurator_core.__file__))"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    path = Path(out.stdout.strip()) / "model_configs" / f"{model.replace('/', '--')}_config.json"
    return dict(json.loads(path.read_text()))


def _command(case: Case, model_path: str, save_dir: Path) -> list[str]:
    return [
        str(AIC_BIN), "cli", "default", "--model-path", model_path,
        "--system", case.aic_system, "--backend", "vllm", "--total-gpus", str(case.gpus),
        "--serving-mode", "agg", "--isl", str(case.input_tokens),
        "--osl", str(case.output_tokens), "--ttft", f"{case.ttft_s * 1000:g}",
        "--tpot", f"{case.tpot_ms:g}", "--no-color", "--save-dir", str(save_dir),
    ]  # fmt: skip


def run_aiconfigurator(case: Case) -> dict[str, Any]:
    """AIConfigurator's best aggregated layout for ``case`` (needs ``.venv/aiconfigurator``)."""
    with tempfile.TemporaryDirectory(prefix="aic-") as tmp:
        model_path = case.aic_model
        if case.aic_quant is not None:
            local = Path(tmp) / "model" / case.aic_model.split("/")[-1]
            local.mkdir(parents=True)
            config = {**_bundled_config(case.aic_model), "quantization_config": case.aic_quant}
            (local / "config.json").write_text(json.dumps(config))
            model_path = str(local)
        save = Path(tmp) / "out"
        command = _command(case, model_path, save)
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        results = sorted(save.glob("**/agg/best_config_topn.csv"))
        if done.returncode != 0 or not results:
            tail = (done.stdout + done.stderr)[-2000:]
            raise RuntimeError(
                f"aiconfigurator failed on {case.id} (exit {done.returncode}):\n{tail}"
            )
        with results[0].open() as handle:
            best = next(csv.DictReader(handle))
    shown = _command(case, model_path, Path("DIR"))
    shown[0] = "aiconfigurator"
    if case.aic_quant is not None:
        shown[shown.index(model_path)] = (
            f"<dir: {case.aic_model} config.json + quantization_config {json.dumps(case.aic_quant)}>"
        )
    return {
        "id": case.id,
        "command": " ".join(shown),
        "tensor_parallel": int(best["tp"]),
        "pipeline_parallel": int(best["pp"]),
        "data_parallel": int(best["dp"]),
        "moe_tensor_parallel": int(best["moe_tp"]),
        "expert_parallel": int(best["moe_ep"]),
        "parallel": best["parallel"],
        "replicas_per_node": case.gpus // (int(best["tp"]) * int(best["pp"]) * int(best["dp"])),
        "batch": int(best["bs"]),
        "concurrency": int(float(best["concurrency"])),
        "gemm": best["gemm"],
        "kv_cache": best["kvcache"],
        "ttft_ms": round(float(best["ttft"]), 1),
        "tpot_ms": round(float(best["tpot"]), 2),
        "tokens_per_second_per_gpu": round(float(best["tokens/s/gpu"]), 2),
        "memory_gib_per_gpu": round(float(best["memory"]), 1),
    }


def record() -> dict[str, Any]:
    """Run every case and write ``bench/aiconfigurator_cases.json``."""
    data = {
        "description": "AIConfigurator's best aggregated (non-disaggregated) vLLM layout per "
        "case, recorded by `python bench/aiconfigurator_side_by_side.py --record`; compared "
        "with the planner in tests/planning/test_aiconfigurator_side_by_side.py. "
        "tokens_per_second_per_gpu: output tokens/s per GPU at AIConfigurator's batch. "
        "Silicon-measured kernel database, offline, no GPU.",
        "aiconfigurator_version": aic_version(),
        "backend": "vllm",
        "database_mode": "SILICON (default)",
        "target_ratio": TARGET_RATIO,
        "cases": [
            {"case": asdict(case), "aiconfigurator": run_aiconfigurator(case)} for case in CASES
        ],
    }
    notes = {  # an explained gap stays with its case (the test holds it as a strict xfail)
        entry["aiconfigurator"]["id"]: entry["note"]
        for entry in recorded().get("cases", [])
        if entry.get("note")
    }
    for entry in data["cases"]:
        if entry["aiconfigurator"]["id"] in notes:
            entry["note"] = notes[entry["aiconfigurator"]["id"]]
    RECORDED.write_text(json.dumps(data, indent=1) + "\n")
    return data


def recorded() -> dict[str, Any]:
    return dict(json.loads(RECORDED.read_text()))


def planner_side(case: Case) -> dict[str, Any]:
    """The planner's chosen layout at the case's workload and targets."""
    from cdk_llm_serving.planning import LatencyTargets, Workload, plan

    p = plan(
        case.model,
        case.weight_format,
        case.instance_type,
        workload=Workload(input_tokens=case.input_tokens, output_tokens=case.output_tokens),
        targets=LatencyTargets(ttft_s=case.ttft_s, tpot_ms=case.tpot_ms),
        max_nodes=1,  # AIConfigurator's --total-gpus 8: one node's GPUs
    )
    perf = p.performance
    return {
        "tensor_parallel": p.tensor_parallel,
        "pipeline_parallel": p.pipeline_parallel,
        "data_parallel": p.data_parallel,
        "expert_parallel": p.expert_parallel,
        "nodes": p.nodes,
        "gpus_per_replica": p.gpus_per_replica,
        "batch": perf.max_num_seqs,
        "tokens_per_second_per_gpu": perf.output_tokens_per_second_per_gpu,
        "ttft_s": perf.ttft_s,
        "tpot_ms": perf.tpot_ms,
    }


def _layout(entry: dict[str, Any]) -> str:
    """``TP4 x2`` (two replicas of tensor 4), ``TP1.DP4.ETP4 x2`` (attention data-parallel 4,
    experts tensor-parallel over the same 4 GPUs, two replicas)."""
    parts = [f"TP{entry['tensor_parallel']}"]
    for key, label in (
        ("pipeline_parallel", "PP"),
        ("data_parallel", "DP"),
        ("moe_tensor_parallel", "ETP"),  # AIConfigurator splits experts tensor-parallel
        ("expert_parallel", "EP"),
    ):
        if entry.get(key, 1) > 1:
            parts.append(f"{label}{entry[key]}")
    replicas = entry.get("replicas_per_node", 1)
    return ".".join(parts) + (f" x{replicas}" if replicas > 1 else "")


def report(data: dict[str, Any]) -> list[dict[str, Any]]:
    by_id = {case.id: case for case in CASES}
    rows = []
    print(
        f"AIConfigurator {data['aiconfigurator_version']} (vLLM backend, aggregated) vs the planner"
    )
    print(f"{'case':26} {'AIC layout':16} {'bs':>5} {'tok/s/GPU':>10} | "
          f"{'planner layout':16} {'bs':>5} {'tok/s/GPU':>10} | ratio")  # fmt: skip
    for entry in data["cases"]:
        aic = entry["aiconfigurator"]
        case = by_id[aic["id"]]
        try:
            ours: dict[str, Any] | None = planner_side(case)
            why = ""
        except Exception as error:  # a refused plan is a result too
            ours, why = None, f"planner refused: {str(error).splitlines()[0]}"
        left = f"{aic['id']:26} {_layout(aic):16} {aic['batch']:>5} {aic['tokens_per_second_per_gpu']:>10.1f} | "
        if ours is None:
            print(left + why)
            rows.append({"id": aic["id"], "aic": aic, "planner": None, "ratio": None, "why": why})
            continue
        ratio = ours["tokens_per_second_per_gpu"] / aic["tokens_per_second_per_gpu"]
        print(
            left
            + f"{_layout(ours):16} {ours['batch']:>5} {ours['tokens_per_second_per_gpu']:>10.1f} | {ratio:.2f}"
        )
        rows.append({"id": aic["id"], "aic": aic, "planner": ours, "ratio": ratio, "why": ""})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--run", action="store_true", help="run AIConfigurator now (not the recorded file)"
    )
    mode.add_argument("--record", action="store_true", help="run it and rewrite the recorded file")
    args = parser.parse_args(argv)
    if (args.run or args.record) and not aic_available():
        print(
            f"AIConfigurator is not installed in {AIC_VENV}: make compare-aiconfigurator installs it"
        )
        return 2
    if args.record:
        data = record()
    elif args.run:
        data = {
            "aiconfigurator_version": aic_version(),
            "cases": [{"case": asdict(c), "aiconfigurator": run_aiconfigurator(c)} for c in CASES],
        }
    else:
        data = recorded()
    rows = report(data)
    misses = [
        r
        for r in rows
        if r["ratio"] is not None and not 1 / TARGET_RATIO <= r["ratio"] <= TARGET_RATIO
    ]
    if misses:
        print(f"outside {TARGET_RATIO}x: {', '.join(r['id'] for r in misses)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

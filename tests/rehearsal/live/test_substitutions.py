"""The live run's substitution table: only what a CPU cannot run is rewritten, as listed."""

from __future__ import annotations

import pytest

from rehearsal.live.generated_model import MAX_MODEL_LEN
from rehearsal.live.substitutions import TABLE, SubstitutionError, added_env, substitute

#: The reference worker's arguments as synthesized (cdk.out/ReferenceMoeHyperPod.template.json).
REFERENCE_WORKER = (
    "vllm", "serve", "/models/w", "--served-model-name", "reference-moe-nvfp4",
    "--tensor-parallel-size", "8", "--data-parallel-size", "2", "--enable-expert-parallel",
    "--quantization", "modelopt_fp4", "--speculative-config",
    '{"method":"mtp","num_speculative_tokens":1}', "--reasoning-parser", "qwen3",
    "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder", "--max-model-len",
    "131072", "--gpu-memory-utilization", "0.9", "--kv-offloading-size", "1000",
    "--data-parallel-size-local", "1",
    "--data-parallel-address", "lws-0.lws.inference", "--data-parallel-rpc-port", "13345",
    "--data-parallel-start-rank", "1", "--headless",
)  # fmt: skip


def test_the_reference_worker_keeps_everything_a_cpu_runs() -> None:
    argv, applied = substitute(REFERENCE_WORKER)
    assert argv == (
        "vllm", "serve", "/models/w", "--served-model-name", "reference-moe-nvfp4",
        "--tensor-parallel-size", "1", "--data-parallel-size", "2",
        "--reasoning-parser", "qwen3", "--enable-auto-tool-choice", "--tool-call-parser",
        "qwen3_coder", "--max-model-len", str(MAX_MODEL_LEN), "--data-parallel-size-local", "1",
        "--data-parallel-address", "lws-0.lws.inference", "--data-parallel-rpc-port", "13345",
        "--data-parallel-start-rank", "1", "--headless",
    )  # fmt: skip
    assert [a.rule.flag for a in applied] == [
        "--tensor-parallel-size",
        "--enable-expert-parallel",
        "--quantization",
        "--speculative-config",
        "--max-model-len",
        "--gpu-memory-utilization",
        "--kv-offloading-size",
    ]
    assert added_env(applied) == (("VLLM_CPU_KVCACHE_SPACE", "1"),)


def test_an_unlisted_flag_passes_through_unchanged() -> None:
    argv = (
        "vllm",
        "serve",
        "/m",
        "--some-future-flag",
        "x=1",
        "--enable-prefix-caching",
        "--kv-cache-dtype",
        "fp8",
    )
    assert substitute(argv) == (argv, ())


def test_the_equals_form_is_rewritten_too() -> None:
    argv, applied = substitute(("--tensor-parallel-size=4", "--max-model-len=1024"))
    assert argv == ("--tensor-parallel-size", "1", "--max-model-len", "1024")
    assert len(applied) == 2  # the shorter context is not capped, but respelled


def test_values_a_cpu_runs_are_left_alone() -> None:
    argv = ("--tensor-parallel-size", "1", "--max-model-len", "2048")
    assert substitute(argv) == (argv, ())


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--quantization", "fp8"), "--quantization 'fp8'"),
        (("--quantization", "awq"), "does not know this value"),
        (("--speculative-config", '{"method":"eagle3","model":"x"}'), "--speculative-config"),
        (("--speculative-config", "not json"), "--speculative-config"),
        (("--tensor-parallel-size", "$(TP)"), "'$(TP)'"),
        (("--gpu-memory-utilization", "1.5"), "--gpu-memory-utilization"),
        (("--max-model-len", "128k"), "--max-model-len"),
        (("--kv-offloading-size", "lots"), "--kv-offloading-size 'lots'"),
        (("--max-model-len",), "has no value"),
        (("--enable-expert-parallel=true",), "takes no value"),
        (("/bin/sh", "-c", "exec vllm serve /m --quantization modelopt_fp4"), "inside other text"),
    ],
)
def test_the_table_refuses_what_it_does_not_know(argv: tuple[str, ...], says: str) -> None:
    with pytest.raises(SubstitutionError, match=None) as raised:
        substitute(argv)
    assert says in str(raised.value)


def test_a_flag_sharing_a_prefix_with_a_listed_one_is_not_listed() -> None:
    argv = ("--tensor-parallel-size-extra", "3", "--max-model-length", "9")
    assert substitute(argv) == (argv, ())


def test_every_entry_says_why_and_where() -> None:
    assert len({rule.flag for rule in TABLE}) == len(TABLE)
    for rule in TABLE:
        assert rule.reason and rule.source
        assert rule.source.startswith(
            ("http", "../shared/FACTS.md", "vllm-project/vllm ", "ASSUMED:")
        )

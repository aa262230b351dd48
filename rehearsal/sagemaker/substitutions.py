"""What the SageMaker rehearsal changes in a copy's container environment, and why: only what
cannot exist on a CPU machine without AWS. Everything else reaches AWS's entrypoint as
synthesized (``sagemaker_args.py`` turns each ``SM_VLLM_*`` variable into vLLM flags itself).

A listed variable with a value the table does not know is refused (``SubstitutionError``), not
guessed: the rehearsal reports it as ``sagemaker.substitution-refused``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: The test model's context (rehearsal/live/generated_model.py: ``max_position_embeddings``).
TEST_MODEL_CONTEXT = 4096
#: GPU-only quantization methods (vLLM's CUDA kernels); the test model is unquantized.
GPU_QUANTIZATIONS = frozenset(
    {"awq", "awq_marlin", "gptq", "gptq_marlin", "fp8", "modelopt", "modelopt_fp4", "mxfp4"}
)
#: Speculative methods that need no draft weights (vLLM ``SpeculativeConfig``: ``ngram`` is
#: prompt lookup, model-free).
MODEL_FREE_SPECULATION = frozenset({"ngram"})


class SubstitutionError(ValueError):
    """A listed variable has a value the table does not know."""


@dataclass(frozen=True)
class Substitution:
    """One row of the table: the variable, what it becomes (``None``: removed), why."""

    variable: str
    before: str | None
    after: str | None
    reason: str

    def __str__(self) -> str:
        after = "removed" if self.after is None else repr(self.after)
        before = "(absent)" if self.before is None else repr(self.before)
        return f"{self.variable}: {before} -> {after} ({self.reason})"


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise SubstitutionError(f"not an integer: {value!r}") from None


def _tensor_parallel(value: str) -> tuple[str | None, str]:
    _int(value)
    return "1", "one CPU process per copy: the CPU build runs no tensor parallel over GPUs"


def _expert_parallel(value: str) -> tuple[str | None, str]:
    if value.strip().lower() not in ("true", "false"):
        raise SubstitutionError(f"not a boolean: {value!r}")
    return None, (
        "the test model is dense: vLLM refuses expert parallel on it (../shared/FACTS.md, "
        '"Real vLLM on a CPU")'
    )


def _max_model_len(value: str) -> tuple[str | None, str]:
    return str(min(_int(value), TEST_MODEL_CONTEXT)), "the test model's context"


def _gpu_memory(value: str) -> tuple[str | None, str]:
    try:
        float(value)
    except ValueError:
        raise SubstitutionError(f"not a fraction: {value!r}") from None
    return None, "the CPU build sizes its KV cache in GiB (VLLM_CPU_KVCACHE_SPACE, added)"


def _quantization(value: str) -> tuple[str | None, str]:
    if value not in GPU_QUANTIZATIONS:
        raise SubstitutionError(f"unknown quantization {value!r}")
    return None, f"{value} kernels are GPU-only; the test model is unquantized"


def _speculative(value: str) -> tuple[str | None, str]:
    try:
        method = json.loads(value).get("method")
    except (ValueError, AttributeError):
        raise SubstitutionError(f"not a JSON object: {value!r}") from None
    if method not in MODEL_FREE_SPECULATION:
        raise SubstitutionError(f"speculative method {method!r} needs draft weights")
    return value, "kept: prompt-lookup speculation needs no draft weights"


#: Parser names vLLM 0.32 registers (``--tool-call-parser``, ``--reasoning-parser``) that a
#: reference model may ask for; the test model speaks one of each (generated_model.py).
TOOL_PARSERS = frozenset(
    {
        "openai",
        "hermes",
        "qwen3_coder",
        "qwen3_xml",
        "kimi_k2",
        "llama3_json",
        "mistral",
        "pythonic",
    }
)
REASONING_PARSERS = frozenset({"openai_gptoss", "qwen3", "deepseek_r1", "deepseek_v3", "glm45"})


def _tool_parser(value: str) -> tuple[str | None, str]:
    if value not in TOOL_PARSERS:
        raise SubstitutionError(f"unknown tool-call parser {value!r}")
    return "qwen3_coder", (
        "the test model is fitted to answer in the qwen3_coder tool format "
        "(rehearsal/live/generated_model.py); the flag itself stays"
    )


def _reasoning_parser(value: str) -> tuple[str | None, str]:
    if value not in REASONING_PARSERS:
        raise SubstitutionError(f"unknown reasoning parser {value!r}")
    return "qwen3", "the test model reasons in <think> blocks (rehearsal/live/generated_model.py)"


#: variable -> rule(value) -> (new value or None to remove, reason)
RULES: Mapping[str, Callable[[str], tuple[str | None, str]]] = {
    "SM_VLLM_TENSOR_PARALLEL_SIZE": _tensor_parallel,
    "SM_VLLM_ENABLE_EXPERT_PARALLEL": _expert_parallel,
    "SM_VLLM_MAX_MODEL_LEN": _max_model_len,
    "SM_VLLM_GPU_MEMORY_UTILIZATION": _gpu_memory,
    "SM_VLLM_QUANTIZATION": _quantization,
    "SM_VLLM_SPECULATIVE_CONFIG": _speculative,
    "SM_VLLM_TOOL_CALL_PARSER": _tool_parser,
    "SM_VLLM_REASONING_PARSER": _reasoning_parser,
}

#: Added to every copy's environment: (variable, value, reason).
ADDED: tuple[tuple[str, str, str], ...] = (
    ("VLLM_TARGET_DEVICE", "cpu", "the CPU build does not detect its platform otherwise"),
    ("VLLM_CPU_KVCACHE_SPACE", "1", "1 GiB of KV cache (replaces --gpu-memory-utilization)"),
    ("HF_HUB_OFFLINE", "1", "nothing may be downloaded"),
    ("HOME", "/root", "ASSUMED: the image runs as root"),
    (
        "PYTHONPATH",
        "/usr/local/bin",
        "ASSUMED: the image can import /usr/local/bin/sagemaker_serve.py (the route check shows it)",
    ),
)


def substitute(environment: Mapping[str, str]) -> tuple[dict[str, str], list[Substitution]]:
    """The environment the rehearsal gives AWS's entrypoint, and each change made."""
    out: dict[str, str] = {}
    applied: list[Substitution] = []
    for key, value in sorted(environment.items()):
        rule = RULES.get(key)
        if rule is None:
            out[key] = value
            continue
        after, reason = rule(value)
        if after is not None:
            out[key] = after
        if after != value:
            applied.append(Substitution(key, value, after, reason))
    for key, value, reason in ADDED:
        if key not in out:
            out[key] = value
            applied.append(Substitution(key, None, value, reason))
    return out, applied


#: What the rehearsal lays out in place of the image, beside the environment.
LAYOUT: tuple[tuple[str, str], ...] = (
    (
        "/usr/local/bin/sagemaker_entrypoint.sh, sagemaker_args.py, sagemaker_serve.py",
        "AWS's own, byte for byte (../shared/aws-dlc-vllm), over the host's /usr/local/bin "
        "in a private mount namespace",
    ),
    (
        "/usr/local/bin/bash_telemetry.sh",
        "absent: the entrypoint ignores its failure (`|| true`)",
    ),
    (
        "standard-supervisor",
        "a shim that execs its command: the image's supervisor "
        "(aws/model-hosting-container-standards) restarts a crashed server, which would hide "
        "the crash from the rehearsal",
    ),
    (
        "python3",
        ".venv/vllm's (vllm-cpu 0.32, torch CPU) first on PATH",
    ),
    (
        "/opt/ml/model",
        "the generated test model, plus each file the stack writes into the weights prefix at "
        "deploy time (Custom::AWS putObject), in place of the S3 download",
    ),
    ("port 8080", "in a network namespace of its own; the client talks to it from inside"),
)

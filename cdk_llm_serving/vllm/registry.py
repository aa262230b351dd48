"""What vLLM's server accepts (flags, parsers, quantization methods), from ``data/vllm_registry.json``.

The file records vLLM's own registries and where they were read from
(docs/design/vllm-config.md); the checks return lists of ``errors.Problem``.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import Problem, Problems

_DATA = Path(__file__).parent / "data" / "vllm_registry.json"
#: Prefix of the variables AWS's SageMaker vLLM container turns into ``vllm serve`` flags.
SAGEMAKER_PREFIX = "SM_VLLM_"
#: Quantization methods vLLM applies to unquantized (BF16) weights as they load
#: (https://docs.vllm.ai/en/latest/features/quantization/fp8.html, "online dynamic quantization").
ONLINE_QUANTIZATION = frozenset({"fp8", "ptpc_fp8", "fbgemm_fp8", "experts_int8"})

Found = list[Problem]


@dataclass(frozen=True)
class VllmRegistry:
    vllm_version: str
    flags: frozenset[str]
    #: Boolean flags with a ``--no-<flag>`` form (``argparse.BooleanOptionalAction``).
    negatable_flags: frozenset[str]
    removed_flags: Mapping[str, str]
    container_flags: Mapping[str, str]
    tool_call_parsers: tuple[str, ...]
    reasoning_parsers: tuple[str, ...]
    quantization_methods: tuple[str, ...]


@functools.cache
def registry() -> VllmRegistry:
    data = json.loads(_DATA.read_text())
    return VllmRegistry(
        vllm_version=data["vllm_version"],
        flags=frozenset(data["flags"]),
        negatable_flags=frozenset(data["negatable_flags"]),
        removed_flags=data["removed_flags"],
        container_flags=data["container_flags"],
        tool_call_parsers=tuple(data["tool_call_parsers"]),
        reasoning_parsers=tuple(data["reasoning_parsers"]),
        quantization_methods=tuple(data["quantization_methods"]),
    )


def _not_in(value: str, options: tuple[str, ...] | frozenset[str], what: str) -> str:
    close = difflib.get_close_matches(value, sorted(options), n=3, cutoff=0.6)
    hint = f"; closest: {', '.join(close)}" if close else ""
    return f"not one of vLLM {registry().vllm_version}'s {len(options)} {what}{hint}"


def flag_problems(prop: str, flag: str, value: object) -> Found:
    """A flag vLLM no longer has or never had (``flag`` without ``--``)."""
    known = registry()
    if flag in known.removed_flags:
        return [Problem(prop, value, f"--{flag} was {known.removed_flags[flag]}")]
    if flag not in known.flags:
        return [
            Problem(prop, value, _not_in(flag, known.flags, "server flags") + " (vllm serve exits)")
        ]
    return []


def name_problems(
    tool_call_parser: object,
    reasoning_parser: object,
    quantization: object,
    props: tuple[str, str, str],
) -> Found:
    """Parser and quantization names vLLM does not register (``None`` = not set)."""
    known = registry()
    found: Found = []
    for prop, value, options, what in (
        (props[0], tool_call_parser, known.tool_call_parsers, "tool-call parsers"),
        (props[1], reasoning_parser, known.reasoning_parsers, "reasoning parsers"),
        (props[2], quantization, known.quantization_methods, "quantization methods"),
    ):
        if value is not None and value not in options:
            found.append(Problem(prop, value, _not_in(str(value), options, what)))
    return found


def sagemaker_flags(environment: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """``SM_VLLM_MAX_MODEL_LEN=8192`` -> ``{"max-model-len": ("SM_VLLM_MAX_MODEL_LEN", "8192")}``."""
    return {
        key[len(SAGEMAKER_PREFIX) :].lower().replace("_", "-"): (key, value)
        for key, value in environment.items()
        if key.startswith(SAGEMAKER_PREFIX)
    }


def sagemaker_environment_problems(environment: Mapping[str, str]) -> Found:
    """What vLLM would refuse at start in ``SM_VLLM_*`` variables written by hand: removed and
    unknown flags, flags the container sets itself, automatic tool choice without a parser
    (``validate_parsed_serve_args`` in vLLM's ``cli_args.py``), unregistered names."""
    flags = sagemaker_flags(environment)
    found = Problems("SageMaker vLLM environment")
    known = registry()
    for flag, (key, value) in flags.items():
        prop = f"environment[{key!r}]"
        if flag.startswith("no-") and flag[3:] in known.negatable_flags:
            if value.strip().lower() != "true":
                found.add(prop, value, f"--{flag} is a bare flag: set it to true")
        elif value.strip().lower() == "false" and flag in known.negatable_flags:
            turn_off = f"{SAGEMAKER_PREFIX}NO_{key[len(SAGEMAKER_PREFIX) :]}=true (--no-{flag})"
            allowed = f"AWS's container drops a false flag (sagemaker_args.py), leaving vLLM's default; turn it off with {turn_off}"
            found.add(prop, value, allowed)
        elif flag in known.container_flags:
            found.add(
                prop, value, f"--{flag} is the container's own: {known.container_flags[flag]}"
            )
        else:
            found.extend(flag_problems(prop, flag, value))
    auto = flags.get("enable-auto-tool-choice")
    if auto is not None and auto[1].lower() == "true" and "tool-call-parser" not in flags:
        allowed = "vLLM refuses automatic tool choice without SM_VLLM_TOOL_CALL_PARSER"
        found.add(f"environment[{auto[0]!r}]", auto[1], allowed)
    names = [flags.get(name) for name in ("tool-call-parser", "reasoning-parser", "quantization")]
    values = [entry[1] if entry else None for entry in names]
    props = tuple(f"environment[{entry[0]!r}]" if entry else "" for entry in names)
    found.extend(name_problems(values[0], values[1], values[2], props))  # type: ignore[arg-type]
    return list(found.problems())


def quantization_problems(
    prop: str, quantization: str | None, weights_quantization: str | None, weight_format: str
) -> Found:
    """A ``--quantization`` that does not match the weights' format.

    Quantized weights load with their own method; unquantized weights take only a method
    vLLM applies while loading (``ONLINE_QUANTIZATION``).
    """
    if quantization is None or quantization == weights_quantization:
        return []
    if weights_quantization is None and quantization in ONLINE_QUANTIZATION:
        return []
    expected = (
        weights_quantization
        or f"none (or one vLLM applies while loading: {', '.join(sorted(ONLINE_QUANTIZATION))})"
    )
    return [
        Problem(
            prop, quantization, f"the weights are {weight_format}: quantization must be {expected}"
        )
    ]

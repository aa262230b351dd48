"""``VllmConfig``: one typed vLLM server configuration for both deployment paths.

``server_flags()`` is the single mapping from fields to vLLM flags; ``to_args()`` (``vllm
serve``, HyperPod) and ``to_sagemaker_environment()`` (``SM_VLLM_*`` variables) both come from
it, so they cannot drift (docs/design/vllm-config.md). Pure Python, no CDK.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from ..errors import ConfigurationError, Problem, Problems, check_fields
from .registry import flag_problems, name_problems, registry

#: Flags vLLM 0.33 no longer has, with what replaced them: passing one makes vLLM exit
#: (recorded with vLLM's other registries in ``data/vllm_registry.json``).
REMOVED_FLAGS: dict[str, str] = dict(registry().removed_flags)
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
#: vLLM's KV-offloading backends (``KVOffloadingBackend`` in vllm/config/cache.py).
KV_OFFLOADING_BACKENDS = ("native", "lmcache")
#: Flags with a typed field (the field's name with ``_``), in the order they are rendered.
TYPED_FLAGS = (
    "model",
    "served-model-name",
    "tensor-parallel-size",
    "pipeline-parallel-size",
    "data-parallel-size",
    "enable-expert-parallel",
    "quantization",
    "speculative-config",
    "reasoning-parser",
    "enable-auto-tool-choice",
    "tool-call-parser",
    "max-model-len",
    "max-num-seqs",
    "gpu-memory-utilization",
    "kv-cache-dtype",
    "kv-offloading-size",
    "kv-offloading-backend",
    "load-format",
)
_FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
FlagValue = str | int | float | bool


class VllmConfigError(ConfigurationError):
    """Every problem of one ``VllmConfig``, named by field (a ``ConfigurationError``)."""

    def __init__(self, problems: Sequence[Problem] | Problems) -> None:
        found = problems.problems() if isinstance(problems, Problems) else problems
        super().__init__("VllmConfig", list(found))


def _draft_length_problems(tokens: int) -> list[Problem]:
    """vLLM drafts at least one token per step."""
    if tokens < 1:
        return [Problem("speculative.num_speculative_tokens", tokens, "must be at least 1")]
    return []


@dataclass(frozen=True)
class MtpSpeculation:
    """Multi-token prediction with the model's own MTP layers (DeepSeek-V3, the reference MoE, ...)."""

    num_speculative_tokens: int = 1
    method: str = field(default="mtp", init=False)

    def problems(self) -> list[Problem]:
        return _draft_length_problems(self.num_speculative_tokens)


@dataclass(frozen=True)
class Eagle3Speculation:
    """EAGLE-3 with a separately trained draft model."""

    draft_model: str
    num_speculative_tokens: int = 3
    method: str = field(default="eagle3", init=False)

    def problems(self) -> list[Problem]:
        found: list[Problem] = []
        if not self.draft_model:
            found.append(
                Problem(
                    "speculative.draft_model",
                    self.draft_model,
                    "EAGLE-3 needs the draft model's location",
                )
            )
        return found + _draft_length_problems(self.num_speculative_tokens)


@dataclass(frozen=True)
class NgramSpeculation:
    """Prompt-lookup (n-gram) speculation: no draft model, good for echo-heavy tasks."""

    num_speculative_tokens: int = 4
    prompt_lookup_max: int = 4
    prompt_lookup_min: int = 1
    method: str = field(default="ngram", init=False)

    def problems(self) -> list[Problem]:
        found = _draft_length_problems(self.num_speculative_tokens)
        if not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max:
            found.append(
                Problem(
                    "speculative.prompt_lookup_min",
                    (self.prompt_lookup_min, self.prompt_lookup_max),
                    "n-gram lookup needs 1 <= prompt_lookup_min <= prompt_lookup_max",
                )
            )
        return found


Speculation = MtpSpeculation | Eagle3Speculation | NgramSpeculation


@dataclass(frozen=True)
class VllmConfig:
    """What one vLLM server runs and how. ``None`` leaves vLLM's default.

    :param model: where the weights are (a path such as ``/opt/ml/model``, an S3 URI with
        ``load_format="runai_streamer"``).
    :param served_model_name: the name responses carry in their ``model`` field.
    :param tensor_parallel_size / pipeline_parallel_size / data_parallel_size: parallelism.
    :param enable_expert_parallel: shard MoE experts across GPUs.
    :param quantization: vLLM's quantization method (``modelopt_fp4``, ``fp8``, ``mxfp4``, ``awq_marlin``, ...).
    :param speculative: MTP, EAGLE-3 or n-gram speculative decoding.
    :param reasoning_parser: e.g. ``qwen3``, ``deepseek_r1``.
    :param tool_call_parser: e.g. ``hermes``, ``qwen3_coder``, ``kimi_k2``.
    :param enable_auto_tool_choice: let the model decide to call tools. Default: on when a
        ``tool_call_parser`` is set (it needs one).
    :param max_model_len: longest context.
    :param max_num_seqs: most sequences one engine batches (``--max-num-seqs``). Default:
        vLLM's, by GPU (``VllmMultiNodeService`` sets the planner's chosen batch).
    :param gpu_memory_utilization: vLLM's share of GPU memory, in (0, 1].
    :param kv_cache_dtype: ``auto`` or an FP8 type.
    :param kv_offloading_size: GiB of host memory for vLLM's KV-cache offloading
        (``--kv-offloading-size``): prefix-cache blocks evicted from GPU memory are kept in
        host memory. The total of one engine, split over its ranks by vLLM. Default: no
        offloading (``VllmMultiNodeService`` sizes it from the node's memory, ``kv_offload``).
    :param kv_offloading_backend: ``native`` (vLLM's ``OffloadingConnector``) or ``lmcache``
        (a separately run LMCache server owns the capacity); only with ``kv_offloading_size``.
        Default: vLLM's, ``native``.
    :param load_format: e.g. ``runai_streamer`` to stream weights from S3.
    :param extra_flags: further flags, by name without ``--`` (``True`` for a bare flag).
    """

    model: str
    served_model_name: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    enable_expert_parallel: bool = False
    quantization: str | None = None
    speculative: Speculation | None = None
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    enable_auto_tool_choice: bool | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None
    kv_offloading_size: float | None = None
    kv_offloading_backend: str | None = None
    load_format: str | None = None
    extra_flags: Mapping[str, FlagValue] = field(default_factory=dict)

    def server_flags(self) -> list[tuple[str, FlagValue]]:
        """``(flag, value)`` pairs in a fixed order; ``True`` means a bare flag."""
        auto_tool_choice = (
            self.enable_auto_tool_choice
            if self.enable_auto_tool_choice is not None
            else self.tool_call_parser is not None
        )
        derived: dict[str, FlagValue | None] = {
            "speculative-config": _speculative_config(self.speculative),
            "enable-auto-tool-choice": auto_tool_choice,
        }
        typed = [
            (name, derived[name] if name in derived else getattr(self, name.replace("-", "_")))
            for name in TYPED_FLAGS
        ]
        extra = sorted(_negated(name, value) for name, value in self.extra_flags.items())
        return [
            (name, value)
            for name, value in typed + extra
            if value is not None and value is not False
        ]

    def to_args(self) -> list[str]:
        """Arguments of ``vllm serve``: the model first, then ``--flag value`` pairs."""
        self.validate()
        args: list[str] = []
        for name, value in self.server_flags():
            if name == "model":
                args.insert(0, str(value))
            elif value is True:
                args.append(f"--{name}")
            else:
                args += [f"--{name}", _render(value)]
        return args

    def to_sagemaker_environment(self) -> dict[str, str]:
        """``SM_VLLM_*`` variables for AWS's SageMaker vLLM container."""
        self.validate()
        return {
            sagemaker_variable(name): ("true" if value is True else _render(value))
            for name, value in self.server_flags()
        }

    def problems(self) -> list[Problem]:
        """Every problem of this configuration, each a ``Problem`` named by field (wrong
        types alone when there are any: the value checks compare values)."""
        found = Problems("VllmConfig")
        check_fields(found, "", self)
        if found:
            return list(found.problems())
        if not self.model:
            found.add("model", self.model, "must name the weights' location")
        for prop in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            if (value := getattr(self, prop)) is not None and value < 1:
                found.add(prop, value, "must be at least 1")
        if self.gpu_memory_utilization is not None and not (0 < self.gpu_memory_utilization <= 1):
            found.add("gpu_memory_utilization", self.gpu_memory_utilization, "must be in (0, 1]")
        for prop in ("max_model_len", "max_num_seqs"):
            if (value := getattr(self, prop)) is not None and value < 1:
                found.add(prop, value, "must be at least 1")
        if self.kv_cache_dtype is not None and self.kv_cache_dtype not in KV_CACHE_DTYPES:
            allowed = f"must be one of {', '.join(KV_CACHE_DTYPES)}"
            found.add("kv_cache_dtype", self.kv_cache_dtype, allowed)
        self._kv_offloading_problems(found)
        if self.enable_auto_tool_choice and not self.tool_call_parser:
            allowed = "vLLM refuses automatic tool choice without a tool_call_parser"
            found.add("enable_auto_tool_choice", True, allowed)
        name = self.served_model_name
        if name is not None and (not name or any(c.isspace() for c in name)):
            found.add("served_model_name", name, "must be a non-empty name without whitespace")
        found.extend(self.speculative.problems() if self.speculative else ())
        props = ("tool_call_parser", "reasoning_parser", "quantization")
        found.extend(
            name_problems(self.tool_call_parser, self.reasoning_parser, self.quantization, props)
        )
        self._extra_flag_problems(found)
        return list(found.problems())

    def _kv_offloading_problems(self, found: Problems) -> None:
        """A positive, finite size (vLLM raises on zero); a known backend, only with a size."""
        size, backend = self.kv_offloading_size, self.kv_offloading_backend
        if size is not None and not (math.isfinite(size) and size > 0):
            found.add("kv_offloading_size", size, "GiB of host memory, a finite number above 0")
        if backend is not None and backend not in KV_OFFLOADING_BACKENDS:
            allowed = f"must be one of {', '.join(KV_OFFLOADING_BACKENDS)}"
            found.add("kv_offloading_backend", backend, allowed)
        elif backend is not None and size is None:
            allowed = "needs kv_offloading_size: vLLM offloads only when a size is set"
            found.add("kv_offloading_backend", backend, allowed)

    def _extra_flag_problems(self, found: Problems) -> None:
        """Each extra flag: its name's form, removed, typed or not vLLM's; a finite value."""
        for name, value in self.extra_flags.items():
            prop = f"extra_flags[{name!r}]"
            if name.startswith("-") or not _FLAG_NAME.match(name):
                allowed = "flag names are lower case with hyphens and no leading '--'"
                found.add(prop, value, allowed)
            elif name in REMOVED_FLAGS:
                found.add(prop, value, f"--{name} was {REMOVED_FLAGS[name]}")
            elif name in TYPED_FLAGS:
                found.add(prop, value, f"--{name} has a typed field; set that instead")
            else:
                found.extend(flag_problems(prop, name, value))
            if isinstance(value, float) and not math.isfinite(value):
                found.add(prop, value, "must be finite")

    def validate(self) -> VllmConfig:
        found = self.problems()
        if found:
            raise VllmConfigError(found)
        return self

    def with_changes(self, **changes: object) -> VllmConfig:
        return replace(self, **changes)  # type: ignore[arg-type]


def _negated(name: str, value: FlagValue) -> tuple[str, FlagValue]:
    """An extra flag set to ``False``: ``--no-<flag>`` where vLLM has that form, so the
    ``False`` reaches vLLM; any other ``False`` flag is left out (off unless given)."""
    if value is False and name in registry().negatable_flags:
        return f"no-{name}", True
    return name, value


def sagemaker_variable(flag: str) -> str:
    """``max-model-len`` -> ``SM_VLLM_MAX_MODEL_LEN`` (the container maps it back)."""
    return "SM_VLLM_" + flag.upper().replace("-", "_")


def _speculative_config(speculative: Speculation | None) -> str | None:
    """vLLM's ``--speculative-config`` JSON: the method's fields, its draft model as ``model``."""
    if speculative is None:
        return None
    fields = asdict(speculative)
    if "draft_model" in fields:
        fields["model"] = fields.pop("draft_model")
    return json.dumps(fields, separators=(",", ":"), sort_keys=True)


def _render(value: FlagValue) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)

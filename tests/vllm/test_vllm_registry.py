"""``vllm/data/vllm_registry.json`` against what the project uses and, when vLLM is
installed, against vLLM's own registries (the real artifact)."""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path

import pytest

import cdk_llm_serving.vllm as vllm_package
from cdk_llm_serving.planning.models import weight_formats
from cdk_llm_serving.vllm.config import TYPED_FLAGS, VllmConfig
from cdk_llm_serving.vllm.multinode import MULTINODE_FLAGS
from cdk_llm_serving.vllm.registry import ONLINE_QUANTIZATION, registry

DATA = Path(vllm_package.__file__).parent / "data" / "vllm_registry.json"


def test_the_file_names_its_vllm_version_and_sources():
    data = json.loads(DATA.read_text())
    assert data["vllm_version"] == "0.33"
    for key in ("flags", "tool_call_parsers", "reasoning_parsers", "quantization_methods"):
        assert data["sources"][key], key


def test_every_flag_and_name_the_library_writes_is_vllms():
    known = registry()
    assert set(TYPED_FLAGS) <= known.flags
    assert set(MULTINODE_FLAGS) <= known.flags
    assert not set(known.removed_flags) & known.flags
    methods = {fmt.vllm_quantization for fmt in weight_formats().values()} - {None}
    assert methods <= set(known.quantization_methods)
    assert ONLINE_QUANTIZATION <= set(known.quantization_methods)


def test_a_typo_in_a_parser_name_names_the_real_one():
    (problem,) = VllmConfig(model="m", tool_call_parser="hermes2").problems()
    assert problem.property == "tool_call_parser" and "closest: hermes" in problem.allowed


def _installed_vllm():
    if importlib.util.find_spec("vllm") is None:
        pytest.skip(
            "vLLM is not installed here (it needs a GPU build); CI images with vLLM run this"
        )
    return importlib.import_module("vllm")


def _first_module(*names: str):
    for name in names:
        if importlib.util.find_spec(name) is not None:
            return importlib.import_module(name)
    pytest.fail(f"none of {names} in the installed vLLM")


def test_the_file_matches_the_installed_vllm():
    vllm = _installed_vllm()
    known = registry()
    assert vllm.__version__.startswith(known.vllm_version + "."), vllm.__version__
    quantization = _first_module("vllm.model_executor.layers.quantization")
    assert set(known.quantization_methods) == set(quantization.QUANTIZATION_METHODS)
    tools = _first_module("vllm.tool_parsers", "vllm.entrypoints.openai.tool_parsers")
    assert set(known.tool_call_parsers) == set(tools.ToolParserManager.list_registered())
    reasoning = _first_module("vllm.reasoning")
    assert set(known.reasoning_parsers) == set(reasoning.ReasoningParserManager.list_registered())
    cli_args = _first_module("vllm.entrypoints.openai.cli_args")
    parser_module = _first_module("vllm.utils.argparse_utils", "vllm.utils")
    parser = cli_args.make_arg_parser(parser_module.FlexibleArgumentParser())
    flags = {
        option[2:]
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    assert known.flags <= flags | set(MULTINODE_FLAGS), sorted(known.flags - flags)
    assert flags <= known.flags, sorted(flags - known.flags)

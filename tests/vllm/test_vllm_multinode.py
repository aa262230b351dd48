"""The multi-node start: data-parallel + expert-parallel layout, API key file, vLLM's refusals."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
import yaml

from cdk_llm_serving.vllm import MtpSpeculation, VllmConfig
from cdk_llm_serving.vllm.config import VllmConfigError
from cdk_llm_serving.vllm.hardware import check_on_hardware, speculation_with_pipeline_note
from cdk_llm_serving.vllm.multinode import (
    PodCommand,
    leader_command,
    with_api_key_file,
    worker_command,
)
from tests.support.start_script import kubernetes_expand, run_in_container

DP_EP = VllmConfig(
    model="/models/m",
    tensor_parallel_size=8,
    data_parallel_size=2,
    enable_expert_parallel=True,
    speculative=MtpSpeculation(),
)


def value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_data_parallel_layout_follows_vllms_multi_node_example():
    leader, worker = leader_command(DP_EP, 2), worker_command(DP_EP, 2)
    for args in (leader.args, worker.args):
        assert value(args, "--data-parallel-size") == "2"
        assert value(args, "--data-parallel-size-local") == "1"
        assert value(args, "--data-parallel-address") == "$(LWS_LEADER_ADDRESS)"
        assert value(args, "--data-parallel-rpc-port") == "13345"
        assert "--enable-expert-parallel" in args and "--pipeline-parallel-size" not in args
        assert "--nnodes" not in args and "--master-addr" not in args
    assert "--headless" not in leader.args and value(leader.args, "--port") == "8000"
    assert "--headless" in worker.args
    assert value(worker.args, "--data-parallel-start-rank") == "$(LWS_WORKER_INDEX)"


def test_data_parallel_needs_one_rank_per_node_and_native_start():
    with pytest.raises(VllmConfigError, match="must equal the 2 nodes"):
        leader_command(DP_EP.with_changes(data_parallel_size=4), 2)
    with pytest.raises(VllmConfigError, match="starts natively"):
        worker_command(DP_EP, 2, "ray")


def test_api_keys_reach_vllm_as_its_config_file_not_its_command_line():
    wrapped = with_api_key_file(leader_command(DP_EP, 2), "/mnt/api-key/key")
    assert wrapped.command == ["/bin/sh", "-c"]
    script, arg0, *rest = wrapped.args
    assert arg0 == "vllm" and rest == leader_command(DP_EP, 2).args
    assert script.startswith(
        'set -e; u="$$(umask)"; umask 077; f=/mnt/api-key/key; c=/dev/shm/vllm-api-keys.yaml;'
    )
    assert script.endswith('exec vllm "$$@" --config /dev/shm/vllm-api-keys.yaml')
    # Every $ is doubled: Kubernetes' escape, so the kubelet expands nothing of the script.
    assert re.search(r"(?<!\$)\$(?!\$)", script.replace("$$", "")) is None
    ray = with_api_key_file(leader_command(VllmConfig(model="m"), 2, "ray"), "/k")
    assert ray.args[0].startswith('set -e; u="$$(umask)"; umask 077; f=/k;')
    assert "ray start --head" in ray.args[0]
    assert ray.args[0].endswith(
        "--distributed-executor-backend ray --config /dev/shm/vllm-api-keys.yaml"
    )


def start_with_keys(tmp_path: Path, content: bytes, command: PodCommand | None = None) -> str:
    key, config = tmp_path / "api-key", tmp_path / "keys.yaml"
    key.write_bytes(content)
    wrapped = with_api_key_file(command or leader_command(DP_EP, 2), str(key), str(config))
    return run_in_container(wrapped.command, wrapped.args, tmp_path)


def keys_vllm_reads(tmp_path: Path) -> list[str]:
    """The keys as vLLM reads its ``--config`` file: ``yaml.safe_load``, the ``api-key`` list
    becoming ``--api-key k1 k2 ...`` (vLLM 0.33.0 ``vllm/utils/argparse_utils.py``,
    ``load_config_file``)."""
    config = tmp_path / "keys.yaml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    loaded = yaml.safe_load(config.read_text())
    assert list(loaded) == ["api-key"] and all(isinstance(k, str) for k in loaded["api-key"])
    return list(loaded["api-key"])


def test_a_plain_one_line_secret_is_one_key_and_every_argument_is_kept(tmp_path):
    out = start_with_keys(tmp_path, b"s3cr3t$(not-expanded)'quoted'\\n")
    assert out.startswith("rc=0\n")
    assert keys_vllm_reads(tmp_path) == ["s3cr3t$(not-expanded)'quoted'\\n"]
    expected = [
        kubernetes_expand(a, {"LWS_LEADER_ADDRESS": "ds-0.ds.inference"})
        for a in [*leader_command(DP_EP, 2).args, "--config", str(tmp_path / "keys.yaml")]
    ]
    lines = out.splitlines()
    assert lines[1 : 1 + len(expected)] == [f"arg={a}" for a in expected]
    assert "arg=ds-0.ds.inference" in lines and "s3cr3t" not in "".join(lines[: len(expected) + 1])


def test_several_keys_one_per_line_all_reach_vllm(tmp_path):
    content = b"old-key\r\n\n \t \nnew-key\nthird\"'#:[x]"
    assert start_with_keys(tmp_path, content).startswith("rc=0\n")
    assert keys_vllm_reads(tmp_path) == ["old-key", "new-key", "third\"'#:[x]"]


def test_vllm_starts_with_the_container_s_umask_not_the_key_file_s(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    out = start_with_keys(tmp_path, b"k1\n")
    assert out.startswith("rc=0\n") and f"\numask={umask:04o}\n" in out
    assert umask != 0o077  # the key file's: the test would not tell them apart


def test_the_ray_start_gets_the_keys_too(tmp_path):
    ray = leader_command(VllmConfig(model="m"), 2, "ray")
    out = start_with_keys(tmp_path, b"k1\nk2\n", ray)
    assert out.startswith("rc=0\narg=start\narg=--head\n") and "arg=--config" in out
    assert keys_vllm_reads(tmp_path) == ["k1", "k2"]


@pytest.mark.parametrize(
    "content, error",
    [
        (None, "missing or empty"),
        (b"", "missing or empty"),
        (b"\n\r\n\n", "no API key"),
        (b"good\n--api-key\n", "starts with -"),
        (b"good\n  spaced-key\n", "holds white space"),
        (b"good\nnew key\n", "holds white space"),
    ],
)
def test_the_start_fails_without_a_usable_key(tmp_path, content, error):
    key = tmp_path / "api-key"
    if content is not None:
        key.write_bytes(content)
    wrapped = with_api_key_file(leader_command(DP_EP, 2), str(key), str(tmp_path / "k.yaml"))
    out = run_in_container(wrapped.command, wrapped.args, tmp_path)
    assert out.startswith("rc=1\nerror: ") and error in out and "\narg=" not in out


@pytest.mark.parametrize("flag", ["api-key", "config"])
def test_the_keys_cannot_be_passed_as_flags(flag):
    with pytest.raises(VllmConfigError, match=rf"extra_flags\['{flag}'\]"):
        leader_command(DP_EP.with_changes(extra_flags={flag: "secret"}), 2)


@pytest.mark.parametrize(
    "flags, changes, prop",
    [
        ({"data-parallel-size-local": 4}, {}, "extra_flags['data-parallel-size-local']"),
        ({"enable-eplb": True}, {"enable_expert_parallel": False}, "extra_flags['enable-eplb']"),
        (
            {"prefill-context-parallel-size": 2},
            {},
            "extra_flags['prefill-context-parallel-size']",
        ),
        (
            {"enable-elastic-ep": True},
            {"data_parallel_size": None, "pipeline_parallel_size": 2},
            "extra_flags['enable-elastic-ep']",
        ),
    ],
)
def test_check_on_hardware_refuses_what_vllm_refuses(flags, changes, prop):
    config = DP_EP.with_changes(extra_flags=flags, **changes)
    check = check_on_hardware(config, "ml.p6-b200.48xlarge", model="reference-2.4t-a95b", nodes=2)
    assert [p.property for p in check.problems] == [prop]
    assert (
        check_on_hardware(
            DP_EP, "ml.p6-b200.48xlarge", model="reference-2.4t-a95b", nodes=2
        ).problems
        == ()
    )


def test_speculation_with_pipeline_parallelism_is_flagged():
    pipeline = VllmConfig(
        model="m", tensor_parallel_size=8, pipeline_parallel_size=2, speculative=MtpSpeculation()
    )
    assert "mtp speculative decoding with pipeline_parallel_size=2" in (
        speculation_with_pipeline_note(pipeline) or ""
    )
    assert speculation_with_pipeline_note(DP_EP) is None
    assert speculation_with_pipeline_note(pipeline.with_changes(speculative=None)) is None


def test_a_root_path_of_the_users_is_refused():
    """vLLM's key check strips the root path as a plain prefix, its router only at a "/": a
    root path of "/" would serve /v1 without the key (vllm authenticate.py, removeprefix)."""
    with pytest.raises(VllmConfigError, match=r"extra_flags\['root-path'\]"):
        leader_command(DP_EP.with_changes(extra_flags={"root-path": "/"}), 2)

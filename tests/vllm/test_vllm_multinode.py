"""The multi-node start: data-parallel + expert-parallel layout, API key file, vLLM's refusals."""

from __future__ import annotations

import pytest

from cdk_llm_serving.vllm import MtpSpeculation, VllmConfig
from cdk_llm_serving.vllm.config import VllmConfigError
from cdk_llm_serving.vllm.hardware import check_on_hardware, speculation_with_pipeline_note
from cdk_llm_serving.vllm.multinode import (
    leader_command,
    with_api_key_file,
    worker_command,
)

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


def test_api_key_is_read_from_the_file_at_start():
    wrapped = with_api_key_file(leader_command(DP_EP, 2), "/mnt/api-key/key")
    assert wrapped.command == ["/bin/sh", "-c"]
    script, arg0, *rest = wrapped.args
    assert arg0 == "vllm" and rest == leader_command(DP_EP, 2).args
    assert script.startswith("set -e; test -s /mnt/api-key/key;")
    # $$ is Kubernetes' escape: the shell sees $(cat ...), Kubernetes expands nothing.
    assert 'VLLM_API_KEY="$$(cat /mnt/api-key/key)"; export VLLM_API_KEY' in script
    assert script.endswith('exec vllm "$@"')
    ray = with_api_key_file(leader_command(VllmConfig(model="m"), 2, "ray"), "/k")
    assert ray.args[0].startswith("set -e; test -s /k;") and "ray start --head" in ray.args[0]


def test_the_key_cannot_be_passed_as_a_flag():
    with pytest.raises(VllmConfigError, match="api-key"):
        leader_command(DP_EP.with_changes(extra_flags={"api-key": "secret"}), 2)


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
    assert [p[0] for p in check.problems] == [prop]
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

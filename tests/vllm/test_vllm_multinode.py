"""The multi-node start: data-parallel + expert-parallel layout, API key file, vLLM's refusals."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

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


def kubernetes_expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of ``command``/``args``: ``$$`` is a literal ``$``, ``$(VAR)``
    the container's variable (left as written when undefined) (Kubernetes API reference,
    Container ``args``: "Double $$ are reduced to a single $, which allows for escaping
    the $(VAR_NAME) syntax")."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
        text,
    )


def run_in_container(command: list[str], args: list[str], tmp_path: Path) -> str:
    """Run the pod's start the way the kubelet would, with a ``vllm`` that echoes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "vllm"
    fake.write_text('#!/bin/sh\necho "key=$VLLM_API_KEY"\nprintf "arg=%s\\n" "$@"\n')
    fake.chmod(0o755)
    env = {"LWS_LEADER_ADDRESS": "ds-0.ds.inference", "PATH": f"{bin_dir}:/usr/bin:/bin"}
    argv = [kubernetes_expand(part, env) for part in [*command, *args]]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    return f"rc={done.returncode}\n{done.stdout}"


def test_the_wrapped_start_exports_the_key_and_keeps_every_argument(tmp_path):
    key = tmp_path / "api-key"
    key.write_text("s3cr3t $(not-expanded) 'quoted'")
    wrapped = with_api_key_file(leader_command(DP_EP, 2), str(key))
    out = run_in_container(wrapped.command, wrapped.args, tmp_path)
    assert out.startswith("rc=0\nkey=s3cr3t $(not-expanded) 'quoted'\n")
    expected = [
        kubernetes_expand(a, {"LWS_LEADER_ADDRESS": "ds-0.ds.inference"})
        for a in leader_command(DP_EP, 2).args
    ]
    assert out.splitlines()[2:] == [f"arg={a}" for a in expected]
    assert "arg=ds-0.ds.inference" in out.splitlines()


def test_the_wrapped_start_fails_without_the_key_file(tmp_path):
    wrapped = with_api_key_file(leader_command(DP_EP, 2), str(tmp_path / "missing"))
    out = run_in_container(wrapped.command, wrapped.args, tmp_path)
    assert out.startswith("rc=1\n") and "key=" not in out
    (tmp_path / "empty").write_text("")
    wrapped = with_api_key_file(leader_command(DP_EP, 2), str(tmp_path / "empty"))
    assert run_in_container(wrapped.command, wrapped.args, tmp_path).startswith("rc=1\n")


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

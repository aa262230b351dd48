"""Each pool copy's ``SM_VLLM_MAX_NUM_SEQS`` and its autoscaling weight are one value.

The value: the user's ``VllmConfig.max_num_seqs``, else the planner's batch for that copy and
instance type, else vLLM's own default for the device (checked against vLLM's
``EngineArgs.get_batch_defaults`` when the vLLM venv is there). A pool whose ``max_concurrency``
(what autoscaling counts one instance for) exceeds what its copy batches is refused.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from aws_cdk.assertions import Annotations, Match

from cdk_llm_serving import ConfigurationError, InstancePool, ServingModel
from cdk_llm_serving.model_sources import ContainerImage, ModelData
from cdk_llm_serving.planning.catalog import default_catalog
from cdk_llm_serving.planning.sizing import ModelSizing
from cdk_llm_serving.sagemaker.engine_batch import (
    FROM_CONFIG,
    FROM_PLANNER,
    FROM_VLLM_DEFAULT,
    choose_batch,
    vllm_default_max_num_seqs,
)
from cdk_llm_serving.sagemaker.vllm_pool_endpoint import VllmPool
from tests.support.builders import BASE, IMAGE, endpoint, new_stack, pool_endpoint

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = ROOT / ".venv" / "vllm" / "bin" / "python"

#: Calls vLLM's own default with a device of the given name and memory (its platform replaced).
_PROBE = textwrap.dedent(
    """
    import json, sys
    from types import SimpleNamespace
    import vllm.engine.arg_utils as arg_utils
    from vllm.usage.usage_lib import UsageContext
    found = {}
    for name, gib in json.loads(sys.argv[1]):
        arg_utils.current_platform = SimpleNamespace(
            get_device_total_memory=lambda gib=gib: int(gib * 2**30),
            get_device_name=lambda name=name: name,
            is_tpu=lambda: False,
            is_cpu=lambda: False,
        )
        _, seqs = arg_utils.EngineArgs.get_batch_defaults(world_size=1)
        found[name] = seqs[UsageContext.OPENAI_API_SERVER]
    print(json.dumps(found))
    """
)


def env_of(serving, index: int) -> dict[str, str]:
    model = serving.endpoint.pools[index].model or serving.endpoint.model
    return dict(model.environment)


def test_the_default_is_vllms_own_for_every_gpu_of_the_catalog():
    if not VLLM_PYTHON.exists():
        pytest.skip("no vLLM venv at .venv/vllm (ln -s /work/main/.venv/vllm .venv/vllm)")
    gpus = {f"NVIDIA {i.gpu.name}": i for i in default_catalog() if i.gpus > 0}
    devices = [[name, i.gpu.memory_gib] for name, i in gpus.items()]
    result = subprocess.run(
        [str(VLLM_PYTHON), "-c", _PROBE, json.dumps(devices)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    vllms = json.loads(result.stdout.strip().splitlines()[-1])
    ours = {name: vllm_default_max_num_seqs(i) for name, i in gpus.items()}
    assert ours == vllms
    assert {ours["NVIDIA H100"], ours["NVIDIA B200"], ours["NVIDIA L40S"]} == {1024, 256}


def test_a_p5_copy_runs_and_is_weighed_at_the_planners_batch_not_256():
    serving = endpoint(new_stack(), ["ml.p5.48xlarge"])
    (batch,) = serving.pool_batches
    assert batch.source == FROM_PLANNER and batch.max_num_seqs > 256
    assert env_of(serving, 0)["SM_VLLM_MAX_NUM_SEQS"] == str(batch.max_num_seqs)
    assert serving.endpoint.pool_capacities() == [float(batch.concurrency)]


@pytest.mark.parametrize(
    "pools",
    [
        ["ml.g6e.12xlarge", "ml.g6.12xlarge", "ml.g6e.2xlarge"],
        ["ml.p5.48xlarge", VllmPool("ml.g6e.48xlarge", goal="throughput")],
        ["ml.p6-b200.48xlarge", "ml.p4d.24xlarge"],
    ],
    ids=["g6e-g6-small", "p5-g6e", "b200-a100"],
)
def test_the_flag_and_the_weight_agree_on_every_pool(pools):
    serving = endpoint(new_stack(), pools)
    capacities = serving.endpoint.pool_capacities()
    for index, capacity in enumerate(capacities):
        env = env_of(serving, index)
        engines = int(env.get("SM_VLLM_DATA_PARALLEL_SIZE", "1"))
        assert capacity == int(env["SM_VLLM_MAX_NUM_SEQS"]) * engines
        assert capacity == serving.pool_batches[index].concurrency


def test_the_users_max_num_seqs_wins_for_the_flag_and_the_weight():
    serving = endpoint(
        new_stack(),
        ["ml.p5.48xlarge", "ml.g6e.12xlarge"],
        config=BASE.with_changes(max_num_seqs=48),
    )
    assert [b.source for b in serving.pool_batches] == [FROM_CONFIG, FROM_CONFIG]
    assert [env_of(serving, i)["SM_VLLM_MAX_NUM_SEQS"] for i in (0, 1)] == ["48", "48"]
    assert serving.endpoint.pool_capacities() == [48.0, 48.0]


def test_without_the_planners_batch_vllms_default_for_the_device():
    catalog = default_catalog()
    sizing = ModelSizing("gpt-oss-20b", "bf16", max_context=8192)
    plan = sizing.plan_on("ml.p5.48xlarge", max_nodes=1)  # the smallest layout: no batch
    assert plan.performance is None
    chosen = choose_batch(None, plan, catalog.get("ml.p5.48xlarge"))
    assert (chosen.max_num_seqs, chosen.source) == (1024, FROM_VLLM_DEFAULT)
    small = choose_batch(
        None, sizing.plan_on("ml.g6e.12xlarge", max_nodes=1), catalog.get("ml.g6e.12xlarge")
    )
    assert small.max_num_seqs == 256


def test_a_sized_model_without_the_flag_is_capped_at_the_devices_default():
    """A ServingModel with sizing but no SM_VLLM_MAX_NUM_SEQS: its KV holds more than 256
    short sequences per engine on an H100, and vLLM's default there is 1024, not 256."""
    stack = new_stack()
    model = ServingModel(
        stack,
        "Model",
        image=ContainerImage.from_ecr_uri(IMAGE),
        model_data=ModelData.from_s3_uri("s3://weights-bucket/gpt-oss-20b/"),
        sizing=ModelSizing("gpt-oss-20b", "mxfp4", max_context=1024),
    )
    endpoint_ = pool_endpoint(stack, model=model, pools=[InstancePool("ml.p5.48xlarge")])
    (fit,) = endpoint_.pool_plans
    (capacity,) = endpoint_.pool_capacities()
    engines = fit.plan.data_parallel
    assert capacity == min(fit.plan.sequences_at_max_context, 1024 * engines)
    assert capacity > 256 * engines


def test_pools_sharing_a_copy_run_its_smallest_batch_and_say_so():
    stack = new_stack()
    serving = endpoint(stack, ["ml.p5.48xlarge", "ml.g6e.48xlarge"])
    assert len(serving.models) == 1, "one configuration, one copy"
    (model,) = serving.models.values()
    p5, g6e = serving.pool_batches
    assert p5.max_num_seqs == g6e.max_num_seqs == int(model.environment["SM_VLLM_MAX_NUM_SEQS"])
    assert serving.endpoint.pool_capacities() == [float(p5.concurrency), float(g6e.concurrency)]
    warnings = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp(".*ml.p5.48xlarge shares the copy.*sharedCopyBatch.*")
    )
    assert warnings


def test_max_concurrency_above_what_the_copy_batches_is_refused():
    with pytest.raises(ConfigurationError) as raised:
        endpoint(
            new_stack(),
            [
                VllmPool("ml.g6e.12xlarge", max_concurrency=300),
                VllmPool("ml.g6e.2xlarge", max_concurrency=8),
            ],
            config=BASE.with_changes(max_num_seqs=64),
        )
    text = str(raised.value)
    assert "pools[0].max_concurrency = 300" in text and "at most 64" in text
    assert "pools[1]" not in text
    accepted = endpoint(
        new_stack(),
        [VllmPool("ml.g6e.12xlarge", max_concurrency=64)],
        config=BASE.with_changes(max_num_seqs=64),
    )
    assert accepted.endpoint.pool_capacities() == [64.0]

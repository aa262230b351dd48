"""How many sequences one vLLM engine of a pool's copy batches: the flag and the weight, one value.

A copy's ``SM_VLLM_MAX_NUM_SEQS`` (vLLM's ``--max-num-seqs``) times its data-parallel engines
is also its pool's autoscaling weight (``InstancePoolEndpoint.pool_capacities``).
``choose_batch`` takes the user's ``VllmConfig.max_num_seqs``, else the planner's batch for the
copy on that type, else vLLM's default for the device; ``batch_of_environment`` reads the weight
back from the variables the container receives (docs/design/pool-endpoints.md, "Engine batch").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..planning.catalog import InstanceSpec
from ..planning.objective import default_max_num_seqs
from ..planning.sizing import Plan

#: AWS's vLLM container reads ``SM_VLLM_<FLAG>`` as ``--<flag>`` (its ``sagemaker_args.py``).
MAX_NUM_SEQS_VARIABLE = "SM_VLLM_MAX_NUM_SEQS"
DATA_PARALLEL_VARIABLE = "SM_VLLM_DATA_PARALLEL_SIZE"

#: Where each figure came from (``EngineBatch.source``).
FROM_CONFIG = "VllmConfig.max_num_seqs"
FROM_PLANNER = "the planner's batch"
FROM_VLLM_DEFAULT = "vLLM's default for the device"


def vllm_default_max_num_seqs(instance: InstanceSpec) -> int:
    """vLLM's ``--max-num-seqs`` when none is given, for the OpenAI server on ``instance``'s GPU
    (vLLM 0.32.0 ``vllm/engine/arg_utils.py`` ``EngineArgs.get_batch_defaults``; the planner's
    ``planning.objective.default_max_num_seqs``, under the name the SageMaker path documents)."""
    return default_max_num_seqs(instance)


@dataclass(frozen=True)
class EngineBatch:
    """The batch of one instance: ``max_num_seqs`` per engine, ``engines`` data-parallel engines."""

    max_num_seqs: int
    engines: int
    #: ``FROM_CONFIG``, ``FROM_PLANNER``, ``FROM_VLLM_DEFAULT`` or the environment variable read.
    source: str

    @property
    def concurrency(self) -> int:
        """Sequences the instance runs at once: the pool's autoscaling weight."""
        return self.max_num_seqs * self.engines


def choose_batch(explicit: int | None, plan: Plan, instance: InstanceSpec) -> EngineBatch:
    """The batch of a copy planned as ``plan`` on ``instance`` (the order in the module docstring)."""
    engines = plan.data_parallel
    if explicit is not None:
        return EngineBatch(explicit, engines, FROM_CONFIG)
    performance = plan.performance
    if performance is not None:
        return EngineBatch(int(performance.max_num_seqs), engines, FROM_PLANNER)
    return EngineBatch(vllm_default_max_num_seqs(instance), engines, FROM_VLLM_DEFAULT)


def batch_of_environment(environment: Mapping[str, str]) -> EngineBatch | None:
    """The batch a container with this environment runs, when it sets ``SM_VLLM_MAX_NUM_SEQS``.

    Engines: ``SM_VLLM_DATA_PARALLEL_SIZE`` (vLLM's ``--data-parallel-size``, default 1).
    ``None`` when the variable is absent or not a whole number (the container checks refuse
    such a value elsewhere).
    """
    seqs = environment.get(MAX_NUM_SEQS_VARIABLE)
    engines = environment.get(DATA_PARALLEL_VARIABLE, "1")
    if seqs is None or not seqs.strip().isdigit() or not engines.strip().isdigit():
        return None
    return EngineBatch(int(seqs), max(1, int(engines)), MAX_NUM_SEQS_VARIABLE)

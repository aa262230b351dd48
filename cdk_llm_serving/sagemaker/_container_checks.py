"""Checks of what a model's container will do with its environment and its pools' hardware.

Things the SageMaker vLLM container or vLLM would refuse only once instances start, found
at synth time: ``SM_VLLM_*`` variables vLLM refuses (``vllm.registry``), a Hugging Face Hub
id the container cannot download with network isolation on, a quantization that does not
match the declared weights, more parallel ranks than a pool's GPUs, a CUDA image on a pool
without NVIDIA GPUs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..errors import Problems
from ..planning.catalog import Catalog
from ..planning.instance_types import InstanceType
from ..planning.sizing import ModelSizing
from ..vllm.registry import quantization_problems, sagemaker_environment_problems
from ._instance_facts import instance_spec

#: ``org/model`` as the Hugging Face Hub names repositories (no scheme, no leading '/').
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
#: Variables through which a container is told which model to load.
_MODEL_VARIABLES = ("SM_VLLM_MODEL", "HF_MODEL_ID")
#: Tags of AWS's CUDA deep-learning containers (``server-sagemaker-cuda-v1``, ``...-cu130-...``).
_CUDA_IMAGE = re.compile(r"cuda|[-_]cu\d{3}\b", re.IGNORECASE)
_PARALLEL_VARIABLES = (
    "SM_VLLM_TENSOR_PARALLEL_SIZE",
    "SM_VLLM_PIPELINE_PARALLEL_SIZE",
    "SM_VLLM_DATA_PARALLEL_SIZE",
)


def check_container_environment(
    problems: Problems, env: Mapping[str, str], network_isolation: bool, sizing: ModelSizing | None
) -> None:
    """The environment of one ``ServingModel``."""
    problems.extend(sagemaker_environment_problems(env))
    for variable in _MODEL_VARIABLES:
        model = env.get(variable)
        if network_isolation and model is not None and _HUB_ID.fullmatch(model):
            problems.add(
                f"environment[{variable!r}]",
                model,
                "a Hugging Face Hub id needs the network, but network_isolation is on: put the "
                "weights in S3 (model_data) and point the variable at /opt/ml/model, or set "
                "network_isolation=False",
            )
    quantization = env.get("SM_VLLM_QUANTIZATION")
    if sizing is not None and quantization is not None:
        fmt = sizing.weight_format
        problems.extend(
            quantization_problems(
                "environment['SM_VLLM_QUANTIZATION']", quantization, fmt.vllm_quantization, fmt.name
            )
        )


def check_pool_hardware(
    problems: Problems,
    index: int,
    instance_type: InstanceType | str,
    image_uri: str,
    env: Mapping[str, str],
    catalog: Catalog,
) -> None:
    """Pool ``index`` runs its model's image and parallel layout: CUDA needs NVIDIA GPUs,
    the ranks must fit its GPUs."""
    if not isinstance(instance_type, InstanceType) or not instance_type.sagemaker_hosting:
        return  # reported by InstancePool.validate (or a deploy-time token)
    if _CUDA_IMAGE.search(image_uri) and not instance_type.nvidia_gpu:
        problems.add(
            f"pools[{index}].instance_type",
            instance_type.name,
            f"has no NVIDIA GPU, but the model's image is a CUDA image ({image_uri}): "
            "choose an ml.g* or ml.p* type, or an image built for this hardware",
        )
    _check_ranks(problems, index, instance_type, env, catalog)


def _check_ranks(
    problems: Problems,
    index: int,
    instance_type: InstanceType,
    env: Mapping[str, str],
    catalog: Catalog,
) -> None:
    ranks = 1
    for variable in _PARALLEL_VARIABLES:
        value = env.get(variable)
        if value is None:
            continue
        if not value.isdigit() or int(value) < 1:
            problems.add(
                f"pools[{index}].model.environment[{variable!r}]",
                value,
                "must be a positive integer",
            )
            return
        ranks *= int(value)
    spec = instance_spec(instance_type, catalog)
    if spec is not None and ranks > spec.gpus:
        problems.add(
            f"pools[{index}].model.environment",
            {v: env[v] for v in _PARALLEL_VARIABLES if v in env},
            f"{instance_type} has {spec.gpus} GPUs: tensor x pipeline x data parallel ({ranks}) "
            f"must be at most {spec.gpus}",
        )

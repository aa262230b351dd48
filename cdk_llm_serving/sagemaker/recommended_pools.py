"""The models and pools of a pool file written by ``recommend to-pools``."""

from __future__ import annotations

from pathlib import Path

from constructs import Construct

from ..errors import Problems
from ..model_sources import ContainerImage, ModelData
from ..planning.pool_file import PoolFile, PoolFileError, RecommendedPool, copy_served_name
from .instance_pool import InstancePool
from .served_names import VLLM_CONFIG_VARIABLE
from .serving_model import VLLM_SERVED_MODEL_NAME_VARIABLE, ServingModel


def pools_from_recommendation(
    holder: Construct, path: str | Path, client_model_name: str | None = None
) -> tuple[ServingModel, list[InstancePool]]:
    """Pools in the file's order, each with its recommended deployment and measured capacity.

    Pools whose deployments are identical (image, weights, environment) share one model,
    created under ``holder``; the first pool's model is the variant's, the others become
    ``ModelNameOverride``. Each model serves ``client_model_name`` (default: the job's name)
    after a copy name (``<client>-<instance type>`` of its first pool), unless the
    recommended environment names its own served model or vLLM config.
    """
    problems = Problems(f"InstancePoolEndpoint.build_from_recommendation '{holder.node.path}'")
    try:
        pool_file = PoolFile.load(path)
    except PoolFileError as error:
        problems.absorb(error, "path")
        problems.raise_if_any()
        raise
    for index, pool in enumerate(pool_file.pools):
        if not pool.image_uri:
            problems.add(
                f"pools[{index}].image_uri",
                None,
                f"{pool.instance_type}: the recommendation names no image; deploy its model package {pool.model_package_arn} another way",
            )
    problems.raise_if_any()

    client = client_model_name or pool_file.job
    models: dict[tuple[object, ...], ServingModel] = {}
    pool_models: list[ServingModel] = []
    for pool in pool_file.pools:
        key = (pool.image_uri, pool.model_data_uri, tuple(sorted(pool.environment.items())))
        if key not in models:
            served, client_name = _names(pool, client)
            models[key] = ServingModel(
                holder,
                f"Model{len(models) + 1}",
                image=ContainerImage.from_ecr_uri(pool.image_uri or ""),
                model_data=ModelData.from_s3_uri(pool.model_data_uri)
                if pool.model_data_uri
                else None,
                environment=pool.environment,
                served_model_name=served,
                client_model_name=client_name,
            )
        pool_models.append(models[key])
    primary = pool_models[0]
    pools = [
        InstancePool(
            pool.instance_type,
            model=None if model is primary else model,
            max_concurrency=pool.max_concurrency,
        )
        for pool, model in zip(pool_file.pools, pool_models, strict=True)
    ]
    return primary, pools


def _names(pool: RecommendedPool, client: str) -> tuple[str | None, str | None]:
    """(copy name, client name) of one recommended deployment; none where it names its own."""
    if {VLLM_SERVED_MODEL_NAME_VARIABLE, VLLM_CONFIG_VARIABLE} & set(pool.environment):
        return None, None
    if not pool.model_data_uri:  # no weights prefix for the config file: one name
        return client, None
    return copy_served_name(client, pool.instance_type), client

"""The models and pools of a pool file written by ``recommend to-pools``."""

from __future__ import annotations

from pathlib import Path

from constructs import Construct

from ..errors import Problems
from ..model_sources import ContainerImage, ModelData
from ..planning.pool_file import PoolFile, PoolFileError
from .instance_pool import InstancePool
from .serving_model import ServingModel


def pools_from_recommendation(
    holder: Construct, path: str | Path
) -> tuple[ServingModel, list[InstancePool]]:
    """Pools in the file's order, each with its recommended deployment and measured capacity.

    Pools whose deployments are identical (image, weights, environment) share one model,
    created under ``holder``; the first pool's model is the variant's, the others become
    ``ModelNameOverride``.
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

    models: dict[tuple[object, ...], ServingModel] = {}
    pool_models: list[ServingModel] = []
    for pool in pool_file.pools:
        key = (pool.image_uri, pool.model_data_uri, tuple(sorted(pool.environment.items())))
        if key not in models:
            models[key] = ServingModel(
                holder,
                f"Model{len(models) + 1}",
                image=ContainerImage.from_ecr_uri(pool.image_uri or ""),
                model_data=ModelData.from_s3_uri(pool.model_data_uri)
                if pool.model_data_uri
                else None,
                environment=pool.environment,
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

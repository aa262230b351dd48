"""Checks, with the planner, that each instance pool can hold the model it serves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Annotations
from constructs import IConstruct

from ..errors import Problems
from ..planning.catalog import Catalog, default_catalog
from ..planning.cold_start import ColdStart, estimate_cold_start
from ..planning.instance_types import InstanceType
from ..planning.sizing import Plan, PlanningError
from .instance_pool import InstancePool
from .serving_model import ServingModel


@dataclass(frozen=True)
class PoolFit:
    """The planner's layout of one pool's model on that pool's instance type."""

    pool_index: int
    plan: Plan
    cold_start: ColdStart


def plan_one_instance(
    model: ServingModel, instance_type: InstanceType | str, catalog: Catalog
) -> tuple[Plan | None, str | None]:
    """The model's layout on one instance of ``instance_type`` (SageMaker hosts a copy per
    instance), or why it cannot fit. ``model.sizing`` must be set."""
    assert model.sizing is not None
    try:
        return model.sizing.plan_on(instance_type, max_nodes=1, catalog=catalog), None
    except PlanningError as error:
        return None, f"cannot hold model {model.node.id!r}: {error}"


def check_pools_fit(
    scope: IConstruct,
    problems: Problems,
    pools: Sequence[InstancePool],
    default_model: ServingModel | None,
    *,
    catalog: Catalog | None = None,
) -> list[PoolFit]:
    """Plan every pool whose model declares its sizing; an endpoint instance is one node.

    A pool that cannot hold its model becomes a problem carrying the planner's
    explanation; a format without native kernels on the pool's GPU becomes a warning.
    """
    catalog = catalog or default_catalog()
    fits: list[PoolFit] = []
    for index, pool in enumerate(pools):
        model = pool.model or default_model
        if model is None or model.sizing is None:
            continue
        if pool.instance_type not in catalog:
            # The one policy for a hosting type the catalog does not record: accepted, its
            # fit unchecked and said so (``instance_pool.hosting_instance_type``).
            Annotations.of(scope).add_warning_v2(
                "cdk-llm-serving:poolNotInCatalog",
                f"pools[{index}] {pool.instance_type} is not in the planner's catalog: whether it holds {model.node.id} is unchecked",
            )
            continue
        plan, refusal = plan_one_instance(model, pool.instance_type, catalog)
        if plan is None:
            problems.add(
                f"pools[{index}]", str(pool.instance_type), refusal or "cannot hold the model"
            )
            continue
        for warning in plan.warnings:
            Annotations.of(scope).add_warning_v2(
                "cdk-llm-serving:nonNativeWeightFormat",
                f"pools[{index}] {pool.instance_type}: {warning}",
            )
        fits.append(
            PoolFit(index, plan, estimate_cold_start(plan.weight_bytes, "s3_download", nodes=1))
        )
    return fits

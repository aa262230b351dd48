"""Checks of an endpoint's pools against each other and against the endpoint's options."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .._cdk.service_limits import limits
from .._cdk.validation import is_unresolved
from ..errors import Problems
from ..planning.catalog import Catalog
from ..planning.instance_storage import has_local_storage
from ._container_checks import check_pool_hardware
from .endpoint_options import PoolEndpointProps
from .instance_pool import InstancePool
from .serving_model import ServingModel


def check_pools(problems: Problems, pools: Sequence[InstancePool]) -> None:
    """1-5 pools (botocore's limits), each valid, no instance type twice."""
    pool_limits = limits("ProductionVariant", "InstancePools")
    low, high = pool_limits.minimum or 1, pool_limits.maximum or 5
    if not low <= len(pools) <= high:
        types = [str(pool.instance_type) for pool in pools]
        problems.add("pools", types, f"must list {low} to {high} instance pools")
    seen: dict[str, int] = {}
    for index, pool in enumerate(pools):
        pool.validate(problems, f"pools[{index}]")
        first = seen.setdefault(pool.instance_type, index)
        if first != index:
            problems.add(
                f"pools[{index}].instance_type",
                str(pool.instance_type),
                f"already used by pools[{first}]; each pool needs its own instance type",
            )


def check_component_mode(
    problems: Problems, pools: Sequence[InstancePool], props: PoolEndpointProps, *, hosts: bool
) -> None:
    """Inference-component endpoints host no model of their own and set no start-up timeouts
    (each component sets its own); managed scaling is theirs."""
    managed = props.get("managed_instance_count")
    if hosts:
        for index, pool in enumerate(pools):
            if pool.model is not None:
                problems.add(
                    f"pools[{index}].model",
                    pool.model.node.id,
                    "an endpoint for inference components hosts no models of its own; give the model to InferenceComponentOnPools",
                )
        startup = {
            "container_startup_timeout": props.get("container_startup_timeout"),
            "model_data_download_timeout": props.get("model_data_download_timeout"),
        }
        for name, timeout in startup.items():
            if timeout is not None:
                problems.add(
                    name,
                    timeout.to_human_string(),
                    "not an option of an inference-component endpoint: each component sets its own (InferenceComponentOnPools)",
                )
    elif managed is not None:
        problems.add(
            "managed_instance_count",
            managed,
            "only for endpoints that host inference components: use InferenceComponentEndpoint",
        )
    if managed is not None:
        low, high = managed
        if low < 0 or high < max(1, low):
            problems.add(
                "managed_instance_count",
                managed,
                "must be (min, max) with 0 <= min <= max and max >= 1",
            )


def check_storage(
    problems: Problems, pools: Sequence[InstancePool], props: PoolEndpointProps
) -> None:
    """No EBS volume options on types with local NVMe: SageMaker refuses a KmsKeyId there."""
    local = [pool.instance_type for pool in pools if has_local_storage(pool.instance_type)]
    if not local:
        return
    types = ", ".join(local)
    if (key := props.get("volume_kms_key")) is not None:
        problems.add(
            "volume_kms_key",
            key.node.path,
            f"not allowed with instance types that have local NVMe storage ({types}): SageMaker rejects a KmsKeyId there; their volumes are hardware-encrypted",
        )
    if (size := props.get("volume_size_gb")) is not None:
        problems.add(
            "volume_size_gb",
            size,
            f"not allowed with instance types that have local NVMe storage ({types}): SageMaker uses the instance storage and provisions no EBS volume",
        )


def check_reservation(
    problems: Problems, pools: Sequence[InstancePool], props: PoolEndpointProps
) -> None:
    """A reservation ARN of the right shape, and only with one pool (nothing to fall back to)."""
    arn = props.get("capacity_reservation_arn")
    if arn is None:
        return
    rule = limits("ProductionVariantCapacityReservationConfig", "MlReservationArn")
    if not is_unresolved(arn) and not re.fullmatch(rule.pattern or ".*", arn):
        problems.add(
            "capacity_reservation_arn",
            arn,
            f"must be an ML reservation ARN matching {rule.pattern!r}",
        )
    if len(pools) > 1:
        problems.add(
            "capacity_reservation_arn",
            arn,
            "only allowed with a single pool: a reservation means capacity-reservations-only, which leaves fallback pools nothing to run on",
        )


def check_pools_hardware(
    problems: Problems, pools: Sequence[InstancePool], model: ServingModel | None, catalog: Catalog
) -> None:
    """Each pool's model runs on its instance type (see ``_container_checks``)."""
    for index, pool in enumerate(pools):
        served = pool.model or model
        if served is None or is_unresolved(served.image.image_uri):  # a token image: unchecked
            continue
        check_pool_hardware(
            problems, index, pool.instance_type, served.image.image_uri, served.environment, catalog
        )

"""What an instance-pool endpoint runs on, per pool; what it costs; which copy each pool answers as."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from ..planning.catalog import Catalog, default_catalog


@dataclass(frozen=True)
class PoolStatus:
    priority: int
    instance_type: str
    instances: int
    model_override: str | None
    price_per_hour: float | None
    #: The name this pool's responses carry (its model's copy name), when known.
    served_name: str | None = None

    @property
    def preferred(self) -> bool:
        return self.priority == 1


@dataclass(frozen=True)
class VariantStatus:
    name: str
    model: str | None
    pools: tuple[PoolStatus, ...]
    pending: bool = False

    @property
    def on_fallback(self) -> bool:
        return any(pool.instances > 0 and not pool.preferred for pool in self.pools)

    @property
    def hourly_cost(self) -> float | None:
        if any(pool.instances and pool.price_per_hour is None for pool in self.pools):
            return None
        return sum(pool.instances * (pool.price_per_hour or 0.0) for pool in self.pools)


@dataclass(frozen=True)
class FleetStatus:
    endpoint: str
    status: str
    variants: tuple[VariantStatus, ...]
    pending: tuple[VariantStatus, ...] = field(default_factory=tuple)
    price_source: str = ""

    @property
    def on_fallback(self) -> bool:
        return any(variant.on_fallback for variant in self.variants)


def _variants(
    summaries: list[dict[str, Any]], config: dict[str, Any], catalog: Catalog, pending: bool
) -> tuple[VariantStatus, ...]:
    configured = {v["VariantName"]: v for v in config.get("ProductionVariants", [])}
    variants = []
    for summary in summaries:
        declared = configured.get(summary["VariantName"], {})
        declared_pools = {p["InstanceType"]: p for p in declared.get("InstancePools", [])}
        running = {
            p["InstanceType"]: p["CurrentInstanceCount"] for p in summary.get("InstancePools", [])
        }
        types = list(declared_pools) or list(running)
        pools = []
        for index, instance_type in enumerate(
            sorted(types, key=lambda t: declared_pools.get(t, {}).get("Priority", 99)), start=1
        ):
            declared_pool = declared_pools.get(instance_type, {})
            pools.append(
                PoolStatus(
                    priority=declared_pool.get("Priority", index),
                    instance_type=instance_type,
                    instances=running.get(instance_type, 0),
                    model_override=declared_pool.get("ModelNameOverride"),
                    price_per_hour=hourly_price(catalog, instance_type),
                )
            )
        variants.append(
            VariantStatus(summary["VariantName"], declared.get("ModelName"), tuple(pools), pending)
        )
    return tuple(variants)


def hourly_price(catalog: Catalog, instance_type: str) -> float | None:
    """The catalog's $/h of ``instance_type`` (``None``: not in the catalog)."""
    return catalog.get(instance_type).price_per_hour if instance_type in catalog else None


def served_name(environment: dict[str, str]) -> str | None:
    """The first name a model's container serves, what its responses report
    (``CDK_LLM_SERVING_SERVED_NAMES``, else ``SM_VLLM_SERVED_MODEL_NAME``)."""
    names = environment.get("CDK_LLM_SERVING_SERVED_NAMES")
    if names:
        try:
            listed = json.loads(names)
        except ValueError:
            listed = None
        if isinstance(listed, list) and listed:
            return str(listed[0])
    return environment.get("SM_VLLM_SERVED_MODEL_NAME")


def _with_served_names(
    client: Any, variants: tuple[VariantStatus, ...]
) -> tuple[VariantStatus, ...]:
    """Each pool's copy name, from DescribeModel of its model (override or the variant's)."""
    names: dict[str, str | None] = {}

    def lookup(model: str | None) -> str | None:
        if model is None:
            return None
        if model not in names:
            try:
                described = client.describe_model(ModelName=model)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ValidationException":
                    raise
                described = {}  # the model is gone (e.g. replaced by an update)
            environment = described.get("PrimaryContainer", {}).get("Environment", {})
            names[model] = served_name(environment)
        return names[model]

    return tuple(
        replace(
            v,
            pools=tuple(
                replace(p, served_name=lookup(p.model_override or v.model)) for p in v.pools
            ),
        )
        for v in variants
    )


def fleet_status(client: Any, endpoint_name: str, catalog: Catalog | None = None) -> FleetStatus:
    """DescribeEndpoint plus the endpoint config(s) it names, for priorities and model overrides."""
    catalog = catalog or default_catalog()
    endpoint = client.describe_endpoint(EndpointName=endpoint_name)
    config = client.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    variants = _variants(endpoint.get("ProductionVariants", []), config, catalog, pending=False)
    pending: tuple[VariantStatus, ...] = ()
    summary = endpoint.get("PendingDeploymentSummary")
    if summary:
        pending_config = client.describe_endpoint_config(
            EndpointConfigName=summary["EndpointConfigName"]
        )
        pending = _variants(
            summary.get("ProductionVariants", []), pending_config, catalog, pending=True
        )
    return FleetStatus(
        endpoint["EndpointName"],
        endpoint["EndpointStatus"],
        _with_served_names(client, variants),
        _with_served_names(client, pending),
        catalog.price_source,
    )


def fleet_as_dict(status: FleetStatus) -> dict[str, Any]:
    def variant(v: VariantStatus) -> dict[str, Any]:
        return {
            "variant": v.name,
            "model": v.model,
            "on_fallback": v.on_fallback,
            "hourly_cost": round(v.hourly_cost, 2) if v.hourly_cost is not None else None,
            "pools": [{**asdict(p), "preferred": p.preferred} for p in v.pools],
        }

    return {
        "endpoint": status.endpoint,
        "status": status.status,
        "on_fallback": status.on_fallback,
        "variants": [variant(v) for v in status.variants],
        "pending_update": [variant(v) for v in status.pending] or None,
        "price_source": status.price_source,
    }


def format_fleet(status: FleetStatus) -> str:
    lines = [f"endpoint {status.endpoint}: {status.status}"]

    def variant_lines(v: VariantStatus, heading: str) -> None:
        cost = (
            f"${v.hourly_cost:,.2f}/h"
            if v.hourly_cost is not None
            else "cost unknown (type not in catalog)"
        )
        lines.append(f"{heading} {v.name} (model {v.model}): {cost}")
        for p in v.pools:
            mark = "preferred" if p.preferred else "fallback "
            override = f"  model {p.model_override}" if p.model_override else ""
            copy = f"  answers as {p.served_name}" if p.served_name else ""
            lines.append(
                f"  {p.priority}. {p.instance_type:<24} {p.instances:>3} running  {mark}{copy}{override}"
            )
        for p in v.pools:
            if p.instances and not p.preferred:
                served = p.served_name or p.model_override
                copy = f", serving the {served} copy" if served else ""
                lines.append(
                    f"  ! running on fallback: {p.instances} x {p.instance_type} (priority {p.priority}){copy}"
                )

    for v in status.variants:
        variant_lines(v, "variant")
    for v in status.pending:
        variant_lines(v, "pending update, variant")
    lines.append(f"prices: {status.price_source}")
    return "\n".join(lines)

"""On-demand SageMaker hosting prices of a region from the AWS Price List API (``fleet
--live-prices``): ``GetProducts``, https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html.

UNCONFIRMED: the attribute names and the hosting usage marker below (docs/design/cli.md,
"Live prices"); a type without a hosting product keeps the catalog's price.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..planning.catalog import Catalog
from .fleet import FleetStatus, VariantStatus, hourly_price

#: The Price List API answers from us-east-1 whatever region it prices.
PRICING_ENDPOINT_REGION = "us-east-1"
SERVICE_CODE = "AmazonSageMaker"
INSTANCE_ATTRIBUTE = "instanceName"
REGION_ATTRIBUTE = "regionCode"
#: Real-time hosting products (training and notebooks share the instance names).
HOSTING_USAGE_MARKER = "Host:"


def _on_demand_usd(product: dict[str, Any]) -> float | None:
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if usd is not None and float(usd) > 0:
                return float(usd)
    return None


def _is_hosting(product: dict[str, Any]) -> bool:
    usage = str(product.get("product", {}).get("attributes", {}).get("usagetype", ""))
    return HOSTING_USAGE_MARKER in usage


def hosting_price(pricing: Any, region: str, instance_type: str) -> float | None:
    """The on-demand hourly price of ``instance_type`` for real-time hosting in ``region``."""
    filters = [
        {"Type": "TERM_MATCH", "Field": REGION_ATTRIBUTE, "Value": region},
        {"Type": "TERM_MATCH", "Field": INSTANCE_ATTRIBUTE, "Value": instance_type},
    ]
    pages = pricing.get_paginator("get_products").paginate(
        ServiceCode=SERVICE_CODE, Filters=filters
    )
    for page in pages:
        for raw in page.get("PriceList", []):
            product = json.loads(raw) if isinstance(raw, str) else raw
            price = _on_demand_usd(product) if _is_hosting(product) else None
            if price is not None:
                return price
    return None


def hosting_prices(pricing: Any, region: str, instance_types: Iterable[str]) -> dict[str, float]:
    """Prices of the types the Price List API lists for hosting in ``region``; others left out."""
    found = {t: hosting_price(pricing, region, t) for t in instance_types}
    return {t: price for t, price in found.items() if price is not None}


def live_catalog(
    catalog: Catalog, pricing: Any, region: str, instance_types: Iterable[str]
) -> Catalog:
    """``catalog`` with the live prices of ``instance_types`` in ``region``."""
    known = [t for t in instance_types if t in catalog]
    prices = hosting_prices(pricing, region, known)
    today = dt.date.today().isoformat()
    return catalog.with_prices(
        prices, source=f"AWS Price List API, {region}, read {today}", region=region
    )


def pool_types(status: FleetStatus) -> list[str]:
    """Instance types of every pool the endpoint declares (current and pending)."""
    types = {
        pool.instance_type
        for variant in (*status.variants, *status.pending)
        for pool in variant.pools
    }
    return sorted(types)


def reprice(status: FleetStatus, catalog: Catalog) -> FleetStatus:
    """``status`` with each pool's hourly price from ``catalog``."""

    def priced(variant: VariantStatus) -> VariantStatus:
        pools = [
            replace(p, price_per_hour=hourly_price(catalog, p.instance_type)) for p in variant.pools
        ]
        return replace(variant, pools=tuple(pools))

    return replace(
        status,
        variants=tuple(priced(v) for v in status.variants),
        pending=tuple(priced(v) for v in status.pending),
        price_source=catalog.price_source,
    )


def price_file(catalog: Catalog, instance_types: Iterable[str]) -> dict[str, Any]:
    """What ``plan --prices FILE`` reads: the region, the source and the types' prices."""
    prices = {t: catalog.get(t).price_per_hour for t in instance_types if t in catalog}
    return {"region": catalog.price_region, "source": catalog.price_source, "prices": prices}

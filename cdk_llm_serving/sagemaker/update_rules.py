"""Which updates of an autoscaled endpoint SageMaker accepts, checked on two templates.

AWS refuses an instance-type change or the removal of an autoscaled variant and allows a model
change (https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html). Whether
a new pool list counts as a type change is UNCONFIRMED[pool-change-is-type-change]: a change of
the *set* of pool types is treated as one; a new order or other models on the same types is
allowed. Such a change takes two deploys; ``autoscaled_update_problems`` compares the deployed
template with a new synth, and synth refuses it given the deployed template as context
(``DEPLOYED_TEMPLATE_CONTEXT``). The rules quoted: docs/design/pool-endpoints.md, "Updates of an
autoscaled endpoint".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import Problem

_TARGET = "AWS::ApplicationAutoScaling::ScalableTarget"
#: Context key: path of the deployed template (JSON), e.g.
#: ``cdk synth -c cdk-llm-serving:deployed-template=deployed.json``.
DEPLOYED_TEMPLATE_CONTEXT = "cdk-llm-serving:deployed-template"


def _resources(template: Mapping[str, Any], kind: str) -> dict[str, Mapping[str, Any]]:
    return {
        key: value
        for key, value in template.get("Resources", {}).items()
        if value.get("Type") == kind
    }


def _variants(
    template: Mapping[str, Any], endpoint: Mapping[str, Any]
) -> dict[str, frozenset[str]]:
    """Variant name -> the instance types it runs on, for one endpoint of ``template``."""
    reference = endpoint.get("Properties", {}).get("EndpointConfigName")
    configs = _resources(template, "AWS::SageMaker::EndpointConfig")
    config_id = reference.get("Fn::GetAtt", [None])[0] if isinstance(reference, dict) else None
    config = configs.get(config_id or "", {})
    variants: dict[str, frozenset[str]] = {}
    for variant in config.get("Properties", {}).get("ProductionVariants", []):
        pools = variant.get("InstancePools") or [{"InstanceType": variant.get("InstanceType")}]
        variants[variant["VariantName"]] = frozenset(str(p["InstanceType"]) for p in pools)
    return variants


def _scaled_variants(template: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(endpoint name, variant name) of every literal ``endpoint/NAME/variant/VARIANT`` target."""
    scaled: set[tuple[str, str]] = set()
    for target in _resources(template, _TARGET).values():
        resource_id = target.get("Properties", {}).get("ResourceId")
        if isinstance(resource_id, str) and resource_id.startswith("endpoint/"):
            _, name, _, variant = resource_id.split("/", 3)
            scaled.add((name, variant))
    return scaled


def _endpoints_by_name(template: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    endpoints = _resources(template, "AWS::SageMaker::Endpoint").values()
    return {
        str(e["Properties"]["EndpointName"]): e
        for e in endpoints
        if isinstance(e.get("Properties", {}).get("EndpointName"), str)
    }


def _variant_problems(
    where: str, old: frozenset[str] | None, new: frozenset[str] | None
) -> list[Problem]:
    """AWS's rules for one autoscaled variant: not removed, same instance types."""
    if new is None:
        return [
            Problem(
                where,
                "removed",
                "an autoscaled variant cannot be removed: deploy once without auto_scale first",
            )
        ]
    if old is not None and old != new:
        return [
            Problem(
                where,
                f"instance types {sorted(old)} -> {sorted(new)}",
                "SageMaker refuses instance-type changes of an autoscaled variant: deploy once without auto_scale, then with the new pools",
            )
        ]
    return []


def deployed_variant_problems(
    deployed: Mapping[str, Any],
    endpoint_name: str,
    variants: Mapping[str, frozenset[str]],
) -> list[Problem]:
    """Problems of updating ``deployed`` so that endpoint ``endpoint_name`` has ``variants``
    (variant name -> instance types); for synth-time checks of one endpoint."""
    endpoint = _endpoints_by_name(deployed).get(endpoint_name)
    if endpoint is None:
        return []
    old = _variants(deployed, endpoint)
    return [
        problem
        for name, variant in sorted(_scaled_variants(deployed))
        if name == endpoint_name
        for problem in _variant_problems(
            f"endpoint {name} variant {variant}", old.get(variant), variants.get(variant)
        )
    ]


def autoscaled_update_problems(
    deployed: Mapping[str, Any], updated: Mapping[str, Any]
) -> list[Problem]:
    """What SageMaker would refuse (or reset) when ``deployed`` is updated to ``updated``."""
    problems: list[Problem] = []
    after = _endpoints_by_name(updated)
    for name, endpoint in after.items():
        problems += deployed_variant_problems(deployed, name, _variants(updated, endpoint))
    for name, variant in sorted(_scaled_variants(updated)):
        props = after.get(name, {}).get("Properties", {})
        if name in after and props.get("RetainAllVariantProperties") is not True:
            problems.append(
                Problem(
                    f"endpoint {name} variant {variant}",
                    "RetainAllVariantProperties not set",
                    "an update would reset the autoscaled instance count to InitialInstanceCount",
                )
            )
    return problems

"""Which updates of an autoscaled endpoint SageMaker accepts, checked on two templates.

AWS's rules ("Update endpoints that use auto scaling",
https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html):

* "If the update would change the instance type for any model that is a target for auto
  scaling, the update fails"; removing a production variant that has auto scaling
  configured needs the variant deregistered first (``DeregisterScalableTarget``).
* "If you change the model for a variant that is configured for auto scaling, Amazon
  SageMaker AI auto scaling allows the update."
* ``RetainAllVariantProperties: true`` keeps the current instance count (and weight) of
  variants with the same name instead of resetting them to ``InitialInstanceCount``.
  Nothing is excluded (``ExcludeRetainedVariantProperties`` unset): its types are
  ``DesiredInstanceCount`` (excluding it would reset the count autoscaling owns, the very
  loss this avoids), ``DesiredWeight`` (one variant: its weight never changes) and
  ``DataCaptureConfig`` ("Not currently supported", botocore 1.44.8 ``VariantPropertyType``).
  Pools, models and the deployment policy always come from the new config
  (``RetainDeploymentConfig`` stays false).

Instance pools: AWS does not say whether changing a variant's pool list counts as changing
its instance type (UNCONFIRMED[pool-change-is-type-change]). Decided conservatively here: a change of the *set* of pool
instance types is an instance-type change; a new order (priorities) or other models on the
same types (``ModelNameOverride``) is a model change and allowed.

CloudFormation cannot deregister a scalable target before it updates the endpoint within one
stack update (old resources are removed only in the clean-up phase), so an instance-type
change of an autoscaled variant takes two deploys: one without ``auto_scale``, then one with
the new pools and ``auto_scale`` again. ``autoscaled_update_problems`` compares the deployed
template (``aws cloudformation get-template``) with a new synth and names what would fail;
given that template as context (``DEPLOYED_TEMPLATE_CONTEXT``), synth refuses it.
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

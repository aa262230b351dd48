"""Constructs accept a catalog: your prices (``with_prices``) and extra instance types reach them."""

from __future__ import annotations

import dataclasses

import pytest
from aws_cdk.assertions import Annotations, Match

from cdk_llm_serving import (
    ConfigurationError,
    HyperPodEksCluster,
    HyperPodInstanceGroup,
    HyperPodServingAddons,
    InstancePool,
    PoolEndpointAlarms,
)
from cdk_llm_serving.planning.catalog import Catalog, default_catalog
from cdk_llm_serving.planning.cold_start import estimate_cold_start
from cdk_llm_serving.planning.cost import estimate_cost
from cdk_llm_serving.planning.report import plan_as_dict, plan_as_table
from cdk_llm_serving.planning.sizing import ModelSizing, plan
from tests.support.builders import new_stack, pool_endpoint, serving_model
from tests.support.hyperpod import deepseek_service, model_store


def endpoint_on(sizing: ModelSizing, instance_types: list[str], catalog: Catalog) -> tuple:
    """A new stack and a pool endpoint of ``sizing`` over ``instance_types``, given ``catalog``."""
    stack = new_stack()
    model = serving_model(stack, sizing=sizing)
    pools = [InstancePool(instance_type) for instance_type in instance_types]
    return stack, pool_endpoint(stack, model=model, pools=pools, catalog=catalog)


def test_an_endpoint_plans_a_type_only_a_custom_catalog_knows():
    base = default_catalog()
    g7e = dataclasses.replace(base.get("ml.g6e.48xlarge"), instance_type="ml.g7e.48xlarge")
    catalog = base.with_instances([g7e])
    _, endpoint = endpoint_on(
        ModelSizing("gpt-oss-120b", "mxfp4", max_context=32768),
        ["ml.p5.48xlarge", "ml.g7e.48xlarge"],
        catalog,
    )
    assert [fit.plan.instance_type for fit in endpoint.pool_plans] == [
        "ml.p5.48xlarge",
        "ml.g7e.48xlarge",
    ]
    assert endpoint.catalog is catalog


def test_default_catalog_with_prices_reaches_the_alarms():
    catalog = default_catalog().with_prices({"ml.p5en.48xlarge": 99.5}, source="our savings plan")
    stack, endpoint = endpoint_on(
        ModelSizing("deepseek-v3", "fp8", max_context=32768),
        ["ml.p6-b200.48xlarge", "ml.p5en.48xlarge"],
        catalog,
    )
    alarms = PoolEndpointAlarms(stack, "Alarms", endpoint=endpoint)
    descriptions = [
        stack.resolve(alarm.node.default_child.alarm_description) for alarm in alarms.alarms
    ]
    assert any(
        "$99.50/h per ml.p5en.48xlarge" in text and "our savings plan" in text
        for text in descriptions
    )


def test_without_a_catalog_the_new_type_is_unchecked():
    stack = new_stack()
    model = serving_model(stack, sizing=ModelSizing("gpt-oss-120b", "mxfp4", max_context=32768))
    pool_endpoint(
        stack, model=model, pools=[InstancePool("ml.p5.48xlarge"), InstancePool("ml.g6e.48xlarge")]
    )
    Annotations.from_stack(stack).has_no_warning(
        "*", Match.string_like_regexp("not in the planner's catalog")
    )


def test_reports_of_a_plan_on_a_custom_type_use_the_plan_s_own_instance():
    """A plan remembers the catalog entry it was made on: the table, the JSON and the
    speculation estimates of a type only a custom catalog knows need no catalog of their own
    (they raised KeyError when they looked the type up in the default catalog)."""
    base = default_catalog()
    g7e = dataclasses.replace(base.get("ml.g6e.48xlarge"), instance_type="ml.g7e.48xlarge")
    catalog = base.with_instances([g7e])
    result = plan("gpt-oss-120b", "mxfp4", "ml.g7e.48xlarge", max_context=32768, catalog=catalog)
    cost = estimate_cost(result, catalog=catalog)
    cold = estimate_cold_start(result.weight_bytes, "s3_download")
    assert result.instance_spec is g7e
    assert plan_as_dict(result, cold, cost)["decode"]["speculative"]
    assert "ml.g7e.48xlarge" in plan_as_table(result, cold, cost)


def test_hyperpod_cluster_and_service_accept_a_custom_catalog():
    """A GPU group of a type only the custom catalog knows: refused without it, planned with it."""
    base = default_catalog()
    g7e = dataclasses.replace(base.get("ml.p5en.48xlarge"), instance_type="ml.g7e.48xlarge")
    catalog = base.with_instances([g7e])
    groups = [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu("gpu", "ml.g7e.48xlarge", 2),
    ]
    with pytest.raises(ConfigurationError, match="planner's catalog"):
        HyperPodEksCluster(
            new_stack("Refused"), "HyperPod", kubernetes_version="1.33", instance_groups=groups
        )

    stack = new_stack("Custom")
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=groups, catalog=catalog
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    store = model_store(stack, cluster)
    service = deepseek_service(stack, cluster, addons, store, catalog=catalog)
    assert cluster.catalog is catalog and service.instance is g7e
    assert service.plan is not None and service.plan.instance_type == "ml.g7e.48xlarge"

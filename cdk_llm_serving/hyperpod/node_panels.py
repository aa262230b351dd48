"""Scaling panels and the capacity alarms of a KEDA-scaled service (``VllmDashboard.add_scaling_panels``).

Every series is one the service's AMP workspace holds (``VllmObservability`` scrapes the
leaders, the GPU group's kubelets and KEDA's operator): serving replicas (``up`` of the
leaders), the replicas KEDA asks for (the HPA's rule for an ``AverageValue`` target), pending
replicas (their difference), the group's nodes and how often both changed. Two alarms:
``VllmReplicasPending`` (replicas pend longer than a scale-out takes) and, with scale to zero,
``VllmWokenWithoutReplica`` (a KEDA trigger is active and no replica serves after the wake).
Each series' source: docs/design/observability.md ("Scaling panels").
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from ..core.dashboard import FULL_WIDTH, ServingDashboard
from ..core.promql_charts import PromQLCharts
from .constants import QUEUE_DEPTH_RULE
from .multi_node_manifests import NLB_HEALTH_CHECK_INTERVAL_SECONDS
from .node_readiness import group_budget
from .observability import KEDA_OPERATOR_JOB, KUBELET_JOB, alarm_rule, rule_file
from .replica_autoscaling import IMAGE_PULL_SECONDS, WAKE_HEALTHY_THRESHOLD, VllmReplicaAutoScaling

__all__ = ["PENDING_ALERT", "WAKE_ALERT", "scale_out_seconds", "scaling_rule_groups"]

#: The alert that fires when replicas pend longer than a scale-out takes.
PENDING_ALERT = "VllmReplicasPending"
#: Recorded series (recording rules of this module's rule group).
SERVING_REPLICAS_RULE = "vllm:replicas_serving"
DESIRED_REPLICAS_RULE = "vllm:replicas_desired"
PENDING_REPLICAS_RULE = "vllm:replicas_pending"
GROUP_NODES_RULE = "vllm:group_nodes"
NODE_CHANGES_RULE = "vllm:group_node_changes_1h"
REPLICA_CHANGES_RULE = "vllm:replica_changes_1h"
WAKE_DEMAND_RULE = "vllm:wake_demand"
#: The alert that fires when a service woken from zero has no serving replica after its wake.
WAKE_ALERT = "VllmWokenWithoutReplica"
#: Serving nodes of the group (``up`` of the ``kubelet`` job, one target per node).
_NODES_UP = f'up{{job="{KUBELET_JOB}"}} == 1'
#: The scrape-health series of the service's leaders (``VllmObservability``'s job).
_UP = 'up{job="vllm"}'


def scale_out_seconds(auto_scaling: VllmReplicaAutoScaling) -> int:
    """How long one more replica takes to serve: its nodes, image, weights and engine, the
    health check (``ScaleToZero``'s wake figures, without the wake's detection)."""
    if auto_scaling.wake is not None:
        return auto_scaling.wake.total_seconds - auto_scaling.wake.detection
    service = auto_scaling.service
    nodes = (
        int(group_budget(dataclasses.replace(service.group, count=service.nodes)).to_seconds())
        if service.group.autoscaled
        else 0
    )
    return (
        nodes
        + IMAGE_PULL_SECONDS
        + math.ceil(service.cold_start.total_seconds)
        + WAKE_HEALTHY_THRESHOLD * NLB_HEALTH_CHECK_INTERVAL_SECONDS
    )


def _recording_rules(auto_scaling: VllmReplicaAutoScaling) -> list[dict[str, str]]:
    low, high, threshold = (
        max(auto_scaling.min_replicas, 1),
        auto_scaling.max_replicas,
        auto_scaling.threshold,
    )
    serving = f"(count({_UP} == 1) or vector(0))"
    desired = (
        f"clamp(ceil(sum({QUEUE_DEPTH_RULE}) / {threshold}), {low}, {high})"
        if auto_scaling.min_replicas >= 1
        # at zero nothing is recorded: the wake itself is KEDA's, from the load balancer
        else f"(clamp(ceil(sum({QUEUE_DEPTH_RULE}) / {threshold}), {low}, {high}) or vector(0))"
    )
    rules = [
        {"record": SERVING_REPLICAS_RULE, "expr": serving},
        {"record": DESIRED_REPLICAS_RULE, "expr": desired},
        {
            "record": PENDING_REPLICAS_RULE,
            "expr": f"clamp_min({DESIRED_REPLICAS_RULE} - {SERVING_REPLICAS_RULE}, 0)",
        },
        {
            # 0 (with the group's name) when the group has no node, so changes() sees it go
            "record": GROUP_NODES_RULE,
            "expr": (
                f"count by (group) ({_NODES_UP}) or "
                f'label_replace(vector(0), "group", "{auto_scaling.service.group.name}", "", "")'
            ),
        },
        {"record": NODE_CHANGES_RULE, "expr": f"changes({GROUP_NODES_RULE}[1h])"},
        {"record": REPLICA_CHANGES_RULE, "expr": f"changes({SERVING_REPLICAS_RULE}[1h])"},
    ]
    if auto_scaling.wake is not None:
        service = auto_scaling.service
        active = (
            f'keda_scaler_active{{job="{KEDA_OPERATOR_JOB}",namespace="{service.namespace}",'
            f'scaledObject="{service.name}"}}'
        )
        rules.append({"record": WAKE_DEMAND_RULE, "expr": f"max({active}) or vector(0)"})
    return rules


def _wake_alarms(auto_scaling: VllmReplicaAutoScaling) -> list[dict[str, Any]]:
    """``WAKE_ALERT``: a trigger asks for a replica and none serves, longer than the wake."""
    wake = auto_scaling.wake
    if wake is None:
        return []
    name = auto_scaling.service.name
    minutes = math.ceil(wake.total_seconds / 60)
    return [
        alarm_rule(
            WAKE_ALERT,
            f"{WAKE_DEMAND_RULE} > 0 and on() {SERVING_REPLICAS_RULE} == 0",
            for_=f"{minutes}m",
            labels={"severity": "warning", "service": name},
            summary=(
                f"{name}: woken from zero (a KEDA trigger is active) but no replica serves "
                f"after the wake time ({minutes} min): GPU group "
                f"{auto_scaling.service.group.name!r} got no nodes (capacity scarce, or at "
                "its max_count); every request is refused"
            ),
        )
    ]


def scaling_rule_groups(auto_scaling: VllmReplicaAutoScaling) -> str:
    """Recording rules for serving, desired and pending replicas, and the pending alarm."""
    name = auto_scaling.service.name
    minutes = math.ceil(scale_out_seconds(auto_scaling) / 60)
    pending = alarm_rule(
        PENDING_ALERT,
        f"{PENDING_REPLICAS_RULE} > 0",
        for_=f"{minutes}m",
        labels={"severity": "warning", "service": name},
        summary=(
            f"{name}: replicas pending longer than a scale-out takes ({minutes} min): "
            f"GPU group {auto_scaling.service.group.name!r} cannot grow (capacity scarce, "
            "or at its max_count); the serving replicas carry the load and requests queue"
        ),
    )
    rules = [*_recording_rules(auto_scaling), pending, *_wake_alarms(auto_scaling)]
    return rule_file({"name": f"{name}-scaling", "interval": "1m", "rules": rules})


def add_scaling_panels(
    dashboard: ServingDashboard, charts: PromQLCharts, auto_scaling: VllmReplicaAutoScaling
) -> aps.CfnRuleGroupsNamespace:
    """The scaling rules and alarms in the workspace (under ``dashboard``), and their panels."""
    rules = aps.CfnRuleGroupsNamespace(
        Construct(dashboard, "Scaling"),
        "Rules",
        name=f"{auto_scaling.service.name}-scaling",
        workspace=auto_scaling.observability.workspace.attr_arn,
        data=scaling_rule_groups(auto_scaling),
    )
    minutes = math.ceil(scale_out_seconds(auto_scaling) / 60)
    dashboard.add_widgets(_scaling_header(auto_scaling, minutes))
    group = auto_scaling.service.group
    panels = [
        ("Serving replicas", SERVING_REPLICAS_RULE, None),
        ("Replicas KEDA asks for", DESIRED_REPLICAS_RULE, float(auto_scaling.max_replicas)),
        ("Pending replicas (waiting for nodes or starting)", PENDING_REPLICAS_RULE, None),
        (f"Nodes in group {group.name}", GROUP_NODES_RULE, float(group.capacity)),
        ("Node-count changes in the last hour", NODE_CHANGES_RULE, None),
        ("Serving-replica changes in the last hour", REPLICA_CHANGES_RULE, None),
    ]
    widgets: list[cloudwatch.IWidget] = [
        charts.chart(title, query, threshold=threshold) for title, query, threshold in panels
    ]
    widgets.append(
        _note(
            "### Time to serve after scale-out\n"
            f"Estimated {minutes} min. Measured: the length of each spell of *Pending "
            "replicas* above 0."
        )
    )
    if len(widgets) % 2:
        widgets.append(
            _note(
                "### Scale events\n"
                "A change of the node count is HyperPod's Karpenter adding or removing a "
                f"node of `{group.name}` (its kubelet answers, or stops answering, the "
                "scraper); a change of the serving replicas is KEDA's scale-out or a "
                "drained scale-in."
            )
        )
    dashboard.add_in_pairs(widgets)
    return rules


def _scaling_header(auto_scaling: VllmReplicaAutoScaling, minutes: int) -> cloudwatch.TextWidget:
    """The replica range, the time one more replica takes, and what each alarm means."""
    wake, service = auto_scaling.wake, auto_scaling.service
    from_zero = (
        f"From zero, a first request waits up to {math.ceil(wake.total_seconds / 60)} min "
        "(clients retry that long). "
        if wake is not None
        else ""
    )
    markdown = (
        f"## Scaling: {auto_scaling.min_replicas}-{auto_scaling.max_replicas} replicas of "
        f"{service.nodes} node(s) in group `{service.group.name}`\n"
        f"One more replica serves after about {minutes} min (nodes, image, weights, engine). "
        + from_zero
        + f"`{PENDING_ALERT}` fires when replicas pend longer: the group cannot grow"
        + (f"; `{WAKE_ALERT}` when a wake from zero finds no nodes." if wake is not None else ".")
    )
    return cloudwatch.TextWidget(markdown=markdown, width=FULL_WIDTH, height=2)


def _note(markdown: str) -> cloudwatch.TextWidget:
    return cloudwatch.TextWidget(markdown=markdown, width=12, height=6)

"""Scaling panels and the capacity alarm of a KEDA-scaled service (``VllmDashboard.add_scaling_panels``).

Sources. Every series here is one the service's AMP workspace holds: the managed scraper
scrapes each serving leader (one per replica), the nodes of the service's GPU group and, under
autoscaling, KEDA's operator (``VllmObservability``), so

* serving replicas = the leaders that answer a scrape: ``count(up{job="vllm"} == 1)``
  (Prometheus sets ``up`` per scraped target, 1 when the scrape succeeded,
  https://prometheus.io/docs/concepts/jobs_instances/#automatically-generated-labels-and-time-series);
* replicas KEDA asks for = the HPA's rule for KEDA's ``prometheus`` trigger (an external
  metric with an ``AverageValue`` target): ``ceil(queue depth / threshold)``, held between
  the autoscaling's minimum and maximum (Kubernetes, "Horizontal Pod Autoscaling",
  algorithm details,
  https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#algorithm-details;
  KEDA's ``metricType`` defaults to ``AverageValue``,
  https://keda.sh/docs/2.17/reference/scaledobject-spec/#triggers), and at least 1 while a
  replica serves;
* pending replicas = asked for minus serving: a replica that waits for nodes (Karpenter
  adding them), for its image, weights and engine;
* nodes of the service's GPU group = its nodes whose kubelet answers a scrape through the API
  server's proxy: ``count by (group) (up{job="kubelet"} == 1)`` (``VllmObservability``'s
  ``kubelet`` job, the ``group`` label from the node's ``cdk-llm-serving/group`` label that
  ``HyperPodEksCluster`` sets); a node HyperPod's Karpenter adds or removes appears or leaves
  within a scrape interval;
* scale events = how often that node count and the serving replicas changed in the last hour
  (PromQL ``changes``, https://prometheus.io/docs/prometheus/latest/querying/functions/#changes).
  Karpenter's own events are not read: HyperPod runs it outside the cluster ("Autoscaling on
  SageMaker HyperPod EKS",
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html)
  and documents no metrics of it.

The alarm (``VllmReplicasPending``): pending replicas above 0 for longer than one replica's
scale-out (new nodes, image, weights, engine; ``ScaleToZero``'s wake without its detection
part, the same figures). It is an AMP alerting rule, routed by the workspace's alert
manager to the service's alerts topic like the SLO alerts.

The wake alarm (``VllmWokenWithoutReplica``, scale to zero only): at zero there is no leader,
so queue depth and pending replicas say nothing. KEDA's operator says whether a trigger of
the ScaledObject asks for a replica: ``keda_scaler_active`` (1 active, 0 not; labels
``namespace``, ``scaledObject``, ``scaler``, ``triggerIndex``, ``metric``, ``type``;
kedacore/keda ``pkg/metricscollector/prommetrics.go``; "Integrate with Prometheus",
https://keda.sh/docs/2.17/integrations/prometheus/), scraped by ``VllmObservability``'s
``keda-operator`` job. Demand (a trigger active: the wake schedule's window) with no replica
serving for longer than the wake from zero (``VllmReplicaAutoScaling.wake``) means the woken
replica found no nodes: capacity is scarce, or the group is at its ``max_count``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import yaml
from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from .constants import QUEUE_DEPTH_RULE
from .multi_node_manifests import NLB_HEALTH_CHECK_INTERVAL_SECONDS
from .node_readiness import group_budget
from .observability import _YAML_OPTIONS, KEDA_OPERATOR_JOB, KUBELET_JOB
from .replica_autoscaling import IMAGE_PULL_SECONDS, WAKE_HEALTHY_THRESHOLD, VllmReplicaAutoScaling

#: ``VllmDashboard.promql_widget``: (title, query, unit, threshold) -> a widget.
PromqlWidget = Callable[[str, str, str, "float | None"], cloudwatch.IWidget]

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


def scale_out_seconds(autoscaling: VllmReplicaAutoScaling) -> int:
    """How long one more replica takes to serve: its nodes, image, weights and engine, the
    health check (``ScaleToZero``'s wake figures, without the wake's detection)."""
    if autoscaling.wake is not None:
        return autoscaling.wake.total_seconds - autoscaling.wake.detection
    service = autoscaling.service
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


def _recording_rules(autoscaling: VllmReplicaAutoScaling) -> list[dict[str, str]]:
    low, high, threshold = (
        max(autoscaling.min_replicas, 1),
        autoscaling.max_replicas,
        autoscaling.threshold,
    )
    serving = f"(count({_UP} == 1) or vector(0))"
    desired = (
        f"clamp(ceil(sum({QUEUE_DEPTH_RULE}) / {threshold}), {low}, {high})"
        if autoscaling.min_replicas >= 1
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
                f'label_replace(vector(0), "group", "{autoscaling.service.group.name}", "", "")'
            ),
        },
        {"record": NODE_CHANGES_RULE, "expr": f"changes({GROUP_NODES_RULE}[1h])"},
        {"record": REPLICA_CHANGES_RULE, "expr": f"changes({SERVING_REPLICAS_RULE}[1h])"},
    ]
    if autoscaling.wake is not None:
        service = autoscaling.service
        active = (
            f'keda_scaler_active{{job="{KEDA_OPERATOR_JOB}",namespace="{service.namespace}",'
            f'scaledObject="{service.name}"}}'
        )
        rules.append({"record": WAKE_DEMAND_RULE, "expr": f"max({active}) or vector(0)"})
    return rules


def _wake_alerts(autoscaling: VllmReplicaAutoScaling) -> list[dict[str, object]]:
    """``WAKE_ALERT``: a trigger asks for a replica and none serves, longer than the wake."""
    wake = autoscaling.wake
    if wake is None:
        return []
    name = autoscaling.service.name
    minutes = math.ceil(wake.total_seconds / 60)
    return [
        {
            "alert": WAKE_ALERT,
            "expr": f"{WAKE_DEMAND_RULE} > 0 and on() {SERVING_REPLICAS_RULE} == 0",
            "for": f"{minutes}m",
            "labels": {"severity": "warning", "service": name},
            "annotations": {
                "summary": (
                    f"{name}: woken from zero (a KEDA trigger is active) but no replica serves "
                    f"after the wake time ({minutes} min): GPU group "
                    f"{autoscaling.service.group.name!r} got no nodes (capacity scarce, or at "
                    "its max_count); every request is refused"
                )
            },
        }
    ]


def scaling_rule_groups(autoscaling: VllmReplicaAutoScaling) -> str:
    """Recording rules for serving, desired and pending replicas, and the pending alarm."""
    name = autoscaling.service.name
    minutes = math.ceil(scale_out_seconds(autoscaling) / 60)
    alert = {
        "alert": PENDING_ALERT,
        "expr": f"{PENDING_REPLICAS_RULE} > 0",
        "for": f"{minutes}m",
        "labels": {"severity": "warning", "service": name},
        "annotations": {
            "summary": (
                f"{name}: replicas pending longer than a scale-out takes ({minutes} min): "
                f"GPU group {autoscaling.service.group.name!r} cannot grow (capacity scarce, "
                "or at its max_count); the serving replicas carry the load and requests queue"
            )
        },
    }
    alerts = [alert, *_wake_alerts(autoscaling)]
    document = {
        "groups": [
            {
                "name": f"{name}-scaling",
                "interval": "1m",
                "rules": [*_recording_rules(autoscaling), *alerts],
            }
        ]
    }
    return str(yaml.safe_dump(document, **_YAML_OPTIONS))


def add_scaling_panels(
    parent: Construct,
    board: cloudwatch.Dashboard,
    promql_widget: PromqlWidget,
    autoscaling: VllmReplicaAutoScaling,
) -> aps.CfnRuleGroupsNamespace:
    """The scaling rules and alarm in the workspace (under ``parent``), and their panels on
    ``board`` (drawn with ``promql_widget``, the dashboard's own)."""
    observability = autoscaling.observability
    scope = Construct(parent, "Scaling")
    rules = aps.CfnRuleGroupsNamespace(
        scope,
        "Rules",
        name=f"{autoscaling.service.name}-scaling",
        workspace=observability.workspace.attr_arn,
        data=scaling_rule_groups(autoscaling),
    )
    minutes = math.ceil(scale_out_seconds(autoscaling) / 60)
    wake = autoscaling.wake
    board.add_widgets(
        cloudwatch.TextWidget(
            markdown=(
                f"## Scaling: {autoscaling.min_replicas}-{autoscaling.max_replicas} replicas of "
                f"{autoscaling.service.nodes} node(s) in group `{autoscaling.service.group.name}`\n"
                f"One more replica serves after about {minutes} min (nodes, image, weights, engine). "
                + (
                    f"From zero, a first request waits up to {math.ceil(wake.total_seconds / 60)} min "
                    "(clients retry that long). "
                    if wake is not None
                    else ""
                )
                + f"`{PENDING_ALERT}` fires when replicas pend longer: the group cannot grow"
                + (
                    f"; `{WAKE_ALERT}` when a wake from zero finds no nodes."
                    if wake is not None
                    else "."
                )
            ),
            width=24,
            height=2,
        )
    )
    group = autoscaling.service.group
    panels = [
        ("Serving replicas", SERVING_REPLICAS_RULE, None),
        ("Replicas KEDA asks for", DESIRED_REPLICAS_RULE, float(autoscaling.max_replicas)),
        ("Pending replicas (waiting for nodes or starting)", PENDING_REPLICAS_RULE, None),
        (f"Nodes in group {group.name}", GROUP_NODES_RULE, float(group.capacity)),
        ("Node-count changes in the last hour", NODE_CHANGES_RULE, None),
        ("Serving-replica changes in the last hour", REPLICA_CHANGES_RULE, None),
    ]
    widgets: list[cloudwatch.IWidget] = [
        promql_widget(title, query, "", threshold) for title, query, threshold in panels
    ]
    widgets.append(
        cloudwatch.TextWidget(
            markdown=(
                "### Time to serve after scale-out\n"
                f"Estimated {minutes} min. Measured: the length of each spell of *Pending "
                "replicas* above 0."
            ),
            width=12,
            height=6,
        )
    )
    if len(widgets) % 2:
        widgets.append(
            cloudwatch.TextWidget(
                markdown=(
                    "### Scale events\n"
                    "A change of the node count is HyperPod's Karpenter adding or removing a "
                    f"node of `{group.name}` (its kubelet answers, or stops answering, the "
                    "scraper); a change of the serving replicas is KEDA's scale-out or a "
                    "drained scale-in."
                ),
                width=12,
                height=6,
            )
        )
    for left, right in zip(widgets[::2], widgets[1::2], strict=True):
        board.add_widgets(left, right)
    return rules

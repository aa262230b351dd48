"""SageMaker HyperPod: the dependencies chart the cluster needs, and the stack's node wait.

* "This Helm installation step is required ... If you set up the cluster directly using the
  APIs, use the provided Helm chart to configure your Amazon EKS cluster. Failure to configure
  your Amazon EKS cluster using the provided Helm chart might result in the SageMaker HyperPod
  cluster not functioning correctly or the creation process failing entirely."
  (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-install-packages-using-helm-chart.html;
  the chart is ``helm_chart/HyperPodHelmChart`` of aws/sagemaker-hyperpod-cli, installed before
  the cluster is created). CloudFormation creates the ``AWS::SageMaker::Cluster`` through that
  API. The chart's health-monitoring agent is what deep health checks report through; with
  on-start deep health checks and no chart the rehearsal counts creation as failing (blocking),
  without them as degraded. ASSUMED: blocking with deep health checks, degraded without (AWS
says creation "might" fail, not when).
* The node wait (``Custom::HyperPodNodesReady``): its handler, the asset in the assembly, is
  played with a SageMaker stub: one node ``Failure`` (botocore's ``ClusterInstanceStatus``), the
  others ``Running``. A handler that keeps waiting spends the whole budget (the stages'
  ``DeadlineSeconds``) on a node that will not come; then CloudFormation rolls the stack back
  and deletes the cluster unless it is retained
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-deletionpolicy.html),
  giving up the capacity.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from pathlib import Path
from typing import Any

from rehearsal.findings import Finding
from rehearsal.world import World

CHART_SOURCE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-install-packages-using-helm-chart.html"
WAIT_SOURCE = (
    "botocore sagemaker model ClusterInstanceStatus (Failure); "
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-deletionpolicy.html"
)
#: The chart's name in its Chart.yaml, and the release AWS's page installs it as.
CHART_NAMES = ("hyperpod-helm-chart", "hyperpod-dependencies")


def dependencies_chart(
    world: World, cluster_id: str, groups: list[Any], charts_before: list[dict[str, Any]]
) -> Finding | None:
    """The HyperPod cluster is created after the dependencies chart, or fails (deep checks)."""
    if any(
        c.get("Release") in CHART_NAMES or str(c.get("Chart", "")).endswith(CHART_NAMES)
        for c in charts_before
    ):
        return None
    deep = [g.name for g in groups if g.deep_health_checks]
    return Finding(
        "hyperpod.dependencies-chart-missing",
        f"{cluster_id} (AWS::SageMaker::Cluster)",
        "the cluster is created with no HyperPod dependencies chart installed before it"
        + (f", while groups {deep} run on-start deep health checks" if deep else ""),
        CHART_SOURCE,
        "blocking" if deep else "degrades",
    )


def _load_handler(world: World) -> Any | None:
    """The node-wait handler module among the assembly's assets (``index.py`` with ``is_complete``)."""
    for candidate in sorted(world.assembly.directory.glob("asset.*/index.py")):
        text = candidate.read_text(errors="replace")
        if "def is_complete" in text and "ListClusterNodes" in text:
            spec = importlib.util.spec_from_file_location(
                f"rehearsal_node_wait_{candidate.parent.name[6:14]}", candidate
            )
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            return module
    return None


class _Nodes:
    def __init__(self, summaries: list[dict[str, Any]]) -> None:
        self.summaries = summaries

    def list_cluster_nodes(self, **_: Any) -> dict[str, Any]:
        return {"ClusterNodeSummaries": self.summaries}


def node_wait(
    world: World, stages: list[tuple[str, dict[str, Any]]], cluster_retained: bool
) -> Finding | None:
    """Play the node-wait handler with one node in ``Failure``: does it fail fast?"""
    if not stages:
        return None
    handler = _load_handler(world)
    if handler is None:
        return None
    budget = sum(float(props.get("DeadlineSeconds", 0)) for _, props in stages)
    logical_id, props = stages[0]
    groups = {name: int(count) for name, count in props["InstanceGroups"].items()}
    summaries: list[dict[str, Any]] = []
    for name, count in groups.items():
        for index in range(count):
            status = "Failure" if not summaries else "Running"
            summaries.append(
                {
                    "InstanceGroupName": name,
                    "InstanceId": f"i-{index}",
                    "InstanceStatus": {"Status": status, "Message": "rehearsal: instance failed"},
                }
            )
    event = {"RequestType": "Create", "ResourceProperties": props, "Data": {"StartedAt": "1000"}}
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its progress line
            answer = handler.is_complete(event, None, client=_Nodes(summaries), now=1060.0)
    except Exception:  # noqa: BLE001 (a handler that raises fails fast: what we want)
        return None
    if answer.get("IsComplete"):
        return None
    return Finding(
        "node-wait.no-fail-fast",
        f"{logical_id} (Custom::HyperPodNodesReady)",
        f"a node in Failure keeps the wait going: up to {budget / 60:.0f} minutes "
        f"({' + '.join(str(int(float(p['DeadlineSeconds']))) for _, p in stages)} s) before it fails"
        + (
            ""
            if cluster_retained
            else ", then the rollback deletes the HyperPod cluster and gives up its capacity"
        ),
        WAIT_SOURCE,
        "degrades",
    )


def handler_path(world: World) -> Path | None:
    module = _load_handler(world)
    return Path(module.__file__) if module is not None and module.__file__ else None

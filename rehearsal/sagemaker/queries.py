"""The PromQL a synthesized stack runs against detailed observability, as the template has it:
each ``AWS::CloudWatch::Alarm``'s ``EvaluationCriteria.PromQLCriteria.Query``
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-PromQL-Alarms.html)
and each dashboard custom widget's ``params.query`` (the chart function sends it unchanged as
``query`` of ``api/v1/query_range``: cdk_llm_serving/_cdk/assets/amp_widget/index.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _joined(value: Any) -> str | None:
    """A ``Fn::Join`` of strings and references as text (references become ``REF``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(p if isinstance(p, str) else "REF" for p in parts)
    return None


def promql_queries(template: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(label, query)`` for every PromQL alarm and chart, in logical-id order."""
    found: list[tuple[str, str]] = []
    for logical_id, resource in sorted(template.get("Resources", {}).items()):
        props = resource.get("Properties", {})
        if resource.get("Type") == "AWS::CloudWatch::Alarm":
            query = props.get("EvaluationCriteria", {}).get("PromQLCriteria", {}).get("Query")
            if isinstance(query, str):
                found.append((f"alarm {logical_id}", query))
        elif resource.get("Type") == "AWS::CloudWatch::Dashboard":
            body = _joined(props.get("DashboardBody"))
            if body is None:
                continue
            for widget in json.loads(body).get("widgets", []):
                if widget.get("type") != "custom":
                    continue
                widget_props = widget.get("properties", {})
                query = widget_props.get("params", {}).get("query")
                if isinstance(query, str):
                    title = widget_props.get("title") or query[:40]
                    found.append((f"chart {logical_id} '{title}'", query))
    return found

"""CloudWatch custom widget: a PromQL range query against Amazon Managed Prometheus, drawn as SVG.

CloudWatch dashboards call this function with the widget's ``params`` and the dashboard's
time range; it queries the workspace (SigV4, service ``aps``) and returns an SVG line
chart. Standard library and botocore only (both in the Lambda Python runtime).
"""

from __future__ import annotations

import html
import json
import os
import urllib.parse
import urllib.request
from typing import Any

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def signed_query_request(
    endpoint: str,
    region: str,
    query: str,
    start: float,
    end: float,
    step: float,
    credentials: Any = None,
    service: str = "aps",
) -> urllib.request.Request:
    """A SigV4-signed GET of ``<endpoint>api/v1/query_range``."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.session import get_session

    params = urllib.parse.urlencode(
        {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
    )
    url = f"{endpoint.rstrip('/')}/api/v1/query_range?{params}"
    request = AWSRequest(method="GET", url=url)
    SigV4Auth(credentials or get_session().get_credentials(), service, region).add_auth(request)
    return urllib.request.Request(url, headers=dict(request.headers.items()), method="GET")


def render_svg(
    result: dict[str, Any],
    *,
    title: str,
    unit: str = "",
    threshold: float | None = None,
    width: int = 600,
    height: int = 300,
) -> str:
    """Line chart of a Prometheus ``matrix`` result; a dashed line marks ``threshold``."""
    series = [
        (
            ", ".join(
                f"{k}={v}" for k, v in sorted(item.get("metric", {}).items()) if k != "__name__"
            )
            or title,
            [(float(t), float(v)) for t, v in item.get("values", [])],
        )
        for item in result.get("data", {}).get("result", [])
    ]
    points = [p for _, values in series for p in values]
    pad_left, pad_bottom, pad_top = 60, 30, 24
    plot_w, plot_h = max(width - pad_left - 10, 10), max(height - pad_bottom - pad_top, 10)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
        f'<text x="{pad_left}" y="14" font-weight="bold">{html.escape(title)}</text>',
    ]
    if not points:
        out.append(
            f'<text x="{pad_left}" y="{pad_top + plot_h / 2}">no data in this time range</text></svg>'
        )
        return "".join(out)
    t0, t1 = min(p[0] for p in points), max(p[0] for p in points)
    values = [p[1] for p in points] + ([threshold] if threshold is not None else [])
    v0, v1 = min(0.0, min(values)), max(values) or 1.0

    def x(t: float) -> float:
        return pad_left + (t - t0) / ((t1 - t0) or 1) * plot_w

    def y(v: float) -> float:
        return pad_top + plot_h - (v - v0) / ((v1 - v0) or 1) * plot_h

    out.append(
        f'<line x1="{pad_left}" y1="{pad_top + plot_h}" x2="{pad_left + plot_w}" y2="{pad_top + plot_h}" stroke="#888"/>'
    )
    for fraction in (0.0, 0.5, 1.0):
        value = v0 + (v1 - v0) * fraction
        out.append(f'<text x="4" y="{y(value) + 4:.1f}">{value:.3g}{html.escape(unit)}</text>')
    if threshold is not None:
        out.append(
            f'<line x1="{pad_left}" y1="{y(threshold):.1f}" x2="{pad_left + plot_w}" y2="{y(threshold):.1f}" stroke="#d62728" stroke-dasharray="4 3"/>'
        )
    for index, (label, values_) in enumerate(series):
        color = COLORS[index % len(COLORS)]
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in values_)
        out.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{path}"><title>{html.escape(label)}</title></polyline>'
        )
    out.append("</svg>")
    return "".join(out)


def handler(event: dict[str, Any], context: Any = None) -> str:
    if event.get("describe"):
        return "Draws a PromQL range query from Amazon Managed Prometheus. Params: query, title, unit, threshold."
    params = event.get("params") or {}
    widget = event.get("widgetContext") or {}
    time_range = widget.get("timeRange") or {}
    end = (time_range.get("end") or 0) / 1000
    start = (time_range.get("start") or 0) / 1000
    step = max(60.0, (end - start) / 120)
    request = signed_query_request(
        os.environ["PROMETHEUS_ENDPOINT"],
        os.environ["AWS_REGION"],
        params["query"],
        start,
        end,
        step,
        service=os.environ.get("SIGV4_SERVICE", "aps"),
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        result = json.loads(response.read())
    return render_svg(
        result,
        title=params.get("title", params["query"]),
        unit=params.get("unit", ""),
        threshold=params.get("threshold"),
        width=int(widget.get("width") or 600),
        height=int(widget.get("height") or 300),
    )

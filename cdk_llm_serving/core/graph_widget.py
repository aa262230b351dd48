"""A CloudWatch graph widget written the short way the dashboard-body syntax allows.

aws-cdk-lib's ``GraphWidget`` writes every line in full: namespace, metric name, each
dimension, and the period and statistic of every metric, plus ``"view":"timeSeries"`` and
an empty ``yAxis``. A pool endpoint's dashboard holds some twenty such lines that differ in
one value (the instance type), so this widget writes what CloudWatch's dashboard body
syntax (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html)
lets it leave out:

- ``period`` and ``stat`` once per widget: the metric widget's ``period`` is "the default
  period, in seconds, for all metrics in this widget", ``stat`` "the default statistic to be
  displayed for each metric in the array"; a line overrides either in its own options.
- ``view`` left out: its default is ``timeSeries``; ``height`` too when it is the default 6.
- ``"."`` for a value equal to the one at the same position of the previous metric (section
  "Metric Widget: Format for Each Metric in the Array"; never in the first metric: CloudWatch
  rejects it there, awsdocs/amazon-cloudwatch-user-guide issue #10). Only between two
  consecutive metric lines: after an expression line the next metric is written in full. A
  dimension's name stays next to each value written, so a line reads on its own.

The body is the same chart, data and legend as aws-cdk-lib's; only the JSON is shorter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsii
from aws_cdk import aws_cloudwatch as cloudwatch

#: One entry of a widget's ``metrics`` array: ``[namespace, name, dim, value, ..., {options}]``
#: for a metric, ``[{"expression": ..., ...}]`` for metric math.
Line = list[Any]

SAME = "."
#: A widget's height when the body gives none ("The default is 6", Widgets Array Structure).
DEFAULT_HEIGHT = 6


def metric_line(
    namespace: str,
    metric_name: str,
    dimensions: Sequence[tuple[str, str]],
    **options: Any,
) -> Line:
    """A metric line; ``options`` (``label``, ``id``, ``stat``, ``visible``, ``yAxis``...) only
    where they differ from the widget's defaults."""
    line: Line = [namespace, metric_name]
    for name, value in dimensions:
        line += [name, value]
    return line + [options] if options else line


def expression_line(expression: str, **options: Any) -> Line:
    return [{"expression": expression, **options}]


def shorten(lines: Sequence[Line]) -> list[Line]:
    """Each value equal to the previous metric line's at the same position becomes ``"."``."""
    out: list[Line] = []
    previous: Line | None = None
    for line in lines:
        if isinstance(line[0], dict):  # an expression: the next metric starts afresh
            out.append(list(line))
            previous = None
            continue
        values = [v for v in line if not isinstance(v, dict)]
        options = line[len(values) :]
        out.append((_same_as(previous, values) if previous else values) + options)
        previous = values
    return out


def _same_as(previous: Line, values: Line) -> Line:
    """``"."`` where ``values`` repeats ``previous``. A dimension's name is kept wherever its
    value is written, so every written value reads with its name (``"InstanceType","ml..."``)."""
    same = [i < len(previous) and previous[i] == v for i, v in enumerate(values)]
    for name in range(2, len(values) - 1, 2):  # [namespace, metric, name, value, name, value...]
        same[name] = same[name] and same[name + 1]
    return [SAME if equal else v for equal, v in zip(same, values, strict=True)]


class PythonWidget:
    """What aws-cdk-lib reads of a widget written in Python besides its body: its size (set
    by the subclass as ``_width`` and ``_height``) and its warnings (none)."""

    _width: int
    _height: int

    @property
    def width(self) -> jsii.Number:
        return self._width

    @property
    def height(self) -> jsii.Number:
        return self._height

    @property
    def warnings(self) -> list[str] | None:
        return None

    @property
    def warnings_v2(self) -> Mapping[str, str] | None:
        return None


@jsii.implements(cloudwatch.IWidget)
class GraphWidget(PythonWidget):
    """A ``timeSeries`` metric widget (``aws_cloudwatch.IWidget``, for ``Dashboard.add_widgets``).

    :param title: the chart's title.
    :param region: the metrics' region (required by the body syntax).
    :param lines: the ``metrics`` array (``metric_line``, ``expression_line``).
    :param width: in grid units of 24.
    :param period: default period of every line, in seconds. Default: 60.
    :param stat: default statistic of every line. Default: CloudWatch's (``Average``).
    :param properties: further widget properties (``annotations``, ``yAxis``...).
    """

    def __init__(
        self,
        *,
        title: str,
        region: str,
        lines: Sequence[Line],
        width: int,
        height: int = DEFAULT_HEIGHT,
        period: int = 60,
        stat: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        self._width, self._height = width, height
        self._x, self._y = 0, 0
        self._properties: dict[str, Any] = {"title": title, "region": region, "period": period}
        if stat is not None:
            self._properties["stat"] = stat
        self._properties["metrics"] = shorten(lines)
        self._properties.update(properties or {})

    @property
    def properties(self) -> Mapping[str, Any]:
        """The widget's ``properties`` object as written to the dashboard body."""
        return self._properties

    def position(self, x: jsii.Number, y: jsii.Number) -> None:
        self._x, self._y = int(x), int(y)

    def to_json(self) -> list[Any]:
        size = {"width": self._width}
        if self._height != DEFAULT_HEIGHT:
            size["height"] = self._height
        return [
            {"type": "metric", **size, "x": self._x, "y": self._y, "properties": self._properties}
        ]

"""Many dashboard widgets laid out in Python and written as one dashboard body.

Every widget given to ``aws_cloudwatch.Dashboard.add_widgets`` is a round trip to the jsii
kernel, and every Python-implemented one (``graph_widget.GraphWidget``) is called back from
Node.js at synth for its ``width``, ``height``, ``position`` and ``toJson``: about ten calls
across the process boundary per widget, a pool endpoint's dashboard holding a dozen. A
``WidgetGrid`` places its rows itself, exactly as aws-cdk-lib 2.275's ``Row`` and ``Column``
do (``aws-cloudwatch/lib/layout.js``: a row puts widgets left to right and wraps at the grid
width of 24; a column stacks rows), and ``dashboard_body`` writes the body a ``Dashboard``
holding those rows would write, byte for byte, as text for a ``CfnDashboard``: no widget
crosses the process boundary.

The cells are plain Python objects with the same ``width``, ``height``, ``position`` and
``to_json`` as an ``IWidget``: ``graph_widget.GraphWidget`` and the text and custom widgets
below, whose bodies are the ones aws-cdk-lib's ``TextWidget`` and ``CustomWidget`` write
(``aws-cloudwatch/lib/text.js``, ``graph.js``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import jsii
from aws_cdk import aws_cloudwatch as cloudwatch

from .graph_widget import PythonWidget

#: The dashboard grid's width (aws-cdk-lib's ``GRID_WIDTH``).
GRID_WIDTH = 24


class Cell(Protocol):
    """What a grid needs of a widget: its size, a place, and its body."""

    @property
    def width(self) -> jsii.Number: ...

    @property
    def height(self) -> jsii.Number: ...

    def position(self, x: jsii.Number, y: jsii.Number) -> None: ...

    def to_json(self) -> list[Any]: ...


class _Placed:
    """A widget's size and grid position (aws-cdk-lib's ``ConcreteWidget``)."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.x, self.y = 0, 0

    def position(self, x: jsii.Number, y: jsii.Number) -> None:
        self.x, self.y = int(x), int(y)

    def _body(self, kind: str, properties: Mapping[str, Any]) -> list[Any]:
        return [
            {
                "type": kind,
                "width": self.width,
                "height": self.height,
                "x": self.x,
                "y": self.y,
                "properties": properties,
            }
        ]


class TextCell(_Placed):
    """A markdown text widget, as ``aws_cloudwatch.TextWidget`` writes it (no background)."""

    def __init__(self, markdown: str, *, width: int, height: int) -> None:
        super().__init__(width, height)
        self.markdown = markdown

    def to_json(self) -> list[Any]:
        return self._body("text", {"markdown": self.markdown})


class CustomCell(_Placed):
    """A custom (Lambda-rendered) widget, as ``aws_cloudwatch.CustomWidget`` writes it with
    every ``updateOn`` flag on (its defaults)."""

    def __init__(
        self, *, function_arn: str, title: str, params: Mapping[str, Any], width: int, height: int
    ) -> None:
        super().__init__(width, height)
        self.properties = {
            "endpoint": function_arn,
            "params": dict(params),
            "title": title,
            "updateOn": {"refresh": True, "resize": True, "timeRange": True},
        }

    def to_json(self) -> list[Any]:
        return self._body("custom", self.properties)


class AlarmStatusCell(_Placed):
    """An alarm status widget, as ``aws_cloudwatch.AlarmStatusWidget`` writes it with a title
    and CloudWatch's default states and order (``aws-cloudwatch/lib/alarm-status-widget.js``)."""

    def __init__(self, alarm_arns: Sequence[str], *, title: str, width: int, height: int) -> None:
        super().__init__(width, height)
        self.properties = {"title": title, "alarms": list(alarm_arns)}

    def to_json(self) -> list[Any]:
        return self._body("alarm", self.properties)


class _Row:
    """Widgets left to right, wrapping at the grid's width (``Row`` in ``layout.js``)."""

    def __init__(self, cells: Sequence[Cell]) -> None:
        self.cells = list(cells)
        self.offsets: list[tuple[int, int]] = []
        self.width, self.height = 0, 0
        x, y = 0, 0
        for cell in self.cells:
            if x + cell.width > GRID_WIDTH:
                x, y = 0, self.height
            self.offsets.append((x, y))
            self.width = max(self.width, x + int(cell.width))
            self.height = max(self.height, y + int(cell.height))
            x += int(cell.width)

    def position(self, x: int, y: int) -> None:
        for cell, (dx, dy) in zip(self.cells, self.offsets, strict=True):
            cell.position(x + dx, y + dy)


@jsii.implements(cloudwatch.IWidget)
class WidgetGrid(PythonWidget):
    """Rows of cells, stacked as one ``Dashboard.add_widgets`` call per row would stack them.

    :param rows: each row's cells, left to right; an empty row is skipped, as
        ``add_widgets()`` with no widget is.
    """

    def __init__(self, rows: Sequence[Sequence[Cell]]) -> None:
        self._rows = [_Row(cells) for cells in rows if cells]
        self._width = max((row.width for row in self._rows), default=0)
        self._height = sum(row.height for row in self._rows)

    def position(self, x: jsii.Number, y: jsii.Number) -> None:
        top = int(y)
        for row in self._rows:
            row.position(int(x), top)
            top += row.height

    def to_json(self) -> list[Any]:
        return [body for row in self._rows for cell in row.cells for body in cell.to_json()]


def dashboard_body(grid: WidgetGrid, *, start: str) -> str:
    """The dashboard body ``aws_cloudwatch.Dashboard`` writes for ``grid`` alone, as text.

    aws-cdk-lib renders the body with ``Stack.to_json_string`` (``JSON.stringify`` without
    spaces, non-ASCII kept, keys in insertion order; ``core/lib/private/cloudformation-lang.js``):
    the same text as ``json.dumps`` with these settings, once whole floats are written as
    integers as JavaScript does. A token in a string (a function's or an alarm's ARN) stays
    in the text and is resolved as aws-cdk-lib resolves any string holding one, into the same
    ``Fn::Join``.
    """
    grid.position(0, 0)
    body = {"start": start, "widgets": grid.to_json()}
    return json.dumps(_js_numbers(body), separators=(",", ":"), ensure_ascii=False)


def _js_numbers(value: Any) -> Any:
    """Whole floats as integers (JavaScript writes ``1.0`` as ``1``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _js_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_js_numbers(item) for item in value]
    return value

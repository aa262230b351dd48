"""A small evaluator of CloudWatch metric-math expressions at one timestamp.

Covers what our expressions use: numbers, ids, + - * /, comparisons, parentheses,
FILL(series, value) and IF(condition, a[, b]), with CloudWatch's documented rules for
missing data points (Amazon CloudWatch User Guide, "Using metric math",
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html; the
same text in awsdocs/amazon-cloudwatch-user-guide ``doc_source/using-metric-math.md``):

* arithmetic: "Missing values in a time series are treated as 0. If the value of a data point
  causes a function to attempt to divide by zero, the data point is dropped." A series
  operated with a scalar has no point where the series has none; two series with no point at
  a timestamp give none.
* comparison: "When comparison operators are used between two time series, and only one of the
  time series has a value for a particular time stamp, the function treats the missing value
  in the other time series as 0."
* ``IF(metric1, metric2, metric3)``: the value of metric2 where metric1 is TRUE (0 where
  metric2 has no point), of metric3 where FALSE; "is dropped, if the corresponding data point
  of metric1 is FALSE and the corresponding data point does not exist in metric3 or if
  metric3 is omitted"; no point where metric1 has none.
* ``FILL(m, value)``: "Fills the missing values of a time series". Whether FILL also makes a
  point where NO series of the query has data (a full metrics outage) the page does not say:
  ``fill_without_data`` chooses (True, the default, is the worst case for a scaling policy:
  filled zeros where nothing was published).

A missing data point is ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Value = float | None
_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d+)?(?:e[-+]?\d+)?)|(?P<name>[A-Za-z_]\w*)|(?P<op>>=|<=|==|!=|[-+*/(),<>]))"
)


@dataclass(frozen=True)
class _V:
    """A value at the timestamp: ``series`` (from a metric or expression) or a scalar."""

    value: Value
    series: bool


def tokenize(expression: str) -> list[str]:
    tokens, position = [], 0
    expression = expression.strip()
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if not match or match.end() == position:
            raise SyntaxError(f"cannot read {expression[position:]!r}")
        tokens.append(match.group(match.lastgroup))
        position = match.end()
    return tokens


def _binary(left: _V, right: _V, op: Callable[[float, float], float | None]) -> _V:
    series = left.series or right.series
    a, b = left.value, right.value
    if a is None and b is None:
        return _V(None, series)
    if a is None or b is None:
        # A scalar with a series that has no point here: no point. Two series: missing is 0.
        if not (left.series and right.series):
            return _V(None, series)
        a, b = a or 0.0, b or 0.0
    return _V(op(a, b), series)


def _divide(a: float, b: float) -> float | None:
    return None if b == 0 else a / b  # "the data point is dropped"


class _Parser:
    def __init__(self, tokens: list[str], env: Mapping[str, Value], fill_without_data: bool):
        self.tokens, self.position, self.env = tokens, 0, env
        self.fill_without_data = fill_without_data

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise SyntaxError(f"expected {expected!r}, found {token!r}")
        self.position += 1
        return token

    def parse(self) -> Value:
        value = self.comparison()
        if self.peek() is not None:
            raise SyntaxError(f"unexpected {self.peek()!r}")
        return value.value

    def comparison(self) -> _V:
        left = self.additive()
        ops: dict[str, Callable[[float, float], bool]] = {
            ">": lambda a, b: a > b,
            "<": lambda a, b: a < b,
            ">=": lambda a, b: a >= b,
            "<=": lambda a, b: a <= b,
            "==": lambda a, b: a == b,
            "!=": lambda a, b: a != b,
        }
        while self.peek() in ops:
            op = ops[self.take()]
            right = self.additive()
            left = _binary(left, right, lambda a, b, op=op: float(op(a, b)))  # type: ignore[misc]
        return left

    def additive(self) -> _V:
        left = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            right = self.term()
            left = _binary(left, right, (lambda a, b: a + b) if op == "+" else (lambda a, b: a - b))
        return left

    def term(self) -> _V:
        left = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()
            right = self.unary()
            left = _binary(left, right, (lambda a, b: a * b) if op == "*" else _divide)
        return left

    def unary(self) -> _V:
        if self.peek() == "-":
            self.take()
            inner = self.unary()
            return _V(None if inner.value is None else -inner.value, inner.series)
        return self.atom()

    def atom(self) -> _V:
        token = self.take()
        if token == "(":
            value = self.comparison()
            self.take(")")
            return value
        if re.fullmatch(r"\d.*", token):
            return _V(float(token), series=False)
        if self.peek() == "(":
            return self.call(token)
        if token not in self.env:
            raise NameError(f"unknown id {token!r}")
        return _V(self.env[token], series=True)

    def call(self, name: str) -> _V:
        self.take("(")
        args = [self.comparison()]
        while self.peek() == ",":
            self.take(",")
            args.append(self.comparison())
        self.take(")")
        if name == "FILL" and len(args) == 2:
            series, filler = args
            if series.value is not None:
                return series
            return _V(filler.value if self.fill_without_data else None, True)
        if name == "IF" and len(args) in (2, 3):
            condition, when_true = args[0], args[1]
            when_false = args[2] if len(args) == 3 else None
            if condition.value is None:
                return _V(None, True)
            if condition.value:
                return _V(0.0 if when_true.value is None else when_true.value, True)
            return _V(None if when_false is None else when_false.value, True)
        raise NameError(f"unsupported function {name}/{len(args)}")


def evaluate(expression: str, env: Mapping[str, Value], *, fill_without_data: bool = True) -> Value:
    return _Parser(tokenize(expression), env, fill_without_data).parse()


def evaluate_queries(
    queries: list[dict], metric_values: Mapping[str, Value], *, fill_without_data: bool = True
) -> Value:
    """Evaluate a synthesized ``Metrics`` list (CloudFormation shape) and return the result series.

    ``fill_without_data``: see the module docstring. When it is False and no metric of the
    query has a point at the timestamp, the query has no timestamp at all: no value.
    """
    env: dict[str, Value] = {}
    for query in queries:
        if "MetricStat" in query:
            env[query["Id"]] = metric_values.get(query["Id"])
    if not fill_without_data and all(value is None for value in env.values()):
        return None
    pending = [q for q in queries if "Expression" in q]
    while pending:  # expressions may reference each other in any order
        progressed = False
        for query in list(pending):
            try:
                env[query["Id"]] = evaluate(
                    query["Expression"], env, fill_without_data=fill_without_data
                )
            except NameError:
                continue
            pending.remove(query)
            progressed = True
        if not progressed:
            raise NameError(f"unresolvable expressions: {[q['Id'] for q in pending]}")
    (result,) = [q for q in queries if q.get("ReturnData", True) and "Expression" in q]
    return env[result["Id"]]

"""A small evaluator of CloudWatch metric-math expressions at one timestamp.

Covers what our expressions use: numbers, ids, + - * /, comparisons, parentheses,
FILL(series, value) and IF(condition, a, b). A missing datapoint is ``None``, and as in
CloudWatch an arithmetic operation with a missing operand has no value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Value = float | None
_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d+)?(?:e[-+]?\d+)?)|(?P<name>[A-Za-z_]\w*)|(?P<op>>=|<=|==|!=|[-+*/(),<>]))"
)


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


class _Parser:
    def __init__(self, tokens: list[str], env: Mapping[str, Value]) -> None:
        self.tokens, self.position, self.env = tokens, 0, env

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
        return value

    def comparison(self) -> Value:
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
            left = None if left is None or right is None else float(op(left, right))
        return left

    def additive(self) -> Value:
        left = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            right = self.term()
            left = (
                None
                if left is None or right is None
                else (left + right if op == "+" else left - right)
            )
        return left

    def term(self) -> Value:
        left = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()
            right = self.unary()
            if left is None or right is None:
                left = None
            elif op == "*":
                left = left * right
            else:
                left = (
                    None if right == 0 else left / right
                )  # CloudWatch: division by zero has no value
        return left

    def unary(self) -> Value:
        if self.peek() == "-":
            self.take()
            value = self.unary()
            return None if value is None else -value
        return self.atom()

    def atom(self) -> Value:
        token = self.take()
        if token == "(":
            value = self.comparison()
            self.take(")")
            return value
        if re.fullmatch(r"\d.*", token):
            return float(token)
        if self.peek() == "(":
            return self.call(token)
        if token not in self.env:
            raise NameError(f"unknown id {token!r}")
        return self.env[token]

    def call(self, name: str) -> Value:
        self.take("(")
        args = [self.comparison()]
        while self.peek() == ",":
            self.take(",")
            args.append(self.comparison())
        self.take(")")
        if name == "FILL" and len(args) == 2:
            return args[1] if args[0] is None else args[0]
        if name == "IF" and len(args) == 3:
            condition, when_true, when_false = args
            return None if condition is None else (when_true if condition else when_false)
        raise NameError(f"unsupported function {name}/{len(args)}")


def evaluate(expression: str, env: Mapping[str, Value]) -> Value:
    return _Parser(tokenize(expression), env).parse()


def evaluate_queries(queries: list[dict], metric_values: Mapping[str, Value]) -> Value:
    """Evaluate a synthesized ``Metrics`` list (CloudFormation shape) and return the result series."""
    env: dict[str, Value] = {}
    for query in queries:
        if "MetricStat" in query:
            env[query["Id"]] = metric_values.get(query["Id"])
    pending = [q for q in queries if "Expression" in q]
    while pending:  # expressions may reference each other in any order
        progressed = False
        for query in list(pending):
            try:
                env[query["Id"]] = evaluate(query["Expression"], env)
            except NameError:
                continue
            pending.remove(query)
            progressed = True
        if not progressed:
            raise NameError(f"unresolvable expressions: {[q['Id'] for q in pending]}")
    (result,) = [q for q in queries if q.get("ReturnData", True) and "Expression" in q]
    return env[result["Id"]]

"""Checks shared by the constructs; each adds to a ``Problems`` instead of raising."""

from __future__ import annotations

import difflib
import re
import weakref
from collections.abc import Iterable

from aws_cdk import Duration, Token

from ..errors import Problems
from .service_limits import Limits

#: aws-cdk-lib encodes a token in a string as ``${Token[…]}`` and in a number as a double near
#: -1.89e289 (``core/lib/private/encoding.ts``); ``Token.is_unresolved`` finds nothing else.
_STRING_TOKEN_MARKER = "${Token["
_NUMBER_TOKEN_BELOW = -1e288


def is_unresolved(value: object) -> bool:
    """Deploy-time values (tokens) cannot be checked at synth time.

    Asks aws-cdk-lib (a jsii round trip) only when the value carries a token's encoding.
    """
    if isinstance(value, str):
        return _STRING_TOKEN_MARKER in value and Token.is_unresolved(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value < _NUMBER_TOKEN_BELOW and Token.is_unresolved(value)
    return False


#: Seconds of each Duration already asked: defaults such as ``Duration.minutes(5)`` are one
#: object shared by every construct, and each ``to_seconds`` is a jsii round trip.
_seconds: weakref.WeakKeyDictionary[Duration, int] = weakref.WeakKeyDictionary()


def seconds_of(value: Duration | int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, Duration):
        if value not in _seconds:
            _seconds[value] = int(value.to_seconds())
        return _seconds[value]
    return value


def check_range(
    problems: Problems, prop: str, value: int | float | None, limits: Limits, unit: str = ""
) -> None:
    """``value`` must lie in the shape's [min, max]; ``None`` means "not set"."""
    if value is None or is_unresolved(value):
        return
    low, high = limits.minimum, limits.maximum
    if (low is not None and value < low) or (high is not None and value > high):
        suffix = f" {unit}" if unit else ""
        if high is None:
            problems.add(prop, value, f"must be at least {low}{suffix}")
        else:
            problems.add(prop, value, f"must be between {low} and {high}{suffix}")


def check_at_least(problems: Problems, prop: str, value: int | None, minimum: int) -> None:
    if value is None or is_unresolved(value):
        return
    if value < minimum:
        problems.add(prop, value, f"must be at least {minimum}")


def check_name(problems: Problems, prop: str, value: str | None, limits: Limits, what: str) -> None:
    """A SageMaker name: length bounds and the service's regex, matched in full."""
    if value is None or is_unresolved(value):
        return
    maximum = limits.maximum or 63
    pattern = limits.pattern or ""
    if not value or len(value) > maximum or not re.fullmatch(pattern, value):
        problems.add(
            prop,
            value,
            f"{what} must be 1-{maximum} characters matching {pattern!r} "
            "(letters, digits and hyphens; no leading or trailing hyphen)",
        )


def check_one_of(
    problems: Problems, prop: str, value: str | None, allowed: Iterable[str] | Limits, what: str
) -> None:
    """``value`` must be one of ``allowed``; the message names the closest matches, or, given
    ``Limits``, says when the API accepts the value but CloudFormation's schema does not."""
    if value is None or is_unresolved(value):
        return
    options = list(allowed.enum if isinstance(allowed, Limits) else allowed)
    if value in options:
        return
    if isinstance(allowed, Limits) and value in allowed.cloudformation_refuses:
        problems.add(
            prop,
            value,
            f"{what} must be one of {', '.join(options)}: the SageMaker API accepts {value} "
            f"but CloudFormation's {allowed.cloudformation_resource} schema does not, so the "
            "template would be refused (cfn-lint E3030)",
        )
        return
    close = difflib.get_close_matches(value, options, n=4, cutoff=0.6)
    hint = f"; closest: {', '.join(close)}" if close else ""
    if len(options) <= 8:
        problems.add(prop, value, f"{what} must be one of {', '.join(options)}")
    else:
        problems.add(prop, value, f"not one of the {len(options)} {what}{hint}")

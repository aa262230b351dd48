"""A ``Duration``'s seconds and human-readable form, as aws-cdk-lib gives them.

``Duration.to_seconds`` and ``Duration.to_human_string`` are each a round trip to the jsii
kernel; nothing is kept between calls here. Two ways to pay them less, neither a cache:

- a construct reads a value it was given once, in its constructor, and keeps the answer as
  its own state (``Span.read``);
- a module default is a ``Span`` written in plain Python numbers (``Span.of_seconds``): the
  ``Duration`` it holds is built once, at import, for the CDK APIs and signatures that take
  one, and its seconds and text are the numbers it was written with. ``Span.given`` answers
  for a parameter whose default is such a span: the span itself when the caller left the
  default, a ``Span.read`` of what the caller passed otherwise.

``validation.seconds_of`` reads whole seconds through here.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration

#: aws-cdk-lib's ``Duration.toHumanString`` units, largest first (its ``Duration.ts``):
#: a whole number of one unit prints as ``"<n> <unit>"`` (``"1 hour"``, ``"200 millis"``).
_UNITS = (
    (86_400, "day", Duration.days),
    (3_600, "hour", Duration.hours),
    (60, "minute", Duration.minutes),
    (1, "second", Duration.seconds),
)


def seconds(duration: Duration, *, integral: bool = True) -> float:
    """``duration.to_seconds(integral=...)``: with ``integral``, a fraction of a second is
    refused by aws-cdk-lib as it is there."""
    return duration.to_seconds(integral=integral)


def human(duration: Duration) -> str:
    """``duration.to_human_string()`` (``"1 hour"``, ``"200 millis"``)."""
    return duration.to_human_string()


@dataclass(frozen=True)
class Span:
    """A ``Duration`` with its seconds and, when known without the kernel, its text."""

    duration: Duration
    seconds: float
    #: ``duration.to_human_string()``, when this span was written in plain numbers.
    text: str | None = None

    @classmethod
    def of_seconds(cls, amount: float) -> Span:
        """A module default of a plain number of seconds, built once in its largest whole unit
        (``Duration.minutes(5)`` for 300): whole days, hours, minutes, seconds or milliseconds."""
        for unit_seconds, unit, of_unit in _UNITS:
            if amount >= unit_seconds and amount % unit_seconds == 0:
                count = int(amount // unit_seconds)
                return cls(of_unit(count), amount, f"{count} {unit}{'s' * (count != 1)}")
        millis = amount * 1000
        if millis != int(millis) or millis <= 0:
            raise ValueError(f"{amount} s is not a whole number of milliseconds")
        return cls(
            Duration.millis(int(millis)), amount, f"{int(millis)} milli{'s' * (millis != 1)}"
        )

    @classmethod
    def read(cls, duration: Duration, *, integral: bool = True) -> Span:
        """A given ``Duration``'s seconds, asked of the kernel once (``integral`` refuses a
        fraction of a second, as aws-cdk-lib does)."""
        return cls(duration, seconds(duration, integral=integral))

    def given(self, value: Duration, *, integral: bool = True) -> Span:
        """``self`` (a default) when ``value`` is its ``Duration``, else ``value`` read."""
        return self if value is self.duration else Span.read(value, integral=integral)

    def human(self) -> str:
        """``duration.to_human_string()``: the text it was written with, else the kernel's."""
        return self.text if self.text is not None else human(self.duration)

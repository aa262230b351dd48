"""A ``Duration``'s seconds and human-readable form, as aws-cdk-lib gives them.

Thin names over ``Duration.to_seconds`` and ``Duration.to_human_string`` (each a round trip to
the jsii kernel); nothing is kept between calls. ``validation.seconds_of`` reads whole seconds
through here.
"""

from __future__ import annotations

from aws_cdk import Duration


def seconds(duration: Duration, *, integral: bool = True) -> float:
    """``duration.to_seconds(integral=...)``: with ``integral``, a fraction of a second is
    refused by aws-cdk-lib as it is there."""
    return duration.to_seconds(integral=integral)


def human(duration: Duration) -> str:
    """``duration.to_human_string()`` (``"1 hour"``, ``"200 millis"``)."""
    return duration.to_human_string()

"""A ``Duration``'s seconds and human-readable form, read from the jsii kernel once.

``Duration`` objects are immutable, and the library's defaults (alarm thresholds, periods) are
module-level objects that every construct reads again: each ``to_seconds`` or
``to_human_string`` is a round trip to the kernel. The answers are kept per object, for as
long as the object lives; ``validation.seconds_of`` reads whole seconds through here.
"""

from __future__ import annotations

import weakref

from aws_cdk import Duration

_SECONDS: weakref.WeakKeyDictionary[Duration, dict[bool, float]] = weakref.WeakKeyDictionary()
_HUMAN: weakref.WeakKeyDictionary[Duration, str] = weakref.WeakKeyDictionary()


def seconds(duration: Duration, *, integral: bool = True) -> float:
    """``duration.to_seconds(integral=...)``: with ``integral``, a fraction of a second is
    refused by aws-cdk-lib as it is there."""
    known = _SECONDS.setdefault(duration, {})
    if integral not in known:
        known[integral] = duration.to_seconds(integral=integral)
    return known[integral]


def human(duration: Duration) -> str:
    """``duration.to_human_string()`` (``"1 hour"``, ``"200 millis"``)."""
    if duration not in _HUMAN:
        _HUMAN[duration] = duration.to_human_string()
    return _HUMAN[duration]

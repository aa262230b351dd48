"""The one contract every value type passed as a construct prop follows."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..errors import Problems


@runtime_checkable
class PropValue(Protocol):
    """A plain value (pool, deployment policy, instance group, ...) that checks itself.

    Its construct calls ``validate`` with the property name it was given under, so every
    problem of every value lands in the construct's one ``ConfigurationError``; only then
    does the construct call the value's render method (``to_cfn``, ``to_manifest``, ...).
    """

    def validate(self, problems: Problems, prop: str) -> None:
        """Add a problem for each invalid field, named ``{prop}.{field}``."""
        ...

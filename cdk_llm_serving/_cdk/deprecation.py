"""Deprecated props: they keep working for one release and say so as a synth warning.

Each deprecated name warns under its own id, ``cdk-llm-serving:deprecated:<Owner>.<name>``
(``Annotations.add_warning_v2``), so an app can acknowledge one rename at a time
(``Annotations.of(scope).acknowledge_warning(id)``) and ``cdk synth --strict`` fails on any it
has not. CHANGELOG.md lists every deprecated name and its replacement.
"""

from __future__ import annotations

from typing import Any, TypeVar

from aws_cdk import Annotations
from constructs import IConstruct

from ..errors import DEPRECATED_REMOVED_IN, Problems

T = TypeVar("T")

DEPRECATED_WARNING_PREFIX = "cdk-llm-serving:deprecated:"


def deprecation_warning_id(owner_dot_name: str) -> str:
    """The warning id of a deprecated name, e.g. ``cdk-llm-serving:deprecated:VllmPoolEndpoint.base``."""
    return DEPRECATED_WARNING_PREFIX + owner_dot_name


def warn_deprecated(scope: IConstruct, owner_dot_name: str, instead: str) -> None:
    """Warn on ``scope`` that ``owner_dot_name`` (``Owner.name``) is deprecated: use ``instead``."""
    Annotations.of(scope).add_warning_v2(
        deprecation_warning_id(owner_dot_name),
        f"{owner_dot_name} is deprecated; use {instead} (removed in {DEPRECATED_REMOVED_IN})",
    )


def renamed_prop(
    scope: IConstruct,
    problems: Problems,
    owner: str,
    old: str,
    old_value: Any,
    new: str,
    new_value: T,
    default: T | None = None,
) -> T | Any:
    """The value of a prop renamed from ``old`` to ``new``: ``new_value`` when given; else
    ``old_value`` with a deprecation warning; else ``default``. Both given is a problem."""
    if old_value is None:
        return new_value if new_value is not None else default
    if new_value is not None:
        problems.add(old, old_value, f"deprecated name of {new}; give only {new}")
        return new_value
    warn_deprecated(scope, f"{owner}.{old}", new)
    return old_value

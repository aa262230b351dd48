"""The one exception a construct raises for bad input, listing every problem at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One invalid property: where it is, what was given, and what is allowed."""

    property: str
    value: Any
    allowed: str

    def __str__(self) -> str:
        return f"{self.property} = {self.value!r}: {self.allowed}"


class ConfigurationError(ValueError):
    """Raised at synth time when a construct's input cannot deploy.

    ``problems`` holds every problem found in that construct, so a user fixes
    them in one pass instead of one synth per mistake.
    """

    def __init__(self, subject: str, problems: list[Problem]) -> None:
        self.subject = subject
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        noun = "problem" if len(self.problems) == 1 else "problems"
        super().__init__(f"{subject}: {len(self.problems)} {noun}\n{lines}")


class Problems:
    """Collects problems while a construct checks its input, then raises them together."""

    def __init__(self, subject: str) -> None:
        self.subject = subject
        self._problems: list[Problem] = []

    def add(self, prop: str, value: Any, allowed: str) -> None:
        self._problems.append(Problem(prop, value, allowed))

    def extend(self, problems: Problems) -> None:
        self._problems.extend(problems._problems)

    def __bool__(self) -> bool:
        return bool(self._problems)

    def raise_if_any(self, error: type[ConfigurationError] = ConfigurationError) -> None:
        """Raise ``error`` (a ``ConfigurationError`` or a subclass) listing every problem."""
        if self._problems:
            raise error(self.subject, self._problems)

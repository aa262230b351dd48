"""The one exception a construct raises for bad input, listing every problem at once."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin


@dataclass(frozen=True)
class Problem:
    """One invalid property: where it is, what was given, and what is allowed."""

    property: str
    value: Any
    allowed: str

    def __str__(self) -> str:
        return f"{self.property} = {self.value!r}: {self.allowed}"

    def __iter__(self) -> Iterator[Any]:
        """``prop, value, allowed = problem``."""
        return iter((self.property, self.value, self.allowed))

    def __getitem__(self, index: int) -> Any:
        """``problem[0]`` is the property, ``[1]`` the value, ``[2]`` what is allowed."""
        return (self.property, self.value, self.allowed)[index]


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

    def absorb(self, error: ConfigurationError, prefix: str = "") -> None:
        """Every problem of ``error`` (raised by a value or loader), under ``prefix.``."""
        for problem in error.problems:
            name = f"{prefix}.{problem.property}" if prefix else problem.property
            self.add(name, problem.value, problem.allowed)

    def __bool__(self) -> bool:
        return bool(self._problems)

    def __len__(self) -> int:
        return len(self._problems)

    def raise_if_any(self, error: type[ConfigurationError] = ConfigurationError) -> None:
        """Raise ``error`` (a ``ConfigurationError`` or a subclass) listing every problem."""
        if self._problems:
            raise error(self.subject, self._problems)


# -- checks shared by every layer (CDK-free: the planner, vLLM and CLI use them too) -----


def check_choice(
    problems: Problems, prop: str, value: Any, allowed: Iterable[str], what: str
) -> bool:
    """``value`` must be one of ``allowed``; the message names the closest matches.

    Returns whether it was (so a caller can skip checks that need a known value).
    """
    options = list(allowed)
    if isinstance(value, str) and value in options:
        return True
    close = (
        difflib.get_close_matches(value, options, n=4, cutoff=0.6) if isinstance(value, str) else []
    )
    hint = f"; closest: {', '.join(close)}" if close else ""
    if len(options) <= 8:
        problems.add(prop, value, f"{what} must be one of {', '.join(options)}")
    else:
        problems.add(prop, value, f"not one of the {len(options)} {what}{hint}")
    return False


def literal_values(literal: Any) -> tuple[Any, ...]:
    """The values a ``Literal[...]`` type (or a union/alias of them) allows, in order."""
    origin = get_origin(literal)
    if origin is Literal:
        return get_args(literal)
    if origin is Union or type(literal).__name__ == "UnionType":
        return tuple(v for arg in get_args(literal) for v in literal_values(arg))
    return ()


def check_literal(problems: Problems, prop: str, value: Any, literal: Any, what: str = "") -> bool:
    """``value`` must be one of the values of the ``Literal`` type ``literal``: the type is the
    one list, so adding a value to the type is the only edit an option needs."""
    allowed = literal_values(literal)
    if any(value == v and type(value) is type(v) for v in allowed):
        return True
    return check_choice(problems, prop, value, [str(v) for v in allowed], what or "values")


def check_sequence(
    problems: Problems, prop: str, value: Any, element: type | tuple[type, ...], what: str
) -> bool:
    """``value`` must be a list (or tuple) whose elements are each ``what`` (``element``).

    A string is refused as a whole (never one problem per character); each element of the
    wrong type is one problem naming its index. Returns whether the sequence is usable.
    """
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        problems.add(prop, value, f"must be a list, each element {what}; not {_kind(value)}")
        return False
    ok = True
    for index, item in enumerate(value):
        if not isinstance(item, element):
            problems.add(f"{prop}[{index}]", item, f"must be {what}, not {_kind(item)}")
            ok = False
    return ok


def _kind(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def check_keywords(
    problems: Problems, prop: str, given: Mapping[str, Any], allowed: Iterable[str]
) -> bool:
    """Keyword arguments passed through ``**options`` must be ones the receiver takes."""
    names = sorted(allowed)
    ok = True
    for name in given:
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
            listed = f"did you mean {close[0]!r}?" if close else f"options: {', '.join(names)}"
            problems.add(f"{prop}.{name}", given[name], f"not an option; {listed}")
            ok = False
    return ok


def typed_dict_keys(typed_dict: Any) -> frozenset[str]:
    """The keys a ``TypedDict`` declares (its ``Unpack[...]`` options)."""
    return frozenset(typed_dict.__required_keys__ | typed_dict.__optional_keys__)


def refuse_unknown_options(
    subject: str, prop: str, given: Mapping[str, Any], typed_dict: Any
) -> None:
    """``**options`` typed as ``Unpack[typed_dict]``: a misspelled key is a ``ConfigurationError``
    naming it and the closest option, not Python's ``TypeError`` further down."""
    problems = Problems(subject)
    check_keywords(problems, prop, given, typed_dict_keys(typed_dict))
    problems.raise_if_any()

"""The one exception a construct raises for bad input, listing every problem at once, and
the checks that fill it (docs/design/errors-and-checks.md)."""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import UnionType
from typing import (
    Any,
    ClassVar,
    Literal,
    Self,
    TypeVar,
    Union,
    Unpack,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

F = TypeVar("F", bound=Callable[..., None])
T = TypeVar("T")


@dataclass(frozen=True)
class Problem:
    """One invalid property: where it is, what was given, and what is allowed."""

    property: str
    value: Any
    allowed: str

    def __str__(self) -> str:
        # A typed name (``CheckedName``) reads as the name the user wrote.
        value = str.__str__(self.value) if isinstance(self.value, CheckedName) else self.value
        return f"{self.property} = {value!r}: {self.allowed}"


class ConfigurationError(ValueError):
    """Raised at synth time when a construct's input cannot deploy; ``problems`` holds every
    problem found in that construct, so a user fixes them in one pass."""

    def __init__(self, subject: str, problems: list[Problem]) -> None:
        self.subject = subject
        self.problems = tuple(problems)
        _RECENT.append(self)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        noun = "problem" if len(self.problems) == 1 else "problems"
        super().__init__(f"{subject}: {len(self.problems)} {noun}\n{lines}")


class ArgumentError(ConfigurationError, TypeError):
    """A construct called with a missing, unknown or extra argument: a ``ConfigurationError``
    naming each, and still the ``TypeError`` Python raises for a call that does not bind."""


#: The last errors made: one that crossed jsii as text can be shown whole (``error_display``).
_RECENT: collections.deque[ConfigurationError] = collections.deque(maxlen=32)


def recently_raised() -> tuple[ConfigurationError, ...]:
    """The last ``ConfigurationError`` objects made, oldest first (at most 32)."""
    return tuple(_RECENT)


class Problems:
    """Collects problems while a construct checks its input, then raises them together."""

    def __init__(self, subject: str | Callable[[], str]) -> None:
        self._subject = subject
        self._problems: list[Problem] = []

    @property
    def subject(self) -> str:
        """What the problems are about; a function is called only when read (a construct's
        path is a jsii call, paid only to report a problem)."""
        if callable(self._subject):
            self._subject = self._subject()
        return self._subject

    def add(self, prop: str, value: Any, allowed: str) -> None:
        self._problems.append(Problem(prop, value, allowed))

    def extend(self, problems: Problems | Iterable[Problem], prefix: str = "") -> None:
        """Every problem of ``problems`` (another ``Problems``, or ``Problem`` objects such as
        ``VllmConfig.problems()``), each under ``prefix.``."""
        found = problems.problems() if isinstance(problems, Problems) else problems
        self._problems.extend(
            dataclasses.replace(p, property=f"{prefix}.{p.property}") if prefix else p
            for p in found
        )

    def absorb(self, error: ConfigurationError, prefix: str = "") -> None:
        """Every problem of ``error`` (raised by a value or loader), under ``prefix.``."""
        self.extend(error.problems, prefix)

    def __bool__(self) -> bool:
        return bool(self._problems)

    def __len__(self) -> int:
        return len(self._problems)

    def problems(self) -> tuple[Problem, ...]:
        """The problems found so far."""
        return tuple(self._problems)

    def raise_if_any(self, error: type[ConfigurationError] = ConfigurationError) -> None:
        """Raise ``error`` (a ``ConfigurationError`` or a subclass) listing every problem."""
        if self._problems:
            raise error(self.subject, self._problems)


class CheckedName(str):
    """A name checked once, when it is made (``InstanceType``, ``KubernetesVersion``): a
    ``str``, so a template is the same whichever a user passes. A subclass gives ``_check``
    (adds the problem, with the closest names, for a value it refuses; returns whether it
    accepts it) and ``_PROP``, the property its own error names."""

    _PROP: ClassVar[str]

    def __new__(cls, value: str) -> Self:
        if isinstance(value, cls):
            return value
        problems = Problems(cls.__name__)
        if not cls._check(problems, cls._PROP, value):
            problems.raise_if_any()
        return super().__new__(cls, value)

    @classmethod
    def of(cls, value: str) -> Self:
        """``value`` as this type (the same object when it already is one); a
        ``ConfigurationError`` naming the closest names for one it refuses."""
        return cls(value)

    @classmethod
    def parse(cls, problems: Problems, prop: str, value: object) -> Self | None:
        """``value`` as this type, or ``None`` with the problem added to ``problems`` under
        ``prop`` (for constructs that report every problem at once)."""
        if isinstance(value, cls):
            return value
        if not cls._check(problems, prop, value):
            return None
        return str.__new__(cls, str(value))

    @classmethod
    def coerce(cls, value: T) -> Self | T:
        """``value`` as this type when it is a valid name; anything else unchanged (a
        deploy-time token, or a name the owner's ``validate`` reports with its other problems).
        For value types that convert a name when they are made and check it later."""
        if isinstance(value, cls) or not isinstance(value, str):
            return value
        return cls.parse(Problems(""), cls._PROP, value) or value

    @classmethod
    def _known(cls, value: str) -> Self:
        """A value known to be valid (constants), made without the check."""
        return str.__new__(cls, value)

    @classmethod
    def _check(cls, problems: Problems, prop: str, value: object) -> bool:
        raise NotImplementedError

    @property
    def name(self) -> str:
        """The plain name."""
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


# -- checks shared by every layer (CDK-free: the planner, vLLM and CLI use them too) -----


def check_choice(
    problems: Problems, prop: str, value: Any, allowed: Iterable[str], what: str
) -> bool:
    """``value`` must be one of ``allowed``; the message names the closest matches. Returns
    whether it was (so a caller can skip checks that need a known value)."""
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
    if origin is Union or isinstance(literal, UnionType):
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
    """``value`` must be a list (or tuple) whose elements are each ``what`` (``element``): a
    string is refused whole, each bad element is one problem. Returns whether it is usable."""
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
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


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
            where = f"{prop}.{name}" if prop else name
            problems.add(where, given[name], f"not an option; {listed}")
            ok = False
    return ok


def typed_dict_keys(typed_dict: Any) -> frozenset[str]:
    """The keys a ``TypedDict`` declares (its ``Unpack[...]`` options)."""
    return frozenset(typed_dict.__required_keys__ | typed_dict.__optional_keys__)


def refuse_unknown_options(
    subject: str | Callable[[], str], prop: str, given: Mapping[str, Any], typed_dict: Any
) -> None:
    """``**options`` typed as ``Unpack[typed_dict]``: a misspelled key is a ``ConfigurationError``
    naming it and the closest option, not Python's ``TypeError`` further down."""
    problems = Problems(subject)
    check_keywords(problems, prop, given, typed_dict_keys(typed_dict))
    problems.raise_if_any()


# -- props checked against their type hints, by typeguard ------------------------------


@functools.cache
def _for_typeguard(hint: Any, literals: bool = True) -> Any:
    """``hint`` as typeguard 2.13 (the version jsii pins) checks it by the library's rules:
    ``X | Y`` as ``Union`` (typeguard 2.13 passes anything for it), no ``bool`` for a number,
    a list or a tuple (never a string) for a sequence; a ``Literal`` is the owner's to check
    (with the closest names) unless ``literals``, a ``TypedDict`` is a ``dict``
    (``check_keywords`` names its keys). docs/design/errors-and-checks.md"""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Union or isinstance(hint, UnionType):
        return Union[tuple(_for_typeguard(arg, literals) for arg in args)]  # noqa: UP007
    if (item := _list_element(hint)) is not None:
        item = _for_typeguard(item, literals)
        return Union[list[item], tuple[item, ...]]  # type: ignore[valid-type]  # noqa: UP007
    if origin in (dict, collections.abc.Mapping) and len(args) == 2:
        return dict[_for_typeguard(args[0], literals), _for_typeguard(args[1], literals)]  # type: ignore[misc]
    if origin is tuple and args:
        return tuple[tuple(a if a is ... else _for_typeguard(a, literals) for a in args)]  # type: ignore[misc]
    if (origin is Literal and not literals) or origin is Unpack or isinstance(hint, TypeVar):
        return Any
    return dict if is_typeddict(hint) else _NUMBERS.get(hint, hint)


class _NotBool(type):
    """``isinstance`` of a number that is not a ``bool`` (``True`` is an ``int`` to Python)."""

    numbers: tuple[type, ...]

    def __instancecheck__(cls, value: Any) -> bool:
        return isinstance(value, cls.numbers) and not isinstance(value, bool)


_NUMBERS = {
    int: _NotBool("int", (), {"numbers": (int,)}),
    float: _NotBool("float", (), {"numbers": (int, float)}),
}


def _describe(hint: Any) -> str:
    """A type hint as its signature reads, without module paths (``ModelData | None``)."""
    if isinstance(hint, type) and not get_args(hint):
        return hint.__name__
    return re.sub(r"(?<![\w.'])(?:[A-Za-z_]\w*\.)+", "", str(hint))


def check_types(
    problems: Problems, hints: Mapping[str, Any], values: Mapping[str, Any], literals: bool = True
) -> None:
    """One problem for each value that does not fit its parameter's type hint (for a list of
    values, one for each element that does not fit, named by its index); the fields of
    dataclass values (``InstancePool``, ``VllmConfig``, ...) are checked the same way."""
    for name, value in values.items():
        if name in hints:
            _check_value(problems, name, value, hints[name], literals)


def _check_value(problems: Problems, prop: str, value: Any, hint: Any, literals: bool) -> None:
    element = _list_element(hint)
    if element is not None and isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_value(problems, f"{prop}[{index}]", item, element, literals)
        return
    import typeguard  # here: the eval gate's Lambda runs this module without typeguard

    try:
        typeguard.check_type(prop, value, _for_typeguard(hint, literals))
    except TypeError:
        expected = _describe(hint) + ","
        if element is not None:
            expected = f"a list, each element {_describe(element)};"
        problems.add(prop, value, f"must be {expected} not {_kind(value)}")
    else:
        check_fields(problems, prop, value, literals)


@functools.cache
def _list_element(hint: Any) -> Any:
    """``X`` of ``Sequence[X]``, ``list[X]`` or ``tuple[X, ...]`` (or of one of them ``| None``);
    ``None`` for other hints."""
    options = (
        get_args(hint) if isinstance(hint, UnionType) or get_origin(hint) is Union else (hint,)
    )
    for option in options:
        origin, args = get_origin(option), get_args(option)
        if origin in (list, collections.abc.Sequence) and args:
            return args[0]
        if origin is tuple and len(args) == 2 and args[1] is ...:
            return args[0]
    return None


def check_fields(problems: Problems, prop: str, value: Any, literals: bool = True) -> None:
    """The fields of a dataclass value, each against its type hint, under ``prop.``."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return
    hints = _hints(type(value))
    fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
    nested = Problems("")
    check_types(nested, hints, fields, literals)
    problems.extend(nested, prop)


@functools.cache
def _hints(owner: Callable[..., Any]) -> dict[str, Any]:
    """``owner``'s resolved type hints, kept (resolving costs more than checking them); none
    for an annotation that cannot be resolved here."""
    try:
        return get_type_hints(owner)
    except (NameError, TypeError):
        return {}


def checked_props(init: F) -> F:
    """Decorate a construct's ``__init__``: every argument is checked against its type hint
    first, so a wrong type is one ``ConfigurationError`` naming the prop, not an
    ``AttributeError`` from deep inside."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        owner = type(self).__name__
        unpacked = _unpacked_props(init)
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:  # a missing, unknown or extra argument: named, with what is allowed
            problems = _binding_problems(owner, signature, args, kwargs, unpacked)
            problems.raise_if_any(ArgumentError)
            raise
        problems = Problems(lambda: _construct(owner, bound.arguments))
        values = _keyword_values(problems, owner, signature, bound.arguments, unpacked)
        # Hints resolved on first use (the module is whole by then). Literal values are
        # checked with every other problem by the construct itself (closest names).
        check_types(problems, {**_hints(init), **(unpacked or {})}, values, literals=False)
        problems.raise_if_any()
        init(self, *args, **kwargs)

    return cast(F, wrapper)


@functools.cache
def _unpacked_props(init: Callable[..., Any]) -> dict[str, Any] | None:
    """The hints of a ``**props: Unpack[SomeProps]`` parameter's keys (PEP 692); ``None`` when
    ``init`` takes no such parameter."""
    for parameter in inspect.signature(init).parameters.values():
        hint = _hints(init).get(parameter.name)
        if parameter.kind is parameter.VAR_KEYWORD and get_origin(hint) is Unpack:
            return get_type_hints(get_args(hint)[0])
    return None


def _keyword_values(
    problems: Problems,
    owner: str,
    signature: inspect.Signature,
    arguments: Mapping[str, Any],
    unpacked: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The keyword-only arguments and the ``**props`` given, each prop not declared a problem
    (with the closest names), so every problem comes at once."""
    values: dict[str, Any] = {}
    for name, value in arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.KEYWORD_ONLY:
            values[name] = value
        elif kind is inspect.Parameter.VAR_KEYWORD and unpacked is not None:
            known = sorted(set(unpacked) | {n for n in signature.parameters if n != name})
            for prop, given in value.items():
                if prop in unpacked:
                    values[prop] = given
                else:
                    problems.add(prop, given, _not_a_prop(owner, prop, known))
    return values


def _not_a_prop(owner: str, name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=3)
    return f"not a prop of {owner}" + (f"; did you mean {', '.join(close)}?" if close else "")


def _construct(owner: str, arguments: Mapping[str, Any]) -> str:
    """``Owner 'path/id'`` (the path only when shown: reading it is a jsii call)."""
    path = getattr(getattr(arguments.get("scope"), "node", None), "path", "")
    return f"{owner} '{path + '/' if path else ''}{arguments.get('id')}'"


def _binding_problems(
    owner: str,
    signature: inspect.Signature,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    unpacked: Mapping[str, Any] | None,
) -> Problems:
    """Why ``owner(*args, **kwargs)`` does not bind: each required prop not given, each unknown
    one (with the closest names) and extra positional arguments, instead of Python's
    ``TypeError`` (which names only the first)."""
    parameters = [p for name, p in signature.parameters.items() if name != "self"]
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = {p.name for p in parameters if p.kind is not p.POSITIONAL_ONLY} | set(unpacked or ())
    given = dict(zip((p.name for p in positional), args, strict=False)) | kwargs
    problems = Problems(_construct(owner, given))
    if len(args) > len(positional):
        problems.add(
            "(positional)",
            list(args[len(positional) :]),
            f"{owner} takes {len(positional)} positional arguments "
            f"({', '.join(p.name for p in positional)}); give the rest by name",
        )
    open_keywords = unpacked is None and any(p.kind is p.VAR_KEYWORD for p in parameters)
    for name in sorted(set(kwargs) - keywords) if not open_keywords else ():
        problems.add(name, kwargs[name], _not_a_prop(owner, name, sorted(keywords)))
    for parameter in parameters:
        if parameter.default is parameter.empty and parameter.name not in given:
            if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                problems.add(parameter.name, None, "required")
    return problems

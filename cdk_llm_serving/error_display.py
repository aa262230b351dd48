"""How an uncaught ``ConfigurationError`` reads when an app fails under ``cdk synth``.

``install_error_display()`` (an app calls it; importing the package does not) sets a
``sys.excepthook`` that shows such an error first and whole, with the line that raised it and
the app's own line that led there, even when it crossed jsii as text; any other exception goes
to the hook that was there before. Why: docs/design/errors-and-checks.md.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from types import TracebackType

from .errors import ConfigurationError, recently_raised

__all__ = ["install_error_display"]

#: Set (to anything but empty or 0) for Python's own traceback instead.
_TRACEBACK_ENV = "CDK_LLM_SERVING_TRACEBACK"
_PACKAGE = Path(__file__).resolve().parent
_previous_hook = sys.excepthook


def _configuration_error_of(error: BaseException | None) -> ConfigurationError | None:
    """The ``ConfigurationError`` behind ``error``: itself, one in its chain of causes, or the
    one whose first line a jsii ``RuntimeError`` quotes (JavaScript keeps only the text)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, ConfigurationError):
            return error
        seen.add(id(error))
        text = str(error)
        for candidate in reversed(recently_raised()):
            if str(candidate).splitlines()[0] in text:
                return candidate
        error = error.__cause__ or error.__context__
    return None


def _frames(tb: TracebackType | None) -> list[traceback.FrameSummary]:
    return list(traceback.extract_tb(tb)) if tb is not None else []


def _is_library(filename: str) -> bool:
    path = Path(filename).resolve()
    return (
        path.is_relative_to(_PACKAGE)
        or "site-packages" in path.parts
        or filename.startswith("<")
        or path.parts[-3:-1] == ("lib", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    )


def _where(frame: traceback.FrameSummary) -> str:
    path = Path(frame.filename).resolve()
    for base in (_PACKAGE.parent, Path.cwd()):
        if path.is_relative_to(base):
            return f"{path.relative_to(base)}:{frame.lineno}"
    return f"{frame.filename}:{frame.lineno}"


def _format(found: ConfigurationError, outer_tb: TracebackType | None = None) -> str:
    """The error as the app's failure shows it: the message first, then where it came from."""
    own = _frames(found.__traceback__)
    raised = [
        f
        for f in own
        if Path(f.filename).resolve().is_relative_to(_PACKAGE)
        and Path(f.filename).name != "errors.py"
    ]
    app = [f for f in _frames(outer_tb) + own if not _is_library(f.filename)]
    origin = [f"raised at {_where(raised[-1])}"] if raised else []
    if app:
        origin.append(f"from {_where(app[-1])}")
    where = f" ({', '.join(origin)})" if origin else ""
    return (
        f"error: {found}\n  {type(found).__name__}{where}; {_TRACEBACK_ENV}=1 shows the traceback\n"
    )


def _hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    found = _configuration_error_of(value)
    if found is None or os.environ.get(_TRACEBACK_ENV, "") not in ("", "0"):
        _previous_hook(kind, value, tb)
        return
    sys.stderr.write(_format(found, tb))
    sys.stderr.flush()


def install_error_display() -> None:
    """Show an uncaught ``ConfigurationError`` first and whole (``error: <subject>: N problems``,
    one line per problem, where it was raised); idempotent, and every other exception keeps the
    hook that was there before. ``CDK_LLM_SERVING_TRACEBACK=1`` restores Python's traceback."""
    global _previous_hook
    if sys.excepthook is not _hook:
        _previous_hook = sys.excepthook
        sys.excepthook = _hook

"""``pytest --cpu-time=N``: the suite's CPU time, and the N tests that cost most of it.

The machine the suite runs on is shared, so wall time says little; CPU time (user + system)
does. A test's CPU is that of the pytest process, of its children it has waited for, and of
its descendants still running (the jsii Node.js process that synthesizes, for the whole
session), read from ``/proc`` (``proc(5)``: ``/proc/<pid>/task/<tid>/children`` and fields
14-17 of ``/proc/<pid>/stat``, in clock ticks). Off unless asked for.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Generator
from pathlib import Path

import pytest

_TICKS = os.sysconf("SC_CLK_TCK")
_KEY = pytest.StashKey[dict[str, float]]()


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _running_descendants() -> float:
    """CPU seconds of the live descendants, with the children each of them has waited for."""
    total, pending = 0.0, _children(os.getpid())
    while pending:
        pid = pending.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(field) for field in fields[11:15]) / _TICKS  # utime stime cutime cstime
        pending += _children(pid)
    return total


def cpu_seconds() -> float:
    """User + system CPU of this process and all its descendants so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime
    return used + _running_descendants()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-time",
        type=int,
        metavar="N",
        default=None,
        help="report the session's CPU time (process tree) and the N costliest tests",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    if session.config.getoption("cpu_time") is not None:
        session.config.stash[_KEY] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    costs = item.config.stash.get(_KEY, None)
    before = cpu_seconds() if costs is not None else 0.0
    yield
    if costs is not None:
        costs[item.nodeid] = costs.get(item.nodeid, 0.0) + cpu_seconds() - before


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    costs = config.stash.get(_KEY, None)
    if costs is None:
        return
    total = cpu_seconds()  # since pytest started: imports and collection included
    terminalreporter.section("CPU time (user + system, process tree)")
    if getattr(config.option, "numprocesses", None):  # pytest-xdist: the tests ran in workers
        terminalreporter.write_line(f"{total:.1f} s in all; per test: run in one process (-n 0)")
        return
    terminalreporter.write_line(f"{total:.1f} s in all, {sum(costs.values()):.1f} s in tests")
    ranked = sorted(costs.items(), key=lambda item: item[1], reverse=True)
    for nodeid, seconds in ranked[: config.getoption("cpu_time")]:
        terminalreporter.write_line(f"{seconds:7.2f} s  {nodeid}")

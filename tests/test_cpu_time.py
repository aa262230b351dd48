"""``pytest --cpu-time``'s measure counts the process tree, running descendants included."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.support.cpu_time import cpu_seconds

BURN = (
    "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ninput()"
)


def test_cpu_of_a_running_child_counts_then_stays_counted_once_it_is_waited_for():
    before = cpu_seconds()
    child = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while cpu_seconds() - before < 0.3 and time.monotonic() < deadline:
        time.sleep(0.05)
    running = cpu_seconds() - before
    child.communicate("\n")
    waited = cpu_seconds() - before
    assert running >= 0.3
    assert running <= waited < running + 1.0

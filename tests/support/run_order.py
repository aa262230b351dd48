"""Costliest test files first, so that neither pytest-xdist process ends with a long tail.

``make test`` runs ``-n 2 --dist loadfile --no-loadscope-reorder``: each file goes whole to the
next free process, in collection order. By default xdist orders files by their number of tests
(pytest-xdist 3.8.0 ``xdist/scheduler/loadscope.py``, ``schedule``: ``loadscopereorder``),
which put the few-test, many-second files (README blocks, integration apps, the validated
reference app) last, and one process ran them alone for about 10 s at the end. The list holds
the files that cost most in one run (seconds of test time, measured with ``--junitxml``);
the rest keep pytest's order. ``tests/test_layout.py`` checks that each entry still exists.
"""

from __future__ import annotations

import pytest

#: Test files by cost, costliest first (seconds in one run on the development machine).
COSTLIEST_FIRST = (
    # 60-90 s with a cold cache: synthesizes the five variants (rehearsal.variants caches them
    # by source hash, so the other rehearsal files then read them)
    "tests/rehearsal/test_variants_serve.py",
    "tests/test_documentation.py",  # 29 s: every README block in a process of its own
    "tests/integ/test_integ_snapshots.py",  # 19 s: both integration apps, integ-runner
    "tests/reference/test_builtin_validation.py",  # 10 s: the reference app, validation on
    "tests/hyperpod/test_serving_pods_and_security.py",  # 7 s
    "tests/hyperpod/test_cluster_network_and_lifecycle.py",  # 7 s
    "tests/hyperpod/test_placement.py",  # 7 s: helm renders of every chart
    "tests/hyperpod/test_hyperpod_chart.py",  # 7 s
    "tests/security/test_checkov.py",  # 6 s
    "tests/hyperpod/test_vllm_multi_node_service.py",  # 6 s
    "tests/reference/test_template_linting.py",  # 5 s
    "tests/test_property_based.py",  # 5 s
    "tests/hyperpod/test_serving_tls.py",  # 5 s
)
_RANK = {path: rank for rank, path in enumerate(COSTLIEST_FIRST)}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Stable sort by file rank: a file's tests stay together and in their own order."""
    items.sort(key=lambda item: _RANK.get(item.nodeid.split("::")[0], len(_RANK)))

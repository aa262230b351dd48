"""The live tests (marker ``live``) run real vLLM: only when selected (``-m live``, as
``make rehearse-live`` does), as root, with the vLLM virtualenv built (``make vllm-venv``);
when not selected, each is skipped, saying which of these is missing; selected with one missing,
the run stops with that as its error (``make rehearse-live`` must not pass on skips)."""

from __future__ import annotations

import os

import pytest

from rehearsal.live.runner import DEFAULT_VENV

from .reference_pods import TEMPLATE


@pytest.hookimpl(trylast=True)  # after ``-m`` has deselected what it does not select
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    live = [item for item in items if item.get_closest_marker("live") is not None]
    if not live:
        return  # ``-m "not live"``, or no live test collected
    selected = bool(config.getoption("markexpr"))
    reasons = []
    if not selected:
        reasons.append("not selected: run with `-m live` (make rehearse-live)")
    if not (DEFAULT_VENV / "bin" / "python").exists():
        reasons.append(f"no vLLM virtualenv at {DEFAULT_VENV} (make vllm-venv)")
    if os.geteuid() != 0:
        reasons.append("needs root (network and mount namespaces)")
    if not TEMPLATE.exists():
        reasons.append(f"no {TEMPLATE.relative_to(TEMPLATE.parents[1])} (make synth)")
    if not reasons:
        return
    if selected:
        raise pytest.UsageError("the live tests cannot run: " + "; ".join(reasons))
    skip = pytest.mark.skip(reason="live run: " + "; ".join(reasons))
    for item in items:
        if item.get_closest_marker("live") is not None:
            item.add_marker(skip)

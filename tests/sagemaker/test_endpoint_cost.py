"""What one more pool endpoint costs in jsii calls (issue #19): the bench's scenario
(``bench/synth_bench.py``: endpoint, autoscaling, alarms, dashboard), counted in-process.

Each Python -> jsii call costs about 0.3 ms of CPU on both sides of the pipe, so the count is
a deterministic stand-in for the construction CPU the bench measures (0.058 s per endpoint
against 0.024 s for the same resources as L1s, validation off, on a shared machine). The L1
floor is 16 calls (one per resource); the budget leaves a little room, not a regression.
"""

from __future__ import annotations

import runpy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import CfnWaitConditionHandle, Environment, Stack
from constructs import Construct

from tests.support.app import new_app

BENCH = Path(__file__).resolve().parents[2] / "bench" / "synth_bench.py"
#: jsii calls per additional endpoint: 152 before issue #19's cuts, 70 after; 133 after issue
#: #25 removed the module-global caches and the token decoding, 72 with each value read once
#: by its construct instead (README, "Performance"); 80 after issue #27, whose variant alarms
#: (error rate, p99, rollback, scaling metric missing) read each pool's series, the ones
#: AWS documents with pools, instead of the variant's two-dimension series (UNCONFIRMED), and
#: whose single-GPU-instance endpoint warns that its updates stay blue/green. 86 after issue
#: #32: the endpoint adds its own log group to each model's policy (the group's ARN, one
#: statement, its acknowledgement), where the model used to grant all of /aws/sagemaker/*.
BUDGET = 86


@contextmanager
def _counted_jsii_calls() -> Iterator[list[int]]:
    """Every request the kernel provider sends, counted while the block runs."""
    provider = jsii.kernel.provider
    names = ("create", "get", "set", "sget", "sset", "invoke", "sinvoke")
    originals = {name: getattr(provider, name) for name in names}
    count = [0]

    def counted(original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            return original(*args, **kwargs)

        return call

    for name, original in originals.items():
        setattr(provider, name, counted(original))
    try:
        yield count
    finally:
        for name, original in originals.items():
            setattr(provider, name, original)


def test_one_more_pool_endpoint_stays_within_its_jsii_call_budget():
    add_endpoints = runpy.run_path(str(BENCH))["_add_pool_endpoints"]
    stack = Stack(new_app(), "Cost", env=Environment(region="us-east-1", account="111111111111"))
    CfnWaitConditionHandle(stack, "Placeholder")
    add_endpoints(Construct(stack, "First"), 1)  # pays what a stack pays once
    with _counted_jsii_calls() as calls:
        add_endpoints(Construct(stack, "Second"), 1)
        add_endpoints(Construct(stack, "Third"), 1)
    # Each endpoint under its own scope: one Construct create each, not the endpoint's.
    per_endpoint = (calls[0] - 2) / 2
    assert per_endpoint <= BUDGET, f"{per_endpoint} jsii calls per endpoint"

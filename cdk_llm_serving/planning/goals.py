"""``Goal``: what a deployment is optimized for, one type for the whole library.

``cost``: the lowest cost per token served; ``latency``: the fastest answer to each request;
``throughput``: the most tokens per second. What each means for a recommendation job and for
one pool's vLLM settings: docs/design/planner.md, "Goals".
"""

from __future__ import annotations

from typing import Literal

Goal = Literal["cost", "latency", "throughput"]
#: The goals in the order they are listed (``Goal``'s values).
GOALS: tuple[Goal, ...] = ("cost", "latency", "throughput")

__all__ = ["GOALS", "Goal"]

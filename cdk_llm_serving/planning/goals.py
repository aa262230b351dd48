"""``Goal``: what a deployment is optimized for, one type for the whole library.

The same three words mean the same aim wherever a goal is taken:

* ``"cost"``: the lowest cost per token served;
* ``"latency"``: the fastest answer to each request (time to first token, inter-token latency);
* ``"throughput"``: the most tokens per second.

Where each is used:

* a SageMaker inference recommendation job (``ops.recommend``, ``recommend start --goal``) is
  benchmarked for the goal's metric, and ``recommend to-pools`` orders the pools it found by
  it (cheapest per million tokens first, lowest time to first token first, highest tokens per
  second first); the pool file records it (``planning.pool_file``);
* one pool's vLLM settings (``vllm.pool_strategy.derive_pool_config``, ``VllmPool.goal``), the
  instance type being chosen already: ``latency`` keeps the first allowed weight format that
  fits, without speculative decoding; ``throughput`` adds speculative decoding (MTP when the
  model has MTP layers, else the base configuration's method, else n-gram); ``cost`` tries
  the most compact allowed format first (formats the pool's GPUs run natively before those they
  emulate), so more of the memory holds KV cache and one instance serves more requests at
  once, without speculative decoding (its draft tokens spend GPU time a busy pool needs for
  real ones).
"""

from __future__ import annotations

from typing import Literal

Goal = Literal["cost", "latency", "throughput"]
#: The goals in the order they are listed (``Goal``'s values).
GOALS: tuple[Goal, ...] = ("cost", "latency", "throughput")

__all__ = ["GOALS", "Goal"]

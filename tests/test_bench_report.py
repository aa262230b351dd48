"""`make bench` prints every ratio in both validation modes (its report, on made-up runs: no synth)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "bench" / "synth_bench.py"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("synth_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_report_gives_each_ratio_with_validation_on_and_off(capsys):
    bench = _bench()

    def runs(label: str, mode: str) -> list[dict[str, float]]:
        """Made-up CPU: the constructs' cost, plus 2 s when the built-in validation runs."""
        fixed = {"empty": 1.0, "reference": 3.0, "reference as L1": 2.0}
        count = 1 if label in fixed else int(label.rsplit("x", 1)[1])
        per_endpoint = 0.2 if label.startswith("pool") else 0.1
        seconds = fixed.get(label, 1.0 + per_endpoint * count)
        seconds += 2.0 if mode == "validation on" else 0.0
        keys = ("jsii_calls", "bytes", "minified", "resources")
        return [{"cpu": seconds, "wall": seconds, **dict.fromkeys(keys, count)}] * 2

    results = {
        label: {mode: runs(label, mode) for mode in bench.MODES}
        for label, _, _ in bench._scenarios()
    }
    bench._report(results, 2)
    lines = capsys.readouterr().out.splitlines()
    row = {line[:44].strip(): line[44:].split() for line in lines if "/" in line[:44]}
    assert row["reference app / empty app  (target <= 1.5x)"] == ["1.67x", "3.00x"]
    assert row["L1 floor of the reference / empty app"] == ["1.33x", "2.00x"]
    assert row["reference app / its templates as L1"] == ["1.25x", "1.50x"]
    # One more endpoint: 0.2 s (library) against 0.1 s (L1) in both modes.
    assert (
        row["per endpoint, library / L1  (target <= 3x)"] == ["0.200/0.100", "s", "=", "2.0x"] * 2
    )

"""Each documented variant of the reference HyperPod stack serves, by the rehearsal (no live run).

On today's code none does: each test is an expected failure, strict, so it turns into an
error the moment a variant serves (fixed on branches fix-serving / fix-cluster): then drop the
mark. ``test_findings_on_d398b68.py`` pins what the rehearsal finds today.
"""

from __future__ import annotations

import pytest

from rehearsal.assembly import Assembly
from rehearsal.play import play
from rehearsal.variants import reference_weight_bytes
from tests.rehearsal.conftest import synthesized

FIXED = pytest.mark.xfail(strict=True, reason="fixed on branch fix-serving/fix-cluster")

WEIGHTS = reference_weight_bytes()


def _serves(name: str) -> None:
    built = synthesized(name)
    assert isinstance(built, Assembly), f"does not synthesize: {built}"
    result = play(built, weight_bytes=WEIGHTS)
    assert result.blocking == [], "\n".join(map(str, result.findings))
    assert result.deployment is not None and result.deployment.pods


@FIXED
def test_reference_serves():
    _serves("reference")


@FIXED
def test_p5en_serves():
    _serves("p5en")


@FIXED
def test_keda_serves():
    _serves("keda")


@FIXED
def test_inference_operator_serves():
    _serves("inference-operator")


@FIXED
def test_gpu_az_serves():
    _serves("gpu-az")

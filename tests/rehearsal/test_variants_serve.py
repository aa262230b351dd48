"""Each documented variant of the reference HyperPod stack serves, by the rehearsal (no live run).

On d398b68 (before issue 26's fixes) none did: ``test_findings_on_d398b68.py``, run against
that commit by ``make rehearse-before-fixes``, pins what the rehearsal found there, finding by
finding.
"""

from __future__ import annotations

from rehearsal.assembly import Assembly
from rehearsal.play import play
from rehearsal.variants import reference_weight_bytes
from tests.rehearsal.conftest import synthesized

WEIGHTS = reference_weight_bytes()


def _serves(name: str) -> None:
    built = synthesized(name)
    assert isinstance(built, Assembly), f"does not synthesize: {built}"
    result = play(built, weight_bytes=WEIGHTS)
    assert result.blocking == [], "\n".join(map(str, result.findings))
    assert result.deployment is not None and result.deployment.pods


def test_reference_serves():
    _serves("reference")


def test_p5en_serves():
    _serves("p5en")


def test_keda_serves():
    _serves("keda")


def test_inference_operator_serves():
    _serves("inference-operator")


def test_gpu_az_serves():
    _serves("gpu-az")


def test_keda_zero_serves():
    """Scaled to 0 and woken by the load balancer, the replica serves again (issue 30)."""
    _serves("keda-zero")

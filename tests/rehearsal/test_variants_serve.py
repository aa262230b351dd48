"""Each documented variant of the reference HyperPod stack serves, by the rehearsal (no live run).

On d398b68 (before the rehearsal's findings were fixed) none did: ``test_findings_on_d398b68.py``, run against
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
    """Scaled to 0 and woken by its schedule, the replica serves again."""
    _serves("keda-zero")


def test_inference_operator_variant_places_prefill_and_decode_with_their_kv_transfer():
    """the variant's Llama 3.3 70B endpoint disaggregates (the planner's rule for its
    declared workload): one prefill and one decode pod, each on its own p4de node of gpu-pd,
    with the node's EFA devices for the KV transfer, and the operator's router."""
    from rehearsal.controllers import inference_operator

    built = synthesized("inference-operator")
    assert isinstance(built, Assembly), built
    result = play(built, weight_bytes=WEIGHTS)
    pods = {
        key[2]: pod
        for key, pod in result.world.pods.items()
        if pod.owner[0] == inference_operator.KIND and pod.owner[2] == "llama-33-70b"
    }
    assert sorted(pods) == [
        "llama-33-70b-decode-0",
        "llama-33-70b-prefill-0",
        "llama-33-70b-router",
    ]
    nodes = {name: result.world.node(str(pod.node)) for name, pod in pods.items()}
    assert all(pod.running for pod in pods.values())
    assert {nodes[f"llama-33-70b-{r}-0"].instance_type for r in ("prefill", "decode")} == {
        "ml.p4de.24xlarge"
    }
    assert pods["llama-33-70b-prefill-0"].node != pods["llama-33-70b-decode-0"].node
    assert result.world.facts[inference_operator.KV_TRANSFER]["inference/llama-33-70b"] == {
        "prefill": 4,
        "decode": 4,
    }
    assert not [f for f in result.findings if f.rule.startswith("operator.pd-")]

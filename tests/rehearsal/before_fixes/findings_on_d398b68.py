"""What the rehearsal finds on the code of d398b68 (the recorded findings), variant by variant.

``make rehearse-before-fixes`` runs this file against that commit (a worktree of d398b68 with
today's rehearsal copied in; ``.ci/run`` runs it): each finding of the issue is found there, so
``test_variants_serve.py``, which asserts that every variant serves, fails on the commit before
the fixes, finding by finding. Not collected by ``make test`` (its name does not start with
``test_``): on today's code these findings are fixed.
"""

from __future__ import annotations

import pytest

from rehearsal.assembly import Assembly
from rehearsal.controllers import lifecycle
from rehearsal.findings import Finding
from rehearsal.play import play
from rehearsal.variants import reference_weight_bytes
from tests.rehearsal.conftest import synthesized

SERVING = {
    "eks-addon.conflicts-unresolved",  # vpc-cni, kube-proxy, coredns without OVERWRITE
    "hyperpod.dependencies-chart-missing",  # deep health checks, no HyperPod chart
    "node-wait.no-fail-fast",  # a Failure node waits out 77 minutes, then rollback
    "lws.rollout-outage",  # one replica, maxSurge 0
    "lbc.no-readiness-gate",  # the NLB's IP targets' namespace has no readiness-gate label
    "scheduler.insufficient-cpu",  # cpu 172 on a 96-CPU node (ThreadsPerCore 1)
    "csi.provider-not-on-node",  # the AWS provider's tolerations: [] on the GPU taint
    "lws.headless-service-shadowed",  # the LoadBalancer Service has the LWS's name
    "dns.leader-address-unresolvable",  # so LWS_LEADER_ADDRESS has no record
} | (
    {
        "lifecycle.no-mount-wait",  # on_create.sh checks the volumes once
        "lifecycle.silent-fallback",  # and exits 0 on the root volume
        "lifecycle.containerd-root-not-set",  # a symlink, not containerd's root
    }
    if lifecycle.sandbox() is not None  # played only in a mount namespace
    else set()
)
TODAY = {
    "reference": SERVING,
    # The gpu-instance-type key is not read yet: p5en synthesizes as the reference.
    "p5en": SERVING,
    "keda": {"synth.failed"},
    "inference-operator": {"synth.failed"},
    "gpu-az": SERVING | {"lbc.target-zone-not-enabled"},
}
FIRST = {
    "reference": "eks-addon.conflicts-unresolved",
    "p5en": "eks-addon.conflicts-unresolved",
    "keda": "synth.failed",
    "inference-operator": "synth.failed",
    "gpu-az": "eks-addon.conflicts-unresolved",
}

WEIGHTS = reference_weight_bytes()


def _rules(name: str) -> tuple[set[str], str]:
    built = synthesized(name)
    if isinstance(built, Finding):
        return {built.rule}, built.rule
    every = play(built, stop_at_blocking=False, weight_bytes=WEIGHTS)
    stopped = play(built, weight_bytes=WEIGHTS)
    assert stopped.stopped is not None
    return set(every.rules), stopped.stopped.rule


@pytest.mark.parametrize("name", sorted(TODAY))
def test_the_rehearsal_finds_each_recorded_finding(name):
    rules, first = _rules(name)
    assert rules == TODAY[name]
    assert first == FIRST[name]


def test_the_keda_and_operator_variants_fail_the_apps_hipaa_pack():
    keda, operator = synthesized("keda"), synthesized("inference-operator")
    assert (
        isinstance(keda, Finding)
        and "KedaQueryRole" in keda.message
        and "IAMNoInlinePolicy" not in keda.message
    )
    assert "inline policy" in keda.message
    assert isinstance(operator, Finding) and "server access logs" in operator.message


def test_the_cpu_finding_names_the_figures(reference_variant: Assembly):
    result = play(reference_variant, stop_at_blocking=False, weight_bytes=WEIGHTS)
    (cpu, *_) = [f for f in result.findings if f.rule == "scheduler.insufficient-cpu"]
    assert "requests cpu 172" in cpu.message and "offers 95.69" in cpu.message


def _past_the_packs(tmp_path_factory: pytest.TempPathFactory, context: dict[str, str]) -> set[str]:
    """The variant synthesized without the app's packs (as ``cdk synth`` would once they pass)."""
    from stacks import add_reference_stacks
    from tests.support.app import new_app

    outdir = tmp_path_factory.mktemp("past-the-packs")
    app = new_app(outdir=str(outdir), **context)
    add_reference_stacks(app)
    app.synth()
    return set(play(Assembly(outdir), stop_at_blocking=False, weight_bytes=WEIGHTS).rules)


def test_past_its_packs_the_keda_variant_also_pins_the_replicas_keda_scales(tmp_path_factory):
    rules = _past_the_packs(tmp_path_factory, {"llm-serving:reference-moe:max-replicas": "2"})
    # Room for a second replica: the rollout surges instead of going down.
    assert rules == (SERVING - {"lws.rollout-outage"}) | {"keda.replicas-pinned"}


def test_past_its_packs_the_operator_variant_also_declares_the_namespace_twice(tmp_path_factory):
    rules = _past_the_packs(tmp_path_factory, {"llm-serving:hyperpod:inference-operator": "true"})
    assert rules == SERVING | {"kubectl.declared-twice"}

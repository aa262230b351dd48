"""Every acknowledgement the reference app records matches a finding (issue 32).

An acknowledgement that matches nothing (cdk-nag's notebook-instance rule ``SM1`` on a
model, ``S1`` on a bucket that is another bucket's log target) would silently cover a later
finding, as stale checkov suppressions would (``test_checkov``). The app is built with its
acknowledgements recorded instead of applied, synthesized with its packs, and each
acknowledgement must match a finding at or under its construct. One synth per variant
with all packs: 1-2 s each (measured, idle machine; 8-12 s under load).
"""

from __future__ import annotations

import pytest

from cdk_llm_serving.testing.checks import add_nag_packs
from stacks import add_reference_stacks
from stacks.hipaa_review import REFERENCE_NAG_PACKS
from tests.support.acknowledgements import findings, recorded_acknowledgements, stale
from tests.support.app import new_app
from tests.support.reference_variants import VARIANTS

#: The variants that add acknowledged resources of their own (the others only change types).
_WITH_OWN_ACKNOWLEDGEMENTS = ("inference-operator", "keda")


@pytest.mark.parametrize("variant", ["reference", *_WITH_OWN_ACKNOWLEDGEMENTS])
def test_every_acknowledgement_matches_a_finding(variant, tmp_path):
    with recorded_acknowledgements() as recorded:
        app = new_app(outdir=str(tmp_path), **VARIANTS.get(variant, {}))
        add_reference_stacks(app)
        add_nag_packs(app, REFERENCE_NAG_PACKS)
        with pytest.raises(Exception, match="ValidationFailed"):
            app.synth()  # nothing acknowledged (aspects' included): every finding is reported
    assert len(recorded) > 100
    assert stale(recorded, findings(tmp_path)) == []

"""Every acknowledgement the reference app records matches a finding, and the committed
listing of them is current.

An acknowledgement that matches nothing (cdk-nag's notebook-instance rule ``SM1`` on a
model, ``S1`` on a bucket that is another bucket's log target) would silently cover a later
finding, as stale checkov suppressions would (``test_checkov``). The app is built with its
acknowledgements recorded instead of applied, synthesized with its packs, and each
acknowledgement must match a finding at or under its construct. One synth per variant
with all packs: 1-2 s each (measured, idle machine; 8-12 s under load). The same records
render ``docs/acknowledgements.md`` (``tests/support/acknowledgement_listing.py``).
"""

from __future__ import annotations

import pytest

from cdk_llm_serving.testing.checks import add_nag_packs
from stacks import add_reference_stacks
from stacks.hipaa_review import REFERENCE_NAG_PACKS
from tests.support.acknowledgement_listing import LISTED_VARIANTS, LISTING, REGENERATE, render
from tests.support.acknowledgements import Recorded, findings, recorded_acknowledgements, stale
from tests.support.app import new_app
from tests.support.reference_variants import VARIANTS


@pytest.fixture(scope="module")
def recorded_variants(tmp_path_factory) -> dict[str, tuple[list[Recorded], dict[str, set[str]]]]:
    """Variant -> (its acknowledgements, its packs' findings), for the listed variants."""
    out = {}
    for variant in LISTED_VARIANTS:
        outdir = tmp_path_factory.mktemp(variant)
        with recorded_acknowledgements() as recorded:
            app = new_app(outdir=str(outdir), **VARIANTS.get(variant, {}))
            add_reference_stacks(app)
            add_nag_packs(app, REFERENCE_NAG_PACKS)
            with pytest.raises(Exception, match="ValidationFailed"):
                app.synth()  # nothing acknowledged (aspects' included): every finding is reported
        out[variant] = (list(recorded), findings(outdir))
    return out


@pytest.mark.parametrize("variant", LISTED_VARIANTS)
def test_every_acknowledgement_matches_a_finding(variant, recorded_variants):
    recorded, found = recorded_variants[variant]
    assert len(recorded) > 100
    assert stale(recorded, found) == []


def test_the_committed_listing_of_acknowledgements_is_current(recorded_variants):
    expected = render({v: recorded for v, (recorded, _) in recorded_variants.items()})
    assert LISTING.read_text() == expected, (
        f"{LISTING.name} is out of date: regenerate it with `{REGENERATE}` and commit it"
    )


def test_the_listing_names_each_acknowledgement_with_its_reason(recorded_variants):
    """The page is the records, not a summary of them: each reason and construct is on it."""
    recorded, _ = recorded_variants["reference"]
    page = LISTING.read_text()
    for entry in recorded:
        assert " ".join(entry.reason.split()) in page, entry
        assert f"`{entry.path.split('/', 1)[1]}`" in page, entry
    assert page.count("\n- **CKV_") > 10  # checkov's suppressions too

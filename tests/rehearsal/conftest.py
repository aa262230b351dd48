"""The synthesized variants, once per session (and once per source tree: the synth cache of
``rehearsal.variants.cached_synthesize`` is keyed by the hash of the app, library and stacks)."""

from __future__ import annotations

import pytest

from rehearsal.assembly import Assembly
from rehearsal.findings import Finding
from rehearsal.variants import VARIANTS, SynthFailed, cached_synthesize

_SYNTHESIZED: dict[str, Assembly | Finding] = {}


def synthesized(name: str) -> Assembly | Finding:
    """The variant's assembly, or the ``synth.failed`` finding."""
    if name not in _SYNTHESIZED:
        try:
            _SYNTHESIZED[name] = Assembly(cached_synthesize(VARIANTS[name]))
        except SynthFailed as failed:
            _SYNTHESIZED[name] = failed.finding
    return _SYNTHESIZED[name]


@pytest.fixture(scope="session")
def reference_variant() -> Assembly:
    built = synthesized("reference")
    assert isinstance(built, Assembly), built
    return built

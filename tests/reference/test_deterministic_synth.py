"""Same input, same template: the reference app synthesized in another process (another hash
seed, the built-in validation on) is identical to the suite's synthesis, byte for byte."""

from __future__ import annotations

import json


def test_reference_app_synthesizes_identically_in_another_process(
    reference_templates, validated_synth
):
    again = {
        path.name.removesuffix(".template.json"): json.loads(path.read_text())
        for path in (validated_synth / "reference").glob("*.template.json")
    }
    assert set(again) == set(reference_templates)
    for name, template in reference_templates.items():
        assert json.dumps(template, sort_keys=True) == json.dumps(again[name], sort_keys=True), name

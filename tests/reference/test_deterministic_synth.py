"""Same input, same template: a second synthesis of the reference app is identical, byte for byte."""

from __future__ import annotations

import json

from stacks import add_reference_stacks
from tests.support.app import new_app


def test_reference_app_synthesizes_identically_twice(reference_templates):
    app = new_app()
    add_reference_stacks(app)
    again = {stack.stack_name: stack.template for stack in app.synth().stacks}
    assert set(again) == set(reference_templates)
    for name, template in reference_templates.items():
        assert json.dumps(template, sort_keys=True) == json.dumps(again[name], sort_keys=True), name

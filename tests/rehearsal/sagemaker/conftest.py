"""The reference app's pool endpoint template, synthesized once per source tree (the same cached
assembly as the HyperPod rehearsal's ``reference`` variant: ``cdk synth`` writes every stack)."""

from __future__ import annotations

from typing import Any

import pytest

from rehearsal.sagemaker.__main__ import STACK
from rehearsal.sagemaker.copies import load_template
from rehearsal.variants import VARIANTS, cached_synthesize


@pytest.fixture(scope="session")
def pool_template() -> dict[str, Any]:
    return load_template(cached_synthesize(VARIANTS["reference"]), STACK)

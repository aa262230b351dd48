"""Fixtures of the HyperPod tests: the reference HyperPod template and its LeaderWorkerSet."""

from __future__ import annotations

import pytest

from tests.support.template_helpers import manifest_objects


@pytest.fixture(scope="session")
def hyperpod(reference_templates) -> dict:
    return reference_templates["ReferenceMoeHyperPod"]


@pytest.fixture(scope="session")
def lws(hyperpod) -> dict:
    (obj,) = manifest_objects(hyperpod, "ServingLeaderWorkerSet")
    return obj

"""Executable documentation: every Python block of the README and docs/ runs as written.

Each block runs in a fresh process in its own directory, under ``docs/consumer-cdk.json``
(the ``cdk.json`` that ``cdk init`` writes), the way a user would run it: apps through the
CDK CLI, test files through pytest (twice: writing the snapshots, then matching them).
"""

from __future__ import annotations

import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.doc_snippets import (
    CONSUMER_CDK_JSON,
    ROOT,
    Snippet,
    all_snippets,
    environment,
    run,
)

SNIPPETS = all_snippets()


def _slug(snippet: Snippet) -> str:
    same = [s for s in SNIPPETS if (s.document, s.heading) == (snippet.document, snippet.heading)]
    heading = re.sub(r"[^a-z0-9]+", "-", snippet.heading.lower()).strip("-")
    suffix = f"-{same.index(snippet) + 1}" if len(same) > 1 else ""
    return f"{snippet.document.name}:{heading}{suffix}"


@pytest.fixture(scope="session")
def snippet_results(tmp_path_factory) -> dict[str, str | AssertionError]:
    """Run every block once per session, two at a time (jsii start-up dominates)."""
    base = tmp_path_factory.mktemp("snippets")

    def attempt(snippet: Snippet) -> str | AssertionError:
        try:
            return run(snippet, base / re.sub(r"\W+", "_", _slug(snippet)))
        except AssertionError as failure:
            return failure

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(map(_slug, SNIPPETS), pool.map(attempt, SNIPPETS), strict=True))


@pytest.mark.parametrize("snippet", SNIPPETS, ids=_slug)
def test_documentation_code_runs_as_written(snippet, snippet_results):
    result = snippet_results[_slug(snippet)]
    if isinstance(result, AssertionError):
        raise result


def test_the_readme_shows_each_path_and_a_consumer_test():
    readme = [s for s in SNIPPETS if s.document.name == "README.md"]
    code = "\n".join(s.code for s in readme)
    for construct in ("InstancePoolEndpoint(", "VllmPoolEndpoint(", "HyperPodEksCluster("):
        assert construct in code
    for step in ("HyperPodServingAddons(", "FsxModelStore(", "VllmMultiNodeService("):
        assert step in code
    assert any(s.kind == "pytest" and "TemplateSnapshotExtension" in s.code for s in readme)
    assert {s.kind for s in readme} == {"app", "pytest", "script"}


def test_a_failing_block_fails_the_suite(tmp_path):
    broken = Snippet(ROOT / "README.md", "broken", 1, "raise SystemExit('stale snippet')\n")
    with pytest.raises(AssertionError, match="stale snippet"):
        run(broken, tmp_path)


def test_consumer_cdk_json_is_what_cdk_init_writes(tmp_path):
    """The feature flags we test consumers' stacks under are those of a new app made by the
    pinned CDK CLI (``cdk init app --language python``), not a hand-made list."""
    project = tmp_path / "myapp"
    project.mkdir()
    subprocess.run(
        ["cdk", "init", "app", "--language", "python", "--generate-only"],
        cwd=project,
        env=environment(),
        capture_output=True,
        check=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    generated = json.loads((project / "cdk.json").read_text())
    assert json.loads(CONSUMER_CDK_JSON.read_text()) == generated


def test_the_project_app_uses_the_consumer_flags_and_its_own_settings_only():
    """The reference app is synthesized under the same flags a consumer's new app gets."""
    ours = json.loads((ROOT / "cdk.json").read_text())["context"]
    consumer = json.loads(CONSUMER_CDK_JSON.read_text())["context"]
    flags = {key: value for key, value in ours.items() if not key.startswith("llm-serving:")}
    assert flags == consumer

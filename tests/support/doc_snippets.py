"""The Python code blocks of the project's documentation, and how to run one as a user would.

A block that defines ``test_*`` functions is a test file: pytest runs it (first writing its
snapshots, then checking against them). A block that builds an ``App`` is an app: the CDK
CLI synthesizes it (``cdk synth --app "python3 <block>"``), so it gets the context of the
directory's ``cdk.json`` exactly as a user's app does. Any other block runs as a script.
Each runs in a fresh process, in a directory of its own holding ``docs/consumer-cdk.json``
as ``cdk.json``.

aws-cdk-lib's built-in CloudFormation validation (a WASM engine that costs about 3 s of CPU
to start in every process that synthesizes; ``core/lib/private/synthesis-validation.js``)
runs wherever a template is checked for the first time, and is turned off
(``CDK_VALIDATION=false``, the switch aws-cdk-lib documents) where the same template was
already validated: the snapshot-matching pass of a test block, and the wheel check's runs of
blocks that ``tests/test_documentation.py`` also runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSUMER_CDK_JSON = ROOT / "docs" / "consumer-cdk.json"
#: The documents whose code blocks must run: the README and everything under docs/.
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md")))

_FENCE = re.compile(r"^([ \t]*)```python\n(.*?)^\1```$", re.M | re.S)
_HEADING = re.compile(r"^#+ (.+)$", re.M)


@dataclass(frozen=True)
class Snippet:
    document: Path
    heading: str
    line: int
    code: str

    @property
    def id(self) -> str:
        return f"{self.document.name}:{self.line}"

    @property
    def kind(self) -> str:
        if re.search(r"^def test_", self.code, re.M):
            return "pytest"
        return "app" if "App(" in self.code else "script"


def snippets(document: Path) -> list[Snippet]:
    """Every ```python block of ``document`` with the heading it sits under."""
    text = document.read_text()
    found = []
    for match in _FENCE.finditer(text):
        headings = _HEADING.findall(text, 0, match.start())
        line = text.count("\n", 0, match.start()) + 2
        code = textwrap.dedent(match[2])
        found.append(Snippet(document, headings[-1] if headings else "", line, code))
    return found


def all_snippets() -> list[Snippet]:
    return [snippet for document in DOCUMENTS for snippet in snippets(document)]


def environment(python: Path = Path(sys.executable)) -> dict[str, str]:
    """``python``'s directory first on PATH (its console scripts), then the project's
    virtualenv (the supported Node.js jsii needs) and ``node_modules/.bin`` (the CDK CLI)."""
    path = [
        str(python.parent),
        str(Path(sys.executable).parent),
        str(ROOT / "node_modules" / ".bin"),
    ]
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env.pop("CDK_VALIDATION", None)  # the suite's own switch; a run adds NO_VALIDATION itself
    env.pop("PYTHONPATH", None)
    env["PATH"] = os.pathsep.join([*path, env.get("PATH", "")])
    env["CDK_DISABLE_VERSION_CHECK"] = "1"
    return env


#: The environment that turns aws-cdk-lib's built-in CloudFormation validation off.
NO_VALIDATION = {"CDK_VALIDATION": "false"}


def commands(snippet: Snippet, file: str, python: Path) -> list[tuple[list[str], dict[str, str]]]:
    """What a user runs for this block, each with the environment it adds: one command, or
    pytest twice (write, then check; the check synthesizes the template the write validated)."""
    if snippet.kind == "pytest":
        pytest = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", file]
        return [([*pytest, "--snapshot-update"], {}), (pytest, NO_VALIDATION)]
    if snippet.kind == "app":
        cdk = shutil.which("cdk", path=environment(python)["PATH"]) or "cdk"
        return [([cdk, "synth", "--quiet", "--app", f"{python} {file}"], {})]
    return [([str(python), file], {})]


def run(
    snippet: Snippet,
    workdir: Path,
    python: Path = Path(sys.executable),
    *,
    validated_elsewhere: bool = False,
    passes: int | None = None,
) -> str:
    """Run ``snippet`` in ``workdir``; return its output, or raise ``AssertionError`` with it.

    ``validated_elsewhere``: its templates are validated by another run, so this one skips
    aws-cdk-lib's CloudFormation validation; ``passes``: run only the first ``passes`` commands.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(CONSUMER_CDK_JSON, workdir / "cdk.json")
    file = "test_snippet.py" if snippet.kind == "pytest" else "snippet.py"
    (workdir / file).write_text(snippet.code)
    output = []
    for command, extra in commands(snippet, file, python)[:passes]:
        done = subprocess.run(
            command,
            cwd=workdir,
            env={**environment(python), **extra, **(NO_VALIDATION if validated_elsewhere else {})},
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        output.append(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}")
        if done.returncode != 0:
            raise AssertionError(f"{snippet.id} ({snippet.heading}) failed:\n" + "\n".join(output))
    if snippet.kind == "app" and not list((workdir / "cdk.out").glob("*.template.json")):
        raise AssertionError(f"{snippet.id} ({snippet.heading}) synthesized no stack")
    return "\n".join(output)

"""The reference app's HyperPod stack (``ReferenceMoeHyperPod``) in the variants its README
documents, and their synthesis by the CDK CLI with the app's own packs (``npx cdk synth``).

A synth failure is a finding (``synth.failed``): the variant cannot be deployed at all.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rehearsal.findings import Finding

#: The repository the rehearsal synthesizes (its ``app.py`` and ``cdk.json``).
ROOT = Path(__file__).resolve().parents[1]
#: The stack the variants play.
STACK = "ReferenceMoeHyperPod"
ALLOW_PLACEHOLDERS = "llm-serving:allow-placeholders"


@dataclass(frozen=True)
class Variant:
    """One documented way to deploy the stack: a name and the context it adds."""

    name: str
    context: Mapping[str, str] = field(default_factory=dict)
    description: str = ""

    def cdk_args(self) -> list[str]:
        args = ["-c", f"{ALLOW_PLACEHOLDERS}=true"]
        for key, value in sorted(self.context.items()):
            args += ["-c", f"{key}={value}"]
        return args


#: The variants (and ``keda-zero``). ``p5en`` reads a key ``stacks/reference_app.py`` may not read
#: yet: an unknown context key is ignored by the CDK, so it then synthesizes as ``reference``.
VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("reference", {}, "the defaults: 2 x ml.p6-b200.48xlarge, one replica"),
        Variant(
            "p5en",
            {"llm-serving:reference-moe:gpu-instance-type": "ml.p5en.48xlarge"},
            "the GPU group on ml.p5en.48xlarge",
        ),
        Variant("keda", {"llm-serving:reference-moe:max-replicas": "2"}, "KEDA scales to 2"),
        Variant(
            "keda-routed",
            {
                "llm-serving:reference-moe:max-replicas": "2",
                "llm-serving:reference-moe:prefix-routing": "true",
            },
            "KEDA scales to 2 behind vLLM's prefix-aware router",
        ),
        Variant(
            "keda-zero",
            {
                "llm-serving:reference-moe:max-replicas": "2",
                "llm-serving:reference-moe:scale-to-zero": "true",
            },
            "KEDA scales 0 to 2, woken by a client's connection (the wake proxy, NLB NewFlowCount)",
        ),
        Variant(
            "inference-operator",
            {"llm-serving:hyperpod:inference-operator": "true"},
            "gpt-oss-120b through AWS's inference operator on two more GPU groups, and Llama "
            "3.3 70B with prefill/decode on a third",
        ),
        Variant(
            "gpu-az", {"llm-serving:hyperpod:gpu-az-id": "usw2-az2"}, "GPU capacity in usw2-az2"
        ),
    )
}


def reference_weight_bytes() -> float:
    """The weights' size of the model the reference HyperPod stack serves (the planner's)."""
    from cdk_llm_serving.planning.sizing import plan
    from stacks.hyperpod_reference_stack import REFERENCE_CONTEXT, REFERENCE_FORMAT, REFERENCE_MODEL

    return float(
        plan(
            REFERENCE_MODEL, REFERENCE_FORMAT, "ml.p6-b200.48xlarge", max_context=REFERENCE_CONTEXT
        ).weight_bytes
    )


class SynthFailed(Exception):
    """``cdk synth`` failed: the finding carries its message."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(str(finding))
        self.finding = finding


def source_hash(root: Path = ROOT) -> str:
    """A hash of what the synthesized templates depend on: the app, the library, the stacks,
    ``cdk.json`` and the pinned requirements (a cache key for synthesized assemblies)."""
    digest = hashlib.sha256()
    paths = [root / "app.py", root / "cdk.json", root / "requirements.txt"]
    for package in ("cdk_llm_serving", "stacks"):
        paths += sorted(
            p for p in (root / package).rglob("*") if p.is_file() and "__pycache__" not in p.parts
        )
    for path in paths:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _cdk_env() -> dict[str, str]:
    env = dict(os.environ)
    # The CDK CLI and jsii use the virtualenv's Node.js (``make``'s PATH, see the Makefile).
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["CDK_DISABLE_VERSION_CHECK"] = "1"
    env.pop("CDK_VALIDATION", None)  # as a user's synth: aws-cdk-lib's own validation on
    return env


def _synth_message(output: str) -> str:
    """cdk's error lines and the construct path under each (not its progress lines)."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    wanted = []
    for index, line in enumerate(lines):
        if line.lstrip().startswith(("ERROR", "Error", "[Error", "error")) or "Error:" in line:
            wanted.append(line.strip())
            following = lines[index + 1 : index + 3]
            wanted += [
                f.strip() for f in following if f.startswith("   ") and "Acknowledge" not in f
            ]
    return "\n".join(dict.fromkeys(wanted or lines[-20:]))


def synthesize(variant: Variant, outdir: Path, *, root: Path = ROOT) -> Path:
    """``npx cdk synth -q`` of the app with the variant's context into ``outdir``; the assembly
    directory. Raises ``SynthFailed`` (rule ``synth.failed``) with cdk's message."""
    if outdir.exists():
        shutil.rmtree(outdir)
    command = ["npx", "cdk", "synth", "-q", *variant.cdk_args(), "-o", str(outdir)]
    result = subprocess.run(
        command, cwd=root, env=_cdk_env(), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SynthFailed(
            Finding(
                rule="synth.failed",
                resource=f"{STACK} ({variant.name})",
                message=_synth_message(result.stdout + "\n" + result.stderr),
                source="the app's own packs (stacks/hipaa_review.py, cdk-nag) and CDK's synth: "
                "a template that does not synthesize does not deploy",
            )
        )
    return outdir


#: Where ``cached_synthesize`` keeps assemblies unless told (one directory per user).
DEFAULT_CACHE = Path(tempfile.gettempdir()) / f"cdk-llm-serving-rehearsal-{os.getuid()}"


def cached_synthesize(variant: Variant, cache: Path = DEFAULT_CACHE, *, root: Path = ROOT) -> Path:
    """``synthesize`` once per source tree: ``<cache>/<source hash>/<variant>``. A failure is
    cached too (``<variant>.synth-failed.txt``), so a session pays each variant's synth once;
    a lock per variant keeps two processes (pytest-xdist) from synthesizing it together."""
    base = cache / source_hash(root)
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f"{variant.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _cached(variant, base, root)


def _cached(variant: Variant, base: Path, root: Path) -> Path:
    outdir = base / variant.name
    failed = base / f"{variant.name}.synth-failed.txt"
    if failed.exists():
        raise SynthFailed(
            Finding(
                rule="synth.failed",
                resource=f"{STACK} ({variant.name})",
                message=failed.read_text(),
                source="the app's own packs (stacks/hipaa_review.py, cdk-nag) and CDK's synth: "
                "a template that does not synthesize does not deploy",
            )
        )
    if (outdir / "manifest.json").exists():
        return outdir
    try:
        return synthesize(variant, outdir, root=root)
    except SynthFailed as error:
        failed.write_text(error.finding.message)
        raise

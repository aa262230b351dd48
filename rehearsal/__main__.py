"""``python -m rehearsal``: synthesize the reference app's HyperPod variants and play each.

Exit status: 0 every variant serves; 1 a blocking finding (the report names it); 2 a usage or
setup error (one ``error:`` line).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from rehearsal import live
from rehearsal.assembly import Assembly
from rehearsal.assumptions import assumptions
from rehearsal.findings import Finding
from rehearsal.play import CHARTS_DIR, Rehearsal, SetupError, play
from rehearsal.variants import (
    DEFAULT_CACHE,
    STACK,
    VARIANTS,
    SynthFailed,
    Variant,
    cached_synthesize,
    reference_weight_bytes,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rehearsal", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--variant",
        action="append",
        choices=sorted(VARIANTS),
        help="a variant to play (repeatable; default: all seven)",
    )
    parser.add_argument(
        "--assembly",
        type=Path,
        help="play this cloud assembly (cdk synth -o DIR) instead of synthesizing",
    )
    parser.add_argument(
        "--no-live",
        action="store_true",
        help="do not start the serving pods as real vLLM processes",
    )
    parser.add_argument(
        "--keep", type=Path, help="keep the assemblies and the live run's files in this directory"
    )
    parser.add_argument(
        "--keep-going", action="store_true", help="play past blocking findings and list them all"
    )
    parser.add_argument(
        "--assumptions", action="store_true", help="list the rules no source settles, and exit"
    )
    parser.add_argument(
        "--charts",
        type=Path,
        default=CHARTS_DIR,
        help=f"the published charts (default {CHARTS_DIR})",
    )
    return parser


def _report(
    name: str, result: Rehearsal | None, findings: list[Finding], seconds: float, out: list[str]
) -> None:
    blocking = [f for f in findings if f.severity == "blocking"]
    played = len(result.world.played) if result else 0
    out.append(f"== {name}: {played} resources played, {len(findings)} findings, {seconds:.1f} s")
    for finding in findings:
        out.append(f"   {finding}")
    if blocking:
        first = blocking[0]
        out.append(f"   DOES NOT SERVE: stopped at {first.resource}: {first.rule} ({first.source})")
    else:
        out.append("   serves")


def run_variant(
    variant: Variant | None,
    assembly_dir: Path | None,
    args: argparse.Namespace,
    workdir: Path,
    out: list[str],
) -> bool:
    """Synthesize (or read) and play one variant; print its report; ``True`` if it serves."""
    name = variant.name if variant else str(assembly_dir)
    started = time.monotonic()
    if assembly_dir is None:
        assert variant is not None
        try:
            assembly_dir = cached_synthesize(variant, args.keep or DEFAULT_CACHE)
        except SynthFailed as failed:
            _report(name, None, [failed.finding], time.monotonic() - started, out)
            return False
    try:
        assembly = Assembly(assembly_dir, STACK)
    except (FileNotFoundError, KeyError) as error:
        raise SetupError(
            f"{assembly_dir} is not a cloud assembly with stack {STACK}: {error}"
        ) from error
    result = play(
        assembly,
        stop_at_blocking=not args.keep_going,
        charts_dir=args.charts,
        weight_bytes=reference_weight_bytes(),
    )
    findings = list(result.findings)
    note = ""
    if result.deployment is not None and not result.blocking:
        if args.no_live:
            note = "   live run: skipped (--no-live)"
        else:
            # One directory for every variant: a variant whose pods, DNS and Service come out
            # the same after substitution takes an earlier variant's answer (``rehearsal.live``).
            try:
                report = live.run_report(result.deployment, workdir / "live")
            except live.LiveUnavailable as error:
                raise SetupError(str(error)) from error
            findings += report.findings
            if report.cached:
                note = "   live run: the same pods, DNS and Service as an earlier run: its answer"
            else:
                timings = ", ".join(f"{k} {v:.0f} s" for k, v in report.timings.items())
                note = f"   live run: {len(report.passed)} checks passed ({timings})"
    _report(name, result, findings, time.monotonic() - started, out)
    for event in result.world.facts.get("scale_play", []):
        out.append(f"   nodes follow replicas: {event}")
    if note:
        out.append(note)
    return not any(f.severity == "blocking" for f in findings)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.assumptions:
        for module, text in assumptions():
            print(f"- {module}: {text}")
        return 0
    if not args.charts.is_dir():
        print(f"error: no published charts at {args.charts} (pass --charts DIR)", file=sys.stderr)
        return 2
    if args.assembly is None and shutil.which("npx") is None:
        print(
            "error: npx is not on PATH (run inside `make`, or put .venv/bin first on PATH)",
            file=sys.stderr,
        )
        return 2
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="rehearsal-"))
    served = True
    try:
        targets: list[tuple[Variant | None, Path | None]] = (
            [(None, args.assembly)]
            if args.assembly
            else [(VARIANTS[n], None) for n in (args.variant or list(VARIANTS))]
        )
        for variant, assembly_dir in targets:
            out: list[str] = []
            served = run_variant(variant, assembly_dir, args, workdir, out) and served
            print("\n".join(out), flush=True)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 (one line, no traceback: the exit-code contract)
        print(
            f"error: the rehearsal failed: {type(error).__name__}: {error}".splitlines()[0],
            file=sys.stderr,
        )
        return 2
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if served else 1


if __name__ == "__main__":
    sys.exit(main())

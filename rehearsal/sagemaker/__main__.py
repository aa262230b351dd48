"""``python -m rehearsal.sagemaker``: every pool copy of the reference app's pool endpoint run as
SageMaker runs it, asked what clients ask, and the construct's PromQL evaluated on its metrics.

Exit status: 0 every copy answered and every query returned data; 1 a finding (one line each);
2 a usage or setup error (one ``error:`` line).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from rehearsal.sagemaker.copies import copies_of, load_template
from rehearsal.sagemaker.runner import DEFAULT_VENV, Report, SetupError, run
from rehearsal.sagemaker.substitutions import LAYOUT
from rehearsal.variants import VARIANTS, SynthFailed, cached_synthesize

#: The reference app's pool endpoint stack (stacks/reference_app.py).
STACK = "GptOss20bPoolEndpoint"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rehearsal.sagemaker", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument(
        "--assembly", type=Path, help="a cloud assembly (cdk synth -o DIR) instead of synthesizing"
    )
    parser.add_argument("--stack", default=STACK, help=f"the stack (default {STACK})")
    parser.add_argument("--keep", type=Path, help="keep the copies' files and logs here")
    parser.add_argument(
        "--parallel", type=int, default=3, help="copies started at once (default 3)"
    )
    parser.add_argument("--vllm-venv", type=Path, default=DEFAULT_VENV)
    return parser


def format_report(report: Report) -> list[str]:
    lines = []
    for entry in report.copies:
        ready = f"{entry.ready_seconds:.0f} s" if entry.ready_seconds is not None else "never"
        lines.append(
            f"== {entry.copy.name} ({entry.copy.model_id}): own name {entry.own!r}, clients send "
            f"{entry.shared!r}; ready in {ready}"
        )
        lines.append(f"   vLLM arguments (from AWS's sagemaker_args.py): {entry.arguments}")
        for substitution in entry.substitutions:
            lines.append(f"   substituted {substitution}")
        if entry.passed:
            lines.append(f"   passed: {', '.join(entry.passed)}")
    for result in report.queries:
        lines.append(
            f"   promql {result.outcome.upper():<11} {result.label}: {result.detail[:300]}"
        )
    lines.append("   laid out instead of the image: " + "; ".join(f"{a}: {b}" for a, b in LAYOUT))
    model = f"{report.model_seconds:.0f} s" if report.model_seconds is not None else "cached"
    lines.append(f"== total {report.seconds:.0f} s (test model: {model})")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        assembly = args.assembly or cached_synthesize(VARIANTS["reference"])
    except SynthFailed as failed:
        print(f"[blocking] {failed.finding}")
        return 1
    path = assembly / f"{args.stack}.template.json"
    if not path.is_file():
        print(f"error: no {path}", file=sys.stderr)
        return 2
    template = load_template(assembly, args.stack)
    copies = copies_of(template)
    if not copies:
        print(f"error: {args.stack} has no pool endpoint", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="smrehearse-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            findings, report = run(
                copies, template, workdir, vllm_venv=args.vllm_venv, parallel=args.parallel
            )
        except SetupError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    for line in format_report(report):
        print(line)
    for finding in findings:
        print(finding)
    print(
        f"{len(findings)} findings on {len(report.copies)} copies of {args.stack}"
        if findings
        else f"every copy of {args.stack} answered; every PromQL query returned data"
    )
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())

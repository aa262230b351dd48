"""Synth cost and template size, side by side in one run (`make bench`).

Each scenario runs in a fresh interpreter (a cold jsii kernel, as `cdk synth` has) and is
measured from outside: CPU time of the process and its Node.js child, wall time, template bytes
and resources. Scenarios are interleaved over several rounds and the median is reported, so a
busy machine skews every column alike. Inside the child, every Python → jsii call (create, get,
set, invoke and their static forms) is counted.

The L1 floor: the resources one pool endpoint synthesizes, re-declared as plain ``CfnResource``
objects (the same template, written by hand), so "per endpoint" compares the library with the
cheapest way to produce identical output; for the reference app, its own templates read back
with ``CfnInclude``.

Every scenario runs twice per round: as a user's ``cdk synth`` runs it, with aws-cdk-lib's
built-in CloudFormation validation (a WebAssembly engine that costs every app about 2 s of CPU
to start), and with ``CDK_VALIDATION=false``, the cost of the constructs alone.

The children may write bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped for them), as an
installed package has it: otherwise every run compiles the library's modules from source.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENDPOINT_COUNTS = (1, 5, 20)
#: CloudFormation's resource limit per stack (the library's check: _cdk/template_limits.py).
MAX_STACK_RESOURCES = 500
JSII_CALLS = ("create", "get", "set", "sget", "sset", "invoke", "sinvoke")


# --------------------------------------------------------------------------- child side


def _count_jsii_calls() -> dict[str, int]:
    """Wrap the kernel's provider: every request from Python to the jsii kernel passes there."""
    import jsii

    provider = jsii.kernel.provider
    counts = dict.fromkeys(JSII_CALLS, 0)

    def counted(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return original(*args, **kwargs)

        return call

    for name in JSII_CALLS:
        setattr(provider, name, counted(name, getattr(provider, name)))
    return counts


def _new_app(outdir: str) -> Any:
    from aws_cdk import App, DefaultStackSynthesizer

    # cdk.json's placeholders synthesize only with the allowance `make synth` passes too.
    context = {
        **json.loads((ROOT / "cdk.json").read_text())["context"],
        "llm-serving:allow-placeholders": "true",
    }
    return App(
        outdir=outdir,
        context=context,
        analytics_reporting=False,
        default_stack_synthesizer=DefaultStackSynthesizer(generate_bootstrap_version_rule=False),
    )


def _add_pool_endpoints(stack: Any, count: int) -> None:
    from cdk_llm_serving import (
        ContainerImage,
        InstancePool,
        InstancePoolEndpoint,
        ModelData,
        PoolEndpointAlarms,
        PoolEndpointDashboard,
        ServingModel,
    )

    image = ContainerImage.from_ecr_uri(
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:server-sagemaker-cuda-v1"
    )
    for index in range(count):
        model = ServingModel(
            stack,
            f"Model{index}",
            image=image,
            model_data=ModelData.from_s3_uri(f"s3://bench-weights-bucket/model-{index}/"),
            served_model_name=f"bench-{index}",
        )
        endpoint = InstancePoolEndpoint(
            stack,
            f"Endpoint{index}",
            model=model,
            pools=[
                InstancePool("ml.p5.48xlarge", max_concurrency=20),
                InstancePool("ml.g6e.12xlarge", max_concurrency=8),
            ],
        )
        endpoint.auto_scale(min_capacity=1, max_capacity=4)
        alarms = PoolEndpointAlarms(stack, f"Alarms{index}", endpoint=endpoint)
        PoolEndpointDashboard(stack, f"Dashboard{index}", endpoint=endpoint, alarms=alarms.alarms)


def _add_l1_copies(stack: Any, count: int, resources: dict[str, Any]) -> None:
    from aws_cdk import CfnResource

    def declare(logical_id: str, body: dict[str, Any]) -> None:
        CfnResource(stack, logical_id, type=body["Type"], properties=body.get("Properties"))

    for logical_id, body in resources["shared"].items():
        declare(logical_id, body)
    per_endpoint = resources["per_endpoint"]
    for index in range(count):
        # Each copy renames its logical IDs, its references to them and the physical names
        # derived from the stack's name ("Bench-…") with its index.
        text = json.dumps(per_endpoint).replace("Bench-", f"Bench-{index}-")
        for logical_id in per_endpoint:
            text = text.replace(f'"{logical_id}"', f'"{logical_id}{index}"')
            text = text.replace("${" + logical_id, "${" + f"{logical_id}{index}")
        for logical_id, body in json.loads(text).items():
            declare(logical_id, body)


def _include_templates(app: Any, templates: dict[str, str]) -> None:
    """The reference app's templates as L1s (``CfnInclude``): the floor of its synth cost."""
    from aws_cdk import Environment, Stack
    from aws_cdk import cloudformation_include as cfn_inc

    for stack_name, path in templates.items():
        stack = Stack(app, stack_name, env=Environment(region="us-west-2", account="111111111111"))
        cfn_inc.CfnInclude(stack, "Template", template_file=path)


def _run_scenario(name: str, count: int, l1_file: str | None) -> dict[str, Any]:
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    sys.path.insert(0, str(ROOT))  # this checkout's package and stacks, whatever is installed
    counts = _count_jsii_calls()
    from aws_cdk import CfnWaitConditionHandle, Environment, Stack

    outdir = tempfile.mkdtemp(prefix="bench-")
    app = _new_app(outdir)
    if name == "reference":  # as app.py builds it, cdk-nag's AwsSolutions and HIPAA included
        from aws_cdk import Validations

        from stacks import add_reference_stacks
        from stacks.hipaa_review import compliance_checks

        add_reference_stacks(app)
        Validations.of(app).add_plugins(*compliance_checks(app))
    elif name == "reference-l1":
        assert l1_file is not None
        _include_templates(app, json.loads(Path(l1_file).read_text()))
    else:
        stack = Stack(app, "Bench", env=Environment(region="us-east-1", account="111111111111"))
        # An empty template is invalid: the empty app holds the smallest resource there is.
        CfnWaitConditionHandle(stack, "Placeholder")
        if name == "pool":
            _add_pool_endpoints(stack, count)
        elif name == "l1":
            assert l1_file is not None
            _add_l1_copies(stack, count, json.loads(Path(l1_file).read_text()))
    assembly = app.synth()
    templates = [Path(outdir, stack.template_file) for stack in assembly.stacks]
    return {
        "jsii_calls": sum(counts.values()),
        "bytes": sum(path.stat().st_size for path in templates),
        "minified": sum(
            len(json.dumps(json.loads(p.read_text()), separators=(",", ":"))) for p in templates
        ),
        "resources": sum(len(json.loads(p.read_text()).get("Resources", {})) for p in templates),
        "outdir": outdir,
        "template": str(templates[0]) if templates else None,
        "templates": {
            stack.stack_name: str(Path(outdir, stack.template_file)) for stack in assembly.stacks
        },
    }


# -------------------------------------------------------------------------- parent side


#: The two modes every scenario runs in: aws-cdk-lib's built-in validation on (the default, as
#: ``cdk synth`` runs) and off (``CDK_VALIDATION=false``: the constructs alone).
MODES = ("validation on", "validation off")


def _child_environment(mode: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "CDK_VALIDATION")
    }
    if mode == "validation off":
        env["CDK_VALIDATION"] = "false"
    return env


def _measure(
    name: str, count: int = 0, l1_file: str | None = None, mode: str = MODES[0], keep: bool = False
) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    command = [sys.executable, __file__, "--scenario", name, "--count", str(count)]
    if l1_file:
        command += ["--l1-file", l1_file]
    out = subprocess.run(
        command, check=True, capture_output=True, text=True, cwd=ROOT, env=_child_environment(mode)
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run: dict[str, Any] = {**json.loads(out.stdout.splitlines()[-1]), "cpu": cpu, "wall": wall}
    if not keep:  # the reference's cloud assembly holds about 60 MB of Lambda assets
        shutil.rmtree(run["outdir"], ignore_errors=True)
    return run


def _endpoint_resources(template_path: str) -> dict[str, Any]:
    """Endpoint 0's resources, and the per-stack singletons (shared functions) they refer to."""
    resources = json.loads(Path(template_path).read_text())["Resources"]
    own = ("Model0", "Endpoint0", "Alarms0", "Dashboard0")
    skip = ("AWS::CDK::Metadata", "AWS::CloudFormation::WaitConditionHandle")
    return {
        "per_endpoint": {key: body for key, body in resources.items() if key.startswith(own)},
        "shared": {
            key: body
            for key, body in resources.items()
            if not key.startswith(own) and body["Type"] not in skip
        },
    }


#: results[scenario label][mode]: the runs of that scenario in that mode.
Results = dict[str, dict[str, list[dict[str, Any]]]]


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(run[key] for run in runs))


def _per_endpoint(results: Results, kind: str, key: str, mode: str = MODES[0]) -> float:
    """What one more endpoint adds: (N = top) minus (N = 1), over top - 1 endpoints."""
    top = max(ENDPOINT_COUNTS)
    high, low = results[f"{kind} x{top}"][mode], results[f"{kind} x1"][mode]
    return (_median(high, key) - _median(low, key)) / (top - 1)


def _print_table(results: Results, rounds: int) -> None:
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(f"median of {rounds} interleaved rounds; CPU = process + Node.js child")
    print("on = aws-cdk-lib's built-in validation (as `cdk synth`); off = CDK_VALIDATION=false\n")
    print(
        f"{'scenario':<18}{'CPU s on':>10}{'CPU s off':>11}{'wall s on':>11}{'jsii calls':>12}"
        f"{'bytes':>10}{'resources':>11}"
    )
    for name, modes in results.items():
        on, off = modes[MODES[0]], modes[MODES[1]]
        print(
            f"{name:<18}{_median(on, 'cpu'):>10.2f}{_median(off, 'cpu'):>11.2f}"
            f"{_median(on, 'wall'):>11.2f}{_median(on, 'jsii_calls'):>12.0f}"
            f"{_median(on, 'bytes'):>10.0f}{_median(on, 'resources'):>11.0f}"
        )


def _ratios(results: Results, mode: str) -> dict[str, str]:
    def cpu(name: str) -> float:
        return _median(results[name][mode], "cpu")

    library, floor = (
        _per_endpoint(results, "pool", "cpu", mode),
        _per_endpoint(results, "l1", "cpu", mode),
    )
    per_endpoint = library / floor if floor > 0 else float("inf")
    return {
        "reference app / empty app  (target <= 1.5x)": f"{cpu('reference') / cpu('empty'):.2f}x",
        "reference app / its templates as L1": f"{cpu('reference') / cpu('reference as L1'):.2f}x",
        "L1 floor of the reference / empty app": f"{cpu('reference as L1') / cpu('empty'):.2f}x",
        "per endpoint, library / L1  (target <= 3x)": (
            f"{library:.3f}/{floor:.3f} s = {per_endpoint:.1f}x"
        ),
    }


def _report(results: Results, rounds: int) -> None:
    _print_table(results, rounds)
    print(f"\n{'CPU ratio':<44}{MODES[0]:>24}{MODES[1]:>24}")
    on, off = _ratios(results, MODES[0]), _ratios(results, MODES[1])
    for label, value in on.items():
        print(f"{label:<44}{value:>24}{off[label]:>24}")
    print(
        f"\nper endpoint: {_per_endpoint(results, 'pool', 'bytes') / 1000:.1f} KB as written, "
        f"{_per_endpoint(results, 'pool', 'minified') / 1000:.1f} KB with "
        f"suppressTemplateIndentation, "
        f"{_per_endpoint(results, 'pool', 'resources'):.0f} resources"
    )
    print(
        f"per endpoint: {_per_endpoint(results, 'pool', 'jsii_calls'):.0f} jsii calls "
        f"(L1 floor: {_per_endpoint(results, 'l1', 'jsii_calls'):.0f})"
    )


def _synth_outcome(count: int) -> str:
    """Synthesize ``count`` pool endpoints in one stack: its size, or the limit check's words."""
    command = [sys.executable, __file__, "--scenario", "pool", "--count", str(count)]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, env=_child_environment(MODES[1])
    )
    if done.returncode == 0:
        run = json.loads(done.stdout.splitlines()[-1])
        shutil.rmtree(run["outdir"], ignore_errors=True)
        return f"synthesizes: {run['resources']} resources, {run['bytes'] / 1000:.0f} KB"
    found = [line for line in done.stderr.splitlines() if "limit of" in line]
    return "fails synth: " + (found[0].strip()[:160] if found else done.stderr.strip()[-300:])


def _report_stack_limit(results: Results) -> None:
    """How many of the bench's endpoints fit in one stack, and what synth says past that."""
    shared = _median(results["pool x1"][MODES[0]], "resources") - _per_endpoint(
        results, "pool", "resources"
    )
    fit = int((MAX_STACK_RESOURCES - shared) // _per_endpoint(results, "pool", "resources"))
    print(f"\nstack limits (CloudFormation: {MAX_STACK_RESOURCES} resources, 1,000,000 bytes):")
    for count in sorted({30, fit, fit + 1}):
        print(f"  {count} pool endpoints in one stack: {_synth_outcome(count)}")


def _scenarios() -> list[tuple[str, str, int]]:
    scenarios: list[tuple[str, str, int]] = [
        ("empty", "empty", 0),
        ("reference", "reference", 0),
        ("reference as L1", "reference-l1", 0),
    ]
    for count in ENDPOINT_COUNTS:
        scenarios += [(f"pool x{count}", "pool", count), (f"l1 x{count}", "l1", count)]
    return scenarios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--l1-file", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    args = parser.parse_args()
    if args.scenario:
        print(json.dumps(_run_scenario(args.scenario, args.count, args.l1_file)))
        return

    # These first runs also write the bytecode the measured runs load.
    one = _measure("pool", 1, keep=True)
    l1_file = Path(tempfile.mkdtemp(prefix="bench-l1-")) / "endpoint.json"
    l1_file.write_text(json.dumps(_endpoint_resources(one["template"])))
    reference = _measure("reference", keep=True)
    reference_file = l1_file.with_name("reference.json")
    reference_file.write_text(json.dumps(reference["templates"]))
    scenarios = _scenarios()
    results: Results = {label: {mode: [] for mode in MODES} for label, _, _ in scenarios}
    for _ in range(args.rounds):
        for label, name, count in scenarios:
            inputs = {"l1": l1_file, "reference-l1": reference_file}.get(name)
            for mode in MODES:
                run = _measure(name, count, str(inputs) if inputs else None, mode)
                results[label][mode].append(run)
    for run in (one, reference):
        shutil.rmtree(run["outdir"], ignore_errors=True)
    shutil.rmtree(l1_file.parent, ignore_errors=True)
    _report(results, args.rounds)
    _report_stack_limit(results)


if __name__ == "__main__":
    main()

"""``cdk-llm-serving`` (or ``python -m cdk_llm_serving``): ``plan``, ``fleet``, ``recommend``,
``smoke``, ``eval`` and ``addons check``. Exit statuses: ``exit_codes``; design: docs/design/cli.md."""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, fields
from typing import Any, TypeVar

from .. import __version__
from .._extras import MissingExtraError
from ..errors import ConfigurationError
from ..planning.cli_support import positive_float, positive_int
from ..planning.cold_start import loading_paths
from ..planning.models import presets, weight_formats
from .exit_codes import (
    EXIT_ADDON_NOT_OFFERED,
    EXIT_CHECK_FAILED,
    EXIT_FALLBACK,
    EXIT_NO_CREDENTIALS,
    EXIT_OUTPUT_CLOSED,
    EXIT_USAGE,
    epilog,
)

T = TypeVar("T")

#: Test doubles by name ("sagemaker": a stubbed boto3 client, "sleep": a fake clock).
Clients = Mapping[str, Any]


def _plan_command(args: argparse.Namespace) -> int:
    from ..planning.cli_support import error_as_dict, error_text
    from ..planning.cold_start import estimate_cold_start
    from ..planning.cost import estimate_cost
    from ..planning.report import objective_cost, plan_as_dict, plan_as_table

    try:
        result, workload, catalog = _plan(args)
    except (ConfigurationError, OSError) as error:  # PlanningError is a ConfigurationError
        if args.json:
            print(json.dumps(error_as_dict(error), indent=2, default=str))
        print(f"error: {_one_line(error_text(error))}", file=sys.stderr)
        return EXIT_USAGE
    path = args.loading_path or ("s3_download" if result.nodes == 1 else "fsx_lustre")
    cold_start = estimate_cold_start(result.weight_bytes, path, result.nodes)
    cost = estimate_cost(
        result,
        output_tokens_per_second=args.tokens_per_second,
        workload=workload,
        itl_target_ms=args.itl_target_ms,
        catalog=catalog,
    )
    if args.tokens_per_second is None:
        cost = objective_cost(result, cost)
    if args.json:
        print(json.dumps(plan_as_dict(result, cold_start, cost), indent=2))
    else:
        print(plan_as_table(result, cold_start, cost, catalog))
    return 0


def _plan(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The plan of ``plan``'s flags, the workload it was ranked at and the catalog it priced."""
    from ..planning.cli_support import objective_inputs, plan_catalog, plan_model
    from ..planning.models import ModelSpec
    from ..planning.objective import Objective
    from ..planning.sizing import plan

    workload, targets, objective = objective_inputs(args)
    catalog = plan_catalog(args.region, args.prices)
    model = plan_model(args.model, args.model_config, args.model_index, args.weight_format)
    max_context = args.max_context
    if max_context is None and objective is Objective.MIN_GPUS:
        max_context = ModelSpec.of(model).max_context  # --max-context's documented default
    result = plan(
        model,
        args.weight_format,
        args.instance_type,
        catalog=catalog,
        workload=workload,
        targets=targets,
        objective=objective,
        max_context=max_context,
        concurrency=workload.concurrency or 1,
        gpu_memory_utilization=args.gpu_memory_utilization,
        kv_cache_dtype=args.kv_cache_dtype,
        max_nodes=args.max_nodes,
        require_efa=not args.allow_without_efa,
    )
    return result, workload, catalog


def _smoke_command(args: argparse.Namespace) -> int:
    from .smoke import format_report, report, run_smoke

    def smoke(headers: dict[str, str], tls: ssl.SSLContext | None) -> int:
        checks, results = run_smoke(args.base_url, args.model, headers, args.timeout, context=tls)
        data = report(checks, results)
        print(json.dumps(data, indent=2) if args.json else format_report(data))
        return 0 if all(check.passed for check in checks) else EXIT_CHECK_FAILED

    return _endpoint_command(args, smoke)


def _endpoint_command(
    args: argparse.Namespace, work: Callable[[dict[str, str], ssl.SSLContext | None], int]
) -> int:
    """``work`` with ``--base-url``'s headers and TLS context; the endpoint's failures and
    missing credentials for a bearer token are one error line."""
    from .bearer_token import BearerTokenError
    from .smoke import CA_BUNDLE_ENV, SmokeError, connection

    ca_bundle = args.ca_bundle or os.environ.get(CA_BUNDLE_ENV) or None
    try:
        headers = _auth_headers(args)
        with connection(args.base_url, headers, ca_bundle) as tls:
            return work(headers, tls)
    except SmokeError as error:
        return _fail(args, str(error), error.exit_code)
    except BearerTokenError as error:
        return _fail(args, str(error), EXIT_NO_CREDENTIALS)


def _auth_headers(args: argparse.Namespace) -> dict[str, str]:
    """The bearer token ``smoke`` and ``eval`` send: ``--bearer-token``, a SageMaker token
    made for ``--sagemaker-region``, or ``--api-key`` / ``LLM_SERVING_API_KEY``."""
    from .bearer_token import generate_bearer_token
    from .smoke import API_KEY_ENV

    token: str | None
    if args.sagemaker_region:  # the three flags are mutually exclusive
        token = generate_bearer_token(args.sagemaker_region)
    else:
        token = args.bearer_token or args.api_key or os.environ.get(API_KEY_ENV)
    return {"Authorization": f"Bearer {token}"} if token else {}


def _eval_command(args: argparse.Namespace) -> int:
    from .evals.command import prepare_eval

    return _endpoint_command(args, prepare_eval(args))


def _aws_call(args: argparse.Namespace, doing: str, call: Callable[[], T]) -> tuple[T | None, int]:
    """Run ``call``; an AWS error becomes one line on stderr (JSON on stdout under
    ``--json``) and a distinct exit status."""
    from .aws_errors import describe_failure

    try:
        return call(), 0
    except Exception as error:  # noqa: BLE001 - describe_failure re-raises what is not AWS's
        failure = describe_failure(error, doing)
        return None, _fail(args, failure.message, failure.exit_code)


def _fleet_command(args: argparse.Namespace, clients: Clients) -> int:
    from .fleet import fleet_as_dict, fleet_status, format_fleet

    status, code = _aws_call(
        args,
        f"describe endpoint {args.endpoint!r}",
        lambda: fleet_status(_client(clients, "sagemaker", args.region), args.endpoint),
    )
    if status is None:
        return code
    if args.live_prices:
        status, code = _aws_call(
            args,
            "read prices from the AWS Price List API",
            lambda: _live_prices(args, clients, status),
        )
        if status is None:
            return code
    print(json.dumps(fleet_as_dict(status), indent=2) if args.json else format_fleet(status))
    return EXIT_FALLBACK if args.fail_on_fallback and status.on_fallback else 0


def _live_prices(args: argparse.Namespace, clients: Clients, status: Any) -> Any:
    """Reprice the fleet with the Price List API's on-demand prices of the endpoint's region."""
    from ..planning.catalog import default_catalog
    from . import live_prices

    pricing = _client(clients, "pricing", live_prices.PRICING_ENDPOINT_REGION)
    region = args.region or _client(clients, "sagemaker", args.region).meta.region_name
    types = live_prices.pool_types(status)
    catalog = live_prices.live_catalog(default_catalog(), pricing, region, types)
    if args.save_prices:
        with open(args.save_prices, "w") as handle:
            json.dump(live_prices.price_file(catalog, types), handle, indent=2)
    return live_prices.reprice(status, catalog)


def _recommend_start(args: argparse.Namespace, clients: Clients) -> int:
    from .recommend import RecommendationSpec, load_spec, start_recommendation

    values: dict[str, Any] = load_spec(args.spec) if args.spec else {}
    for key in (f.name for f in fields(RecommendationSpec)):  # flags override the file
        if getattr(args, key, None) is not None:
            values[key] = getattr(args, key)
    if args.instance_type:
        values["instance_types"] = args.instance_type
    spec = RecommendationSpec.from_mapping(values).validate()  # ConfigurationError: main()
    arn, code = _aws_call(
        args,
        f"start recommendation job {spec.name!r}",
        lambda: start_recommendation(_client(clients, "sagemaker", args.region), spec),
    )
    if code:
        return code
    print(arn)
    return 0


def _recommend_wait(args: argparse.Namespace, clients: Clients) -> int:
    from .recommend import JobFailed, wait_for_job

    sleep = clients.get("sleep", __import__("time").sleep)
    try:
        job, code = _aws_call(
            args,
            f"describe recommendation job {args.job!r}",
            lambda: wait_for_job(
                _client(clients, "sagemaker", args.region),
                args.job,
                poll_seconds=args.poll_seconds,
                sleep=sleep,
            ),
        )
    except JobFailed as error:
        return _fail(args, str(error), EXIT_CHECK_FAILED)
    if job is None:
        return code
    print(f"{args.job}: Completed with {len(job.get('Recommendations', []))} recommendations")
    return 0


def _recommend_to_pools(args: argparse.Namespace, clients: Clients) -> int:
    from .recommend import pools_from_job

    job, code = _aws_call(
        args,
        f"describe recommendation job {args.job!r}",
        lambda: _client(clients, "sagemaker", args.region).describe_ai_recommendation_job(
            AIRecommendationJobName=args.job
        ),
    )
    if job is None:
        return code
    status = job["AIRecommendationJobStatus"]
    if status != "Completed":
        message = f"recommendation job {args.job} is {status}, not Completed"
        return _fail(args, message, EXIT_CHECK_FAILED)
    try:
        pool_file = pools_from_job(job, args.goal)
    except ConfigurationError as error:
        return _fail(args, str(error), EXIT_CHECK_FAILED)
    pool_file.write(args.output)
    for priority, pool in enumerate(pool_file.pools, start=1):
        e = pool.expected
        print(
            f"{priority}. {pool.instance_type}: capacity {pool.max_concurrency}, ttft {e.ttft_ms} ms, itl {e.itl_ms} ms, {e.throughput_tokens_per_s} tokens/s, ${e.cost_per_million_tokens}/M tokens"
        )
    print(f"wrote {args.output}")
    return 0


def _addons_check(args: argparse.Namespace, clients: Clients) -> int:
    from . import addon_check

    versions = addon_check.check_versions(args.kubernetes_version)
    overrides = addon_check.parse_overrides(args.addon_versions, versions)
    checks, code = _aws_call(
        args,
        "list EKS add-on versions (DescribeAddonVersions)",
        lambda: addon_check.check_pins(_client(clients, "eks", args.region), versions, overrides),
    )
    if checks is None:
        return code
    region = args.region or (clients["eks"].meta.region_name if "eks" in clients else None)
    data = addon_check.checks_as_dict(region, checks)
    print(json.dumps(data, indent=2) if args.json else addon_check.format_checks(region, checks))
    return 0 if all(check.offered for check in checks) else EXIT_ADDON_NOT_OFFERED


def _client(clients: Clients, service: str, region: str | None) -> Any:
    """A test's stubbed client for ``service``, else boto3's, retrying the SDK's standard way."""
    if service in clients:
        return clients[service]
    import boto3

    from .aws_errors import RETRY_CONFIG

    return boto3.client(service, region_name=region, config=RETRY_CONFIG)


def build_parser() -> argparse.ArgumentParser:
    # The console script's name, also under ``python -m cdk_llm_serving`` (one name in docs).
    parser = argparse.ArgumentParser(
        prog="cdk-llm-serving",
        description="cdk-llm-serving tools",
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_plan(commands)
    _add_smoke(commands)
    _add_eval(commands)
    _add_fleet(commands)
    _add_recommend(commands)
    _add_addons(commands)
    return parser


def _add_plan(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``plan``: the model, its format and the instance type, then the layout's limits."""
    planner = commands.add_parser("plan", help="size a model on an instance type")
    which = planner.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", choices=sorted(presets()), help="model preset")
    which.add_argument("--model-config", help="a local Hugging Face config.json (no network)")
    planner.add_argument("--model-index", help="its model.safetensors.index.json, for exact sizes")
    planner.add_argument(
        "--weight-format", required=True, choices=list(weight_formats()), help="the weights' format"
    )
    planner.add_argument("--instance-type", required=True, help="e.g. ml.p6-b200.48xlarge")
    planner.add_argument(
        "--max-context",
        type=int,
        help="tokens per sequence, at least 1 (default: the model's maximum)",
    )
    planner.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=0.9,
        help="vLLM's share of GPU memory (default 0.9)",
    )
    planner.add_argument(
        "--kv-cache-dtype",
        choices=["auto", "bf16", "fp8"],
        help="KV-cache precision (default: tokens-per-dollar tries auto = BF16 and, on GPUs "
        "with FP8 tensor cores, fp8; min-gpus uses auto)",
    )
    planner.add_argument(
        "--max-nodes",
        type=int,
        default=16,
        help="most nodes one replica may span (default 16; 1 for a SageMaker endpoint)",
    )
    planner.add_argument(
        "--allow-without-efa",
        action="store_true",
        help="allow layouts across nodes of types without EFA",
    )
    planner.add_argument(
        "--loading-path",
        choices=loading_paths(),
        help="how weights reach the GPUs (default: s3_download on one node, fsx_lustre on several)",
    )
    _add_plan_objective(planner)
    _add_plan_output_options(planner)
    planner.set_defaults(handler=_plan_command)


def _add_plan_objective(planner: argparse.ArgumentParser) -> None:
    """The workload ``plan`` ranks layouts at, its latency targets and the objective."""
    planner.add_argument(
        "--concurrency",
        help="requests in flight across the deployment: that many sequences of --max-context "
        "must fit, and the batch per engine is at most their share (default: one must fit, no cap)",
    )
    planner.add_argument(
        "--request-rate",
        help="requests per second (instead of --concurrency): how many copies of the plan serve it",
    )
    planner.add_argument(
        "--objective",
        metavar="{tokens-per-dollar,min-gpus}",
        help="tokens-per-dollar (default): the layout with the most output tokens per dollar "
        "meeting --ttft/--itl/--tpot at the workload; min-gpus: the smallest layout that fits",
    )
    planner.add_argument("--ttft", help="time-to-first-token target, seconds")
    planner.add_argument("--itl", help="inter-token latency target (the decode step), milliseconds")
    planner.add_argument(
        "--tpot",
        help="time-per-output-token target, (end-to-end - TTFT) / (output - 1), milliseconds",
    )


def _add_plan_output_options(planner: argparse.ArgumentParser) -> None:
    """Throughput, workload, prices and output format of ``plan``."""
    planner.add_argument(
        "--tokens-per-second",
        type=positive_float,
        help="measured output tokens/s of one replica (default: decode model)",
    )
    planner.add_argument(
        "--input-tokens",
        type=positive_int,
        default=2048,
        help="prompt tokens per request (default 2048)",
    )
    planner.add_argument(
        "--output-tokens",
        type=positive_int,
        default=512,
        help="generated tokens per request (default 512)",
    )
    planner.add_argument(
        "--itl-target-ms",
        type=positive_float,
        default=50.0,
        help="inter-token latency of the decode curve and speculative estimates shown (default 50)",
    )
    planner.add_argument(
        "--region",
        help="price region; needs recorded prices or --prices (default: the catalog's, us-east-1)",
    )
    planner.add_argument(
        "--prices",
        help='price file {"region": ..., "prices": {type: $/h}} (e.g. from fleet --save-prices)',
    )
    planner.add_argument(
        "--json", action="store_true", help="print JSON instead of a table (errors too)"
    )


def _add_smoke(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``smoke``: stream a tool-calling and a reasoning request."""
    smoke = commands.add_parser(
        "smoke", help="check an OpenAI-compatible endpoint: tool calls, reasoning, TTFT/ITL"
    )
    smoke.add_argument(
        "--base-url",
        required=True,
        help="e.g. https://internal-lb/v1 or https://runtime.sagemaker.<region>.amazonaws.com/endpoints/<name>/openai/v1",
    )
    smoke.add_argument(
        "--model",
        required=True,
        help="the name clients send (on a pool endpoint: the shared name every copy serves)",
    )
    _add_connection(smoke)
    smoke.add_argument("--json", action="store_true", help="print JSON instead of text")
    smoke.set_defaults(handler=_smoke_command)


def _add_connection(command: argparse.ArgumentParser) -> None:
    """Authentication, TLS and timeout of ``smoke`` and ``eval``."""
    auth = command.add_mutually_exclusive_group()
    auth.add_argument(
        "--api-key",
        help="sent as a bearer token (default: the LLM_SERVING_API_KEY environment variable)",
    )
    auth.add_argument("--bearer-token", help="a ready SageMaker bearer token")
    auth.add_argument(
        "--sagemaker-region",
        help="make a SageMaker bearer token for this region from the standard AWS credential chain",
    )
    command.add_argument(
        "--ca-bundle",
        help="PEM file of CA certificates trusted in addition to the system's, e.g. a HyperPod "
        "service's ca.crt (default: the CDK_LLM_SERVING_CA_BUNDLE environment variable); "
        "verification is always on; not with an http:// URL",
    )
    command.add_argument(
        "--timeout", type=positive_float, default=300.0, help="seconds per request (default 300)"
    )


def _add_eval(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``eval``: the user's evals against one copy, deltas to a reference, the gate."""
    from .evals.command import add_arguments

    command = commands.add_parser(
        "eval",
        help="score one copy on your eval tasks; delta to a reference copy; exit 15 below threshold",
    )
    add_arguments(command)
    _add_connection(command)
    command.set_defaults(handler=_eval_command)


def _add_fleet(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``fleet``: per-pool instances, fallback and cost of an endpoint."""
    fleet = commands.add_parser(
        "fleet", help="what an instance-pool endpoint runs on, per pool, and what it costs"
    )
    fleet.add_argument("endpoint", help="endpoint name")
    fleet.add_argument("--region", help="AWS region (default: the standard chain)")
    fleet.add_argument("--json", action="store_true", help="print JSON")
    fleet.add_argument(
        "--fail-on-fallback",
        action="store_true",
        help="exit 3 when instances run on a fallback pool",
    )
    fleet.add_argument(
        "--live-prices",
        action="store_true",
        help="price pools from the AWS Price List API (needs credentials)",
    )
    fleet.add_argument(
        "--save-prices", help="with --live-prices: write the prices as a file for plan --prices"
    )
    fleet.set_defaults(handler=_fleet_command, aws=True)


def _add_recommend(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``recommend start|wait|to-pools``: inference recommendation jobs."""
    recommend = commands.add_parser(
        "recommend", help="SageMaker inference recommendations -> instance pools"
    )
    steps = recommend.add_subparsers(dest="step", required=True)
    start = steps.add_parser(
        "start", help="create the workload configuration and the recommendation job"
    )
    start.add_argument("--spec", help="YAML file with the keys below (flags override it)")
    start.add_argument("--name")
    start.add_argument("--model-s3-uri", dest="model_s3_uri")
    start.add_argument("--output-s3-uri", dest="output_s3_uri")
    start.add_argument("--role-arn", dest="role_arn")
    start.add_argument("--goal", choices=["cost", "latency", "throughput"])
    start.add_argument("--instance-type", action="append", help="up to 3, repeat the flag")
    start.add_argument("--framework", choices=["VLLM", "LMI"])
    start.add_argument("--workload", help="inline workload specification")
    start.add_argument("--dataset-s3-uri", dest="dataset_s3_uri")
    start.add_argument("--region")
    start.set_defaults(handler=_recommend_start, aws=True)
    wait = steps.add_parser("wait", help="poll a job until it completes or fails")
    wait.add_argument("job")
    wait.add_argument("--poll-seconds", type=positive_float, default=60.0)
    wait.add_argument("--region")
    wait.set_defaults(handler=_recommend_wait, aws=True)
    to_pools = steps.add_parser("to-pools", help="write the job's results as a pool file")
    to_pools.add_argument("job")
    to_pools.add_argument(
        "--goal", choices=["cost", "latency", "throughput"], help="order (default: the job's goal)"
    )
    to_pools.add_argument("--output", default="pools.json")
    to_pools.add_argument("--region")
    to_pools.set_defaults(handler=_recommend_to_pools, aws=True)


def _add_addons(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``addons check``: the pinned EKS add-on versions against DescribeAddonVersions."""
    addons = commands.add_parser("addons", help="EKS add-on pins of the HyperPod constructs")
    steps = addons.add_subparsers(dest="step", required=True)
    check = steps.add_parser(
        "check",
        help="is every pinned add-on version offered for the Kubernetes version (exit 13 if not)",
    )
    check.add_argument(
        "--kubernetes-version",
        help="the cluster's Kubernetes version (default: every version the library supports)",
    )
    check.add_argument("--region", help="AWS region (default: the standard chain)")
    check.add_argument(
        "--addon-versions",
        help="name=version,... overrides, as passed to HyperPodEksCluster(addon_versions=...)",
    )
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(handler=_addons_check, aws=True)


def main(argv: Sequence[str] | None = None, *, clients: Clients | None = None) -> int:
    """``clients`` lets tests hand in (stubbed) boto3 clients. A reader that closes the output
    early (``| head``) ends the command with ``EXIT_OUTPUT_CLOSED``, not a traceback
    (https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    try:
        code = _main(argv, clients)
        sys.stdout.flush()  # a block-buffered pipe fails here, not at the print
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OUTPUT_CLOSED


def _main(argv: Sequence[str] | None, clients: Clients | None) -> int:
    from .arguments import check_arguments

    args = build_parser().parse_args(argv)
    try:
        check_arguments(args)  # names, regions and paths, before any AWS call
        if getattr(args, "aws", False):
            return int(args.handler(args, clients or {}))
        return int(args.handler(args))
    except ConfigurationError as error:  # bad input found by a command: one line, no traceback
        return _fail(args, str(error), EXIT_USAGE, [asdict(p) for p in error.problems])
    except (FileNotFoundError, PermissionError, IsADirectoryError) as error:
        return _fail(args, f"{error.filename}: {error.strerror}", EXIT_USAGE)
    except MissingExtraError as error:  # eval without jsonschema
        return _fail(args, str(error), EXIT_USAGE)


def _one_line(message: str) -> str:
    """A multi-line message (every problem of a ``ConfigurationError``) as one line."""
    lines = [line.strip().removeprefix("- ") for line in message.splitlines() if line.strip()]
    return "; ".join(lines)


def _fail(
    args: argparse.Namespace, message: str, code: int, problems: list[dict[str, Any]] | None = None
) -> int:
    """One ``error:`` line on stderr (and the error as JSON on stdout under ``--json``)."""
    if getattr(args, "json", False):
        data = {"error": message, "exit_code": code, "problems": problems or []}
        print(json.dumps(data, indent=2, default=str))
    print(f"error: {_one_line(message)}", file=sys.stderr)
    return code

"""``python -m cdk_llm_serving``: the library's command line.

``plan``   will a model fit an instance type, with which parallelism, how fast it
           starts and what it costs (pure Python: no AWS call, no CDK).
``smoke``  stream two chat completions from an OpenAI-compatible endpoint and check
           tool calls and reasoning; report TTFT, inter-token latency and tokens/s.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def _plan_command(args: argparse.Namespace) -> int:
    from .planning.cold_start import estimate_cold_start
    from .planning.cost import estimate_cost
    from .planning.report import plan_as_dict, plan_as_table
    from .planning.sizing import PlanningError, plan

    try:
        result = plan(
            args.model,
            args.quantization,
            args.instance_type,
            max_context=args.max_context,
            concurrency=args.concurrency,
            gpu_memory_utilization=args.gpu_memory_utilization,
            kv_cache_dtype=args.kv_cache_dtype,
            max_nodes=args.max_nodes,
        )
    except (PlanningError, KeyError) as error:
        message = error.args[0] if isinstance(error, KeyError) else str(error)
        print(f"error: {message}", file=sys.stderr)
        return 2
    path = args.loading_path or ("s3_download" if result.nodes == 1 else "fsx_lustre")
    cold_start = estimate_cold_start(result.weight_bytes, path, result.nodes)
    cost = estimate_cost(result, output_tokens_per_second=args.tokens_per_second)
    if args.json:
        print(json.dumps(plan_as_dict(result, cold_start, cost), indent=2))
    else:
        print(plan_as_table(result, cold_start, cost))
    return 0


def _smoke_command(args: argparse.Namespace) -> int:
    from .smoke import SmokeError, format_report, report, safe_run, sagemaker_bearer_token

    headers: dict[str, str] = {}
    try:
        if args.bearer_token:
            headers["Authorization"] = f"Bearer {args.bearer_token}"
        elif args.sagemaker_region:
            headers["Authorization"] = f"Bearer {sagemaker_bearer_token(args.sagemaker_region)}"
        elif args.api_key:
            headers["Authorization"] = f"Bearer {args.api_key}"
        checks, results = safe_run(args.base_url, args.model, headers, args.timeout)
    except (SmokeError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    data = report(checks, results)
    print(json.dumps(data, indent=2) if args.json else format_report(data))
    return 0 if all(check.passed for check in checks) else 1


def build_parser() -> argparse.ArgumentParser:
    from .planning.cold_start import loading_paths
    from .planning.models import presets, weight_formats

    parser = argparse.ArgumentParser(prog="python -m cdk_llm_serving", description="cdk-llm-serving tools")
    commands = parser.add_subparsers(dest="command", required=True)
    planner = commands.add_parser("plan", help="size a model on an instance type")
    planner.add_argument("--model", required=True, choices=sorted(presets()), help="model preset")
    planner.add_argument("--quantization", required=True, choices=list(weight_formats()), help="weight format")
    planner.add_argument("--instance-type", required=True, help="e.g. ml.p6-b200.48xlarge")
    planner.add_argument("--max-context", type=int, help="tokens per sequence (default: the model's maximum)")
    planner.add_argument("--concurrency", type=int, default=1, help="sequences of --max-context that must fit at once (default 1)")
    planner.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="vLLM's share of GPU memory (default 0.9)")
    planner.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "bf16", "fp8"], help="KV-cache precision (default auto = BF16)")
    planner.add_argument("--max-nodes", type=int, default=16, help="most nodes one replica may span (default 16; 1 for a SageMaker endpoint)")
    planner.add_argument("--loading-path", choices=loading_paths(), help="how weights reach the GPUs (default: s3_download on one node, fsx_lustre on several)")
    planner.add_argument("--tokens-per-second", type=float, help="measured output tokens/s of one replica (default: roofline estimate)")
    planner.add_argument("--json", action="store_true", help="print JSON instead of a table")
    planner.set_defaults(handler=_plan_command)

    smoke = commands.add_parser("smoke", help="check an OpenAI-compatible endpoint: tool calls, reasoning, TTFT/ITL")
    smoke.add_argument("--base-url", required=True, help="e.g. http://internal-lb/v1 or https://runtime.sagemaker.<region>.amazonaws.com/endpoints/<name>/openai/v1")
    smoke.add_argument("--model", required=True, help="the served model name")
    auth = smoke.add_mutually_exclusive_group()
    auth.add_argument("--api-key", help="sent as a bearer token")
    auth.add_argument("--bearer-token", help="a ready SageMaker bearer token")
    auth.add_argument("--sagemaker-region", help="make a SageMaker bearer token for this region from the standard AWS credential chain")
    smoke.add_argument("--timeout", type=float, default=300.0, help="seconds per request (default 300)")
    smoke.add_argument("--json", action="store_true", help="print JSON instead of text")
    smoke.set_defaults(handler=_smoke_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())

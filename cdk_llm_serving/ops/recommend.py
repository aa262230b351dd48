"""From SageMaker's inference recommendations to instance pools (docs/design/cli.md,
"Recommendations to pools")."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any

import yaml

from ..errors import (
    ConfigurationError,
    Problem,
    Problems,
    check_keywords,
    check_literal,
    check_sequence,
)
from ..planning.goals import GOALS, Goal
from ..planning.instance_types import InstanceType
from ..planning.pool_file import ExpectedPerformance, PoolFile, RecommendedPool
from .arguments import check_sagemaker_name

#: The workload configuration a job creates is named after the job, with this suffix.
WORKLOAD_SUFFIX = "-workload"
#: The API's performance-target metric for each goal.
GOAL_METRICS: dict[Goal, str] = {"cost": "cost", "latency": "ttft-ms", "throughput": "throughput"}
TERMINAL = {"Completed", "Failed", "Stopped"}


@dataclass(frozen=True)
class RecommendationSpec:
    """What ``recommend start`` needs (flags or a small YAML file with the same keys)."""

    name: str
    model_s3_uri: str
    output_s3_uri: str
    role_arn: str
    goal: Goal = "cost"
    instance_types: tuple[InstanceType | str, ...] = ()
    framework: str = "VLLM"
    workload: str | None = None
    dataset_s3_uri: str | None = None
    optimize_model: bool = True

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RecommendationSpec:
        """The spec from flags and a YAML file; every unknown, missing or mistyped key refused."""
        problems = Problems("recommendation spec")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        check_keywords(problems, "spec", {k: v for k, v in data.items() if k not in fields}, fields)
        required = [name for name, f in fields.items() if f.default is dataclasses.MISSING]
        for name in required:
            if data.get(name) is None:
                problems.add(name, None, "required (a flag or a key of --spec)")
        for name in ("name", "model_s3_uri", "output_s3_uri", "role_arn", "framework"):
            if data.get(name) is not None and not isinstance(data[name], str):
                problems.add(name, data[name], "must be a string")
        values = {k: v for k, v in data.items() if k in fields}
        if "instance_types" in values:
            if check_sequence(
                problems, "instance_types", values["instance_types"], str, "an instance type string"
            ):
                values["instance_types"] = tuple(values["instance_types"])
        if "goal" in values:
            check_literal(problems, "goal", values["goal"], Goal, "goals")
        problems.raise_if_any()
        return cls(**values)

    def problems(self) -> list[Problem]:
        """What the recommendation API would refuse, each a ``Problem`` named by key."""
        found = Problems("recommendation spec")
        check_literal(found, "goal", self.goal, Goal, "goals")
        if len(self.instance_types) > 3:
            found.add(
                "instance_types",
                list(self.instance_types),
                f"a job benchmarks at most 3 instance types, got {len(self.instance_types)}",
            )
        for index, name in enumerate(self.instance_types):
            prop = f"instance_types[{index}]"
            instance_type = InstanceType.parse(found, prop, name)
            if instance_type is not None:
                instance_type.check_hosting(found, prop)
        for prop in ("model_s3_uri", "output_s3_uri") + (
            ("dataset_s3_uri",) if self.dataset_s3_uri else ()
        ):
            if not str(getattr(self, prop)).startswith("s3://"):
                found.add(prop, getattr(self, prop), "must be an s3:// URI")
        self._check_names(found)
        return list(found.problems())

    def _check_names(self, found: Problems) -> None:
        """The job name, the workload configuration named after it and the role ARN against
        botocore's sagemaker model, before the credential lookup."""
        job, workload = "CreateAIRecommendationJob", "CreateAIWorkloadConfig"
        if check_sagemaker_name(
            found, "name", self.name, job, "AIRecommendationJobName", "a job name"
        ):
            workload_name = f"{self.name}{WORKLOAD_SUFFIX}"
            what = f"the job name plus {WORKLOAD_SUFFIX!r} (the workload configuration's name)"
            check_sagemaker_name(
                found, "name", workload_name, workload, "AIWorkloadConfigName", what
            )
        role = "a role ARN (arn:aws:iam::<account>:role/<name>, not a role name)"
        check_sagemaker_name(found, "role_arn", self.role_arn, job, "RoleArn", role)

    def validate(self) -> RecommendationSpec:
        """This spec, or a ``ConfigurationError`` listing every one of its ``problems()``."""
        found = self.problems()
        if found:
            raise ConfigurationError("recommendation spec", found)
        return self


def load_spec(path: str) -> dict[str, Any]:
    """The keys of a ``--spec`` YAML file (``ConfigurationError``: unreadable, or not a mapping)."""
    problems = Problems("recommendation spec")
    try:
        with open(path) as handle:
            data = yaml.safe_load(handle)
    except OSError as error:
        problems.add("--spec", path, f"cannot read the file ({error.strerror or error})")
    except yaml.YAMLError as error:
        problems.add("--spec", path, f"not valid YAML ({str(error).splitlines()[0]})")
    else:
        if data is None:
            return {}
        if not isinstance(data, dict):
            problems.add(
                "--spec", path, f"must hold a mapping of keys, not a {type(data).__name__}"
            )
        else:
            return {str(key): value for key, value in data.items()}
    problems.raise_if_any()
    return {}


def start_recommendation(client: Any, spec: RecommendationSpec) -> str:
    """Create the workload configuration and the recommendation job; returns the job ARN."""
    spec.validate()
    workload_name = f"{spec.name}{WORKLOAD_SUFFIX}"
    workload: dict[str, Any] = {"AIWorkloadConfigName": workload_name}
    if spec.workload:
        workload["AIWorkloadConfigs"] = {"WorkloadSpec": {"Inline": spec.workload}}
    if spec.dataset_s3_uri:
        workload["DatasetConfig"] = {
            "InputDataConfig": [
                {
                    "ChannelName": "prompts",
                    "DataSource": {"S3DataSource": {"S3Uri": spec.dataset_s3_uri}},
                }
            ]
        }
    client.create_ai_workload_config(**workload)
    request: dict[str, Any] = {
        "AIRecommendationJobName": spec.name,
        "ModelSource": {"S3": {"S3Uri": spec.model_s3_uri}},
        "OutputConfig": {"S3OutputLocation": spec.output_s3_uri},
        "AIWorkloadConfigIdentifier": workload_name,
        "PerformanceTarget": {"Constraints": [{"Metric": GOAL_METRICS[spec.goal]}]},
        "RoleArn": spec.role_arn,
        "InferenceSpecification": {"Framework": spec.framework},
        "OptimizeModel": spec.optimize_model,
    }
    if spec.instance_types:
        request["ComputeSpec"] = {"InstanceTypes": list(spec.instance_types)}
    arn: str = client.create_ai_recommendation_job(**request)["AIRecommendationJobArn"]
    return arn


class JobFailed(RuntimeError):
    pass


def wait_for_job(
    client: Any,
    name: str,
    *,
    poll_seconds: float = 60.0,
    timeout_seconds: float = 6 * 3600,
    sleep: Callable[[float], None] = time.sleep,
    progress: IO[str] | None = None,
) -> dict[str, Any]:
    """Poll until the job ends; raises ``JobFailed`` with the service's reason."""
    progress = progress or sys.stderr
    waited = 0.0
    while True:
        job = client.describe_ai_recommendation_job(AIRecommendationJobName=name)
        status = job["AIRecommendationJobStatus"]
        progress.write(f"[{waited / 60:5.1f} min] {name}: {status}\n")
        if status == "Completed":
            completed: dict[str, Any] = job
            return completed
        if status in TERMINAL:
            raise JobFailed(
                f"recommendation job {name} {status.lower()}: {job.get('FailureReason', 'no reason given')}"
            )
        if waited >= timeout_seconds:
            raise JobFailed(
                f"recommendation job {name} still {status} after {waited / 60:.0f} minutes"
            )
        sleep(poll_seconds)
        waited += poll_seconds


def _metric_value(
    entries: list[dict[str, Any]], *names: str, prefer_stat: str = "p50"
) -> tuple[float, str] | None:
    matches = [e for e in entries if any(n in e.get("Metric", "").lower() for n in names)]
    if not matches:
        return None
    matches.sort(key=lambda e: (e.get("Stat", "").lower() != prefer_stat, e.get("Stat", "")))
    value = _number(matches[0].get("Value"))
    return None if value is None else (value, matches[0].get("Unit", ""))


def _number(value: object) -> float | None:
    """A metric's value as the API reports it (a number or its text); ``None`` for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:  # text that is not a number
        return None


def _milliseconds(found: tuple[float, str] | None) -> float | None:
    if found is None:
        return None
    value, unit = found
    return value * 1000 if unit.lower() in ("s", "seconds", "second") else value


def expected_performance(entries: list[dict[str, Any]]) -> ExpectedPerformance:
    throughput = _metric_value(entries, "throughput", "tokens-per-second", "tokenspersecond")
    cost = _metric_value(entries, "cost")
    return ExpectedPerformance(
        ttft_ms=_milliseconds(
            _metric_value(entries, "ttft", "time-to-first-token", "timetofirsttoken")
        ),
        itl_ms=_milliseconds(_metric_value(entries, "itl", "inter-token", "intertoken")),
        throughput_tokens_per_s=throughput[0] if throughput else None,
        cost_per_million_tokens=cost[0] if cost else None,
    )


def capacity(entries: list[dict[str, Any]], expected: ExpectedPerformance) -> float | None:
    """Concurrent requests one instance sustained: the reported concurrency, else Little's law
    (throughput x ITL: each request decodes one token per inter-token interval)."""
    reported = _metric_value(entries, "concurrency", "concurrent")
    if reported:
        return reported[0]
    if expected.throughput_tokens_per_s and expected.itl_ms:
        return round(expected.throughput_tokens_per_s * expected.itl_ms / 1000, 2)
    return None


def _order_key(goal: Goal) -> Callable[[RecommendedPool], tuple[bool, float]]:
    def key(pool: RecommendedPool) -> tuple[bool, float]:
        e = pool.expected
        value = {
            "cost": e.cost_per_million_tokens,
            "latency": e.ttft_ms,
            "throughput": -(e.throughput_tokens_per_s or 0) if e.throughput_tokens_per_s else None,
        }[goal]
        return (value is None, value if value is not None else 0.0)

    return key


def pools_from_job(job: Mapping[str, Any], goal: Goal | None = None) -> PoolFile:
    goal = goal or _goal_of(job)
    pools: dict[str, RecommendedPool] = {}
    for recommendation in job.get("Recommendations", []):
        deployment = recommendation.get("DeploymentConfiguration") or {}
        details: list[dict[str, Any]] = (recommendation.get("ModelDetails") or {}).get(
            "InstanceDetails", []
        )
        first: dict[str, Any] = next(iter(details), {})
        instance_type = deployment.get("InstanceType") or first.get("InstanceType")
        if not instance_type:
            continue
        entries = recommendation.get("ExpectedPerformance", [])
        expected = expected_performance(entries)
        channels = {c.get("ChannelName"): c.get("Uri") for c in deployment.get("S3", [])}
        model_uri = channels.get("model") or next(iter(channels.values()), None)
        pool = RecommendedPool(
            instance_type=instance_type,
            image_uri=deployment.get("ImageUri"),
            model_data_uri=model_uri,
            max_concurrency=capacity(entries, expected),
            model_package_arn=(recommendation.get("ModelDetails") or {}).get("ModelPackageArn"),
            environment=dict(deployment.get("EnvironmentVariables") or {}),
            expected=expected,
        )
        best = pools.get(instance_type)
        if best is None or _order_key(goal)(pool) < _order_key(goal)(best):
            pools[instance_type] = pool
    if not pools:
        problems = Problems("recommendation job")
        problems.add(
            "job",
            job.get("AIRecommendationJobName"),
            "has no recommendations with an instance type",
        )
        problems.raise_if_any()
    ordered = sorted(pools.values(), key=_order_key(goal))[:5]
    return PoolFile(job=job.get("AIRecommendationJobName", ""), goal=goal, pools=tuple(ordered))


def _goal_of(job: Mapping[str, Any]) -> Goal:
    metrics = [c.get("Metric") for c in (job.get("PerformanceTarget") or {}).get("Constraints", [])]
    for goal in GOALS:
        if GOAL_METRICS[goal] in metrics:
            return goal
    return "cost"

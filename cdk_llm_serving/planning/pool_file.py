"""The pool file: instance pools chosen by a SageMaker inference recommendation job.

Versioned JSON (``FORMAT``, ``VERSION``), written by ``recommend to-pools`` and read by
``InstancePoolEndpoint.build_from_recommendation``; its fields are ``PoolFile``'s and
``RecommendedPool``'s (an example: docs/design/planner.md, "The pool file").
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, Problems, check_keywords, check_literal, check_sequence
from .goals import Goal

FORMAT = "cdk-llm-serving/pools"
VERSION = 1
__all__ = [
    "FORMAT",
    "VERSION",
    "ExpectedPerformance",
    "Goal",
    "PoolFile",
    "PoolFileError",
    "RecommendedPool",
    "copy_served_name",
]


class PoolFileError(ConfigurationError):
    """A pool file that cannot be read: every problem, named by its path in the file."""


def copy_served_name(client_name: str, instance_type: str) -> str:
    """``gpt-oss-20b`` on ``ml.g6e.2xlarge`` -> ``gpt-oss-20b-g6e-2xlarge``.

    The name responses of one recommended deployment carry, so a client sending the shared
    ``client_name`` sees which deployment answered.
    """
    return f"{client_name}-{instance_type.removeprefix('ml.').replace('.', '-')}"


@dataclass(frozen=True)
class ExpectedPerformance:
    ttft_ms: float | None = None
    itl_ms: float | None = None
    throughput_tokens_per_s: float | None = None
    cost_per_million_tokens: float | None = None


@dataclass(frozen=True)
class RecommendedPool:
    instance_type: str
    image_uri: str | None
    model_data_uri: str | None
    max_concurrency: float | None
    model_package_arn: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    expected: ExpectedPerformance = field(default_factory=ExpectedPerformance)


@dataclass(frozen=True)
class PoolFile:
    job: str
    goal: Goal
    pools: tuple[RecommendedPool, ...]

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "version": VERSION,
                "job": self.job,
                "goal": self.goal,
                "pools": [asdict(p) for p in self.pools],
            },
            indent=2,
            sort_keys=False,
        )

    def write(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n")

    @classmethod
    def load(cls, path: str | Path) -> PoolFile:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            problems = Problems(f"pool file {path}")
            problems.add("file", str(path), f"not a readable JSON pool file ({error})")
            problems.raise_if_any(PoolFileError)
        return cls.from_dict(data, str(path))

    @classmethod
    def from_dict(cls, data: Any, source: str = "pool file") -> PoolFile:
        """The file's content checked field by field; ``PoolFileError`` lists every problem."""
        problems = Problems(source if source.startswith("pool file") else f"pool file {source}")
        if not isinstance(data, dict):
            problems.add(
                "(top level)",
                data,
                "must be a JSON object with format, version, job, goal and pools",
            )
            problems.raise_if_any(PoolFileError)
        if data.get("format") != FORMAT:
            problems.add("format", data.get("format"), f"must be {FORMAT!r}")
        elif data.get("version") != VERSION:
            problems.add(
                "version",
                data.get("version"),
                f"not supported (this library reads version {VERSION})",
            )
        problems.raise_if_any(PoolFileError)
        goal = data.get("goal", "cost")
        check_literal(problems, "goal", goal, Goal, "goals")
        if not isinstance(data.get("job", ""), str):
            problems.add("job", data.get("job"), "must be the recommendation job's name (a string)")
        pools = data.get("pools")
        parsed: tuple[RecommendedPool, ...] = ()
        if check_sequence(problems, "pools", pools, dict, "a pool object"):
            if not 1 <= len(pools) <= 5:
                problems.add("pools", len(pools), "must list 1 to 5 pools")
            parsed = tuple(_pool(problems, f"pools[{i}]", pool) for i, pool in enumerate(pools))
        problems.raise_if_any(PoolFileError)
        return cls(job=data.get("job", ""), goal=goal, pools=parsed)


def _pool(problems: Problems, prop: str, pool: dict[str, Any]) -> RecommendedPool:
    """One pool entry; problems for missing, unknown and wrongly typed fields."""
    fields = {f.name: f for f in dataclasses.fields(RecommendedPool)}
    check_keywords(problems, prop, {k: v for k, v in pool.items() if k not in fields}, fields)
    if not isinstance(pool.get("instance_type"), str):
        problems.add(
            f"{prop}.instance_type", pool.get("instance_type"), "must be an instance type string"
        )
    for name in ("image_uri", "model_data_uri", "model_package_arn"):
        if not isinstance(pool.get(name), str | None):
            problems.add(f"{prop}.{name}", pool.get(name), "must be a string or null")
    _number(problems, f"{prop}.max_concurrency", pool.get("max_concurrency"))
    environment = pool.get("environment") or {}
    if not isinstance(environment, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in environment.items()
    ):
        problems.add(f"{prop}.environment", environment, "must map variable names to strings")
        environment = {}
    expected = pool.get("expected") or {}
    known = {f.name for f in dataclasses.fields(ExpectedPerformance)}
    if not isinstance(expected, dict):
        problems.add(f"{prop}.expected", expected, "must be an object of expected figures")
        expected = {}
    check_keywords(
        problems, f"{prop}.expected", {k: v for k, v in expected.items() if k not in known}, known
    )
    for name in known:
        _number(problems, f"{prop}.expected.{name}", expected.get(name))
    if problems:
        return RecommendedPool("", None, None, None)
    return RecommendedPool(
        **{**pool, "environment": environment, "expected": ExpectedPerformance(**expected)}
    )


def _number(problems: Problems, prop: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        problems.add(prop, value, "must be a number or null (not a string)")

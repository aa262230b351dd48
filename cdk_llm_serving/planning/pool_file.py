"""The pool file: instance pools chosen by a SageMaker inference recommendation job.

Versioned JSON (``format``/``version`` below), written by ``recommend to-pools`` and read
by ``InstancePoolEndpoint.build_from_recommendation``::

    {
      "format": "cdk-llm-serving/pools", "version": 1,
      "job": "<recommendation job name>", "goal": "cost" | "latency" | "throughput",
      "pools": [                                   # most preferred first, 1-5 entries
        {"instance_type": "ml.g6e.12xlarge",
         "model_package_arn": "arn:...",           # or null
         "image_uri": "...", "environment": {...},
         "model_data_uri": "s3://bucket/prefix/",  # the deployment's model channel, or null
         "max_concurrency": 24.0,                  # what one instance sustains (autoscaling weight)
         "expected": {"ttft_ms": 180.0, "itl_ms": 21.0, "throughput_tokens_per_s": 1150.0,
                      "cost_per_million_tokens": 2.9}}
      ]
    }
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

FORMAT = "cdk-llm-serving/pools"
VERSION = 1
Goal = Literal["cost", "latency", "throughput"]


class PoolFileError(ValueError):
    pass


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
        except (OSError, json.JSONDecodeError) as error:
            raise PoolFileError(f"{path}: not a readable JSON pool file ({error})") from None
        return cls.from_dict(data, str(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "pool file") -> PoolFile:
        if data.get("format") != FORMAT:
            raise PoolFileError(f"{source}: format is {data.get('format')!r}, expected {FORMAT!r}")
        if data.get("version") != VERSION:
            raise PoolFileError(
                f"{source}: version {data.get('version')!r} is not supported (this library reads version {VERSION})"
            )
        pools = data.get("pools") or []
        if not 1 <= len(pools) <= 5:
            raise PoolFileError(f"{source}: must list 1 to 5 pools, lists {len(pools)}")
        try:
            parsed = tuple(
                RecommendedPool(
                    **{**pool, "expected": ExpectedPerformance(**(pool.get("expected") or {}))}
                )
                for pool in pools
            )
        except TypeError as error:
            raise PoolFileError(f"{source}: unexpected pool fields ({error})") from None
        return cls(job=data.get("job", ""), goal=data.get("goal", "cost"), pools=parsed)

"""How long a replica takes from "instance ready" to "serving", from weight bytes and loading path.

Bandwidths per path: ``data/loading.json``; timeouts: the estimate x ``safety_factor``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import Problems, check_choice
from .catalog import load_data

LoadingPath = Literal["s3_download", "s3_streaming", "fsx_lustre"]


@dataclass(frozen=True)
class ColdStart:
    path: str
    download_seconds: float
    load_seconds: float
    engine_start_seconds: float
    safety_factor: float
    minimum_timeout_seconds: int = 600

    @property
    def total_seconds(self) -> float:
        return self.download_seconds + self.load_seconds + self.engine_start_seconds

    @property
    def download_timeout_seconds(self) -> int:
        """Budget for the download alone (SageMaker's ModelDataDownloadTimeoutInSeconds)."""
        return max(
            self.minimum_timeout_seconds, math.ceil(self.download_seconds * self.safety_factor)
        )

    @property
    def startup_timeout_seconds(self) -> int:
        """Budget from container start to healthy (SageMaker's ContainerStartupHealthCheckTimeoutInSeconds,
        a Kubernetes startup probe)."""
        return max(
            self.minimum_timeout_seconds,
            math.ceil((self.load_seconds + self.engine_start_seconds) * self.safety_factor),
        )


@functools.cache
def _loading() -> dict[str, Any]:
    return load_data("loading.json")


def loading_paths() -> tuple[str, ...]:
    return tuple(_loading()["paths"])


def estimate_cold_start(weight_bytes: float, path: LoadingPath | str, nodes: int = 1) -> ColdStart:
    data = _loading()
    if path not in data["paths"]:
        problems = Problems("cold start")
        check_choice(problems, "path", path, list(data["paths"]), "loading paths")
        problems.raise_if_any()
    figures = data["paths"][path]
    downloads = figures["download_gb_per_s"] is not None
    per_node = weight_bytes if downloads else weight_bytes / nodes
    download = per_node / (figures["download_gb_per_s"] * 1e9) if downloads else 0.0
    load = per_node / (figures["load_gb_per_s"] * 1e9)
    return ColdStart(
        path=path,
        download_seconds=download,
        load_seconds=load,
        engine_start_seconds=float(data["engine_start_seconds"]),
        safety_factor=float(data["safety_factor"]),
        minimum_timeout_seconds=int(data["minimum_timeout_seconds"]),
    )

"""``HelmChartSource``: where a user-supplied chart (the HyperPod dependencies chart) comes from:
a local directory, uploaded as an S3 asset (its dependencies vendored under ``charts/``, as Helm
requires), or an OCI repository whose last path segment is the chart's name, each as
aws-cdk-lib's kubectl handler takes it (docs/design/hyperpod-cluster.md, "Serving add-ons")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from ..errors import Problems
from .constants import HYPERPOD_CHART_NAME

__all__ = ["HelmChartSource", "missing_dependencies", "stale_archives"]


@dataclass(frozen=True)
class HelmChartSource:
    """A chart from a local directory (bundled as an asset) or an OCI repository.

    Use ``from_directory`` or ``from_repository``.

    :param chart: the chart's name (``name`` in its ``Chart.yaml``). Default for the HyperPod
        dependencies chart: ``hyperpod-helm-chart``.
    :param repository: ``oci://<registry>/<path>/<chart>`` of a published copy.
    :param version: the published chart version (required with ``repository``).
    :param directory: a local chart directory whose dependencies are vendored under ``charts/``.
    """

    chart: str
    repository: str | None = None
    version: str | None = None
    directory: str | None = None

    @classmethod
    def from_directory(cls, path: str, chart: str = HYPERPOD_CHART_NAME) -> HelmChartSource:
        """A chart directory, e.g. ``helm_chart/HyperPodHelmChart`` of a checkout of
        aws/sagemaker-hyperpod-cli after ``helm dependency build`` in it."""
        return cls(chart=chart, directory=path)

    @classmethod
    def from_repository(
        cls, repository: str, version: str, chart: str = HYPERPOD_CHART_NAME
    ) -> HelmChartSource:
        """A copy you publish: ``helm dependency build`` then ``helm package`` the chart directory
        (so the archive carries its subcharts; synth cannot look inside a remote copy),
        ``helm push hyperpod-helm-chart-0.1.0.tgz oci://<registry>/charts``, then
        ``from_repository("oci://<registry>/charts/hyperpod-helm-chart", "0.1.0")``."""
        return cls(chart=chart, repository=repository, version=version)

    def validate(self, problems: Problems, prop: str) -> None:
        if (self.directory is None) == (self.repository is None):
            problems.add(prop, self, "give exactly one of directory or repository")
        if self.repository is not None:
            self._validate_repository(problems, prop, self.repository)
        if self.directory is not None:
            self._validate_directory(problems, prop, Path(self.directory))

    def _validate_repository(self, problems: Problems, prop: str, repository: str) -> None:
        if not self.version:
            problems.add(
                f"{prop}.version", self.version, "pin the chart version of a repository chart"
            )
        if not repository.startswith("oci://"):
            problems.add(
                f"{prop}.repository",
                repository,
                "an oci:// reference (the HyperPod chart is in no Helm repository; publish your copy to an OCI registry such as ECR)",
            )
        elif repository.rstrip("/").rpartition("/")[2] != self.chart:
            problems.add(
                f"{prop}.repository",
                repository,
                f"must end with the chart's name '/{self.chart}': the kubectl handler installs the "
                "directory `helm pull --untar` creates, which it takes from the last path segment",
            )

    def _validate_directory(self, problems: Problems, prop: str, directory: Path) -> None:
        if not (directory / "Chart.yaml").is_file():
            problems.add(
                f"{prop}.directory", str(directory), "a Helm chart directory (with a Chart.yaml)"
            )
            return
        missing = missing_dependencies(directory)
        if missing:
            problems.add(
                f"{prop}.directory",
                str(directory),
                f"its dependencies {', '.join(missing)} are missing under charts/ (Helm refuses to "
                f"install it): run `helm dependency build {directory}` first",
            )

    def _render(self, scope: Construct, asset_id: str) -> dict[str, Any]:
        """``eks.HelmChart`` options locating the chart; a directory becomes an S3 asset alone."""
        if self.directory is None:
            return {"chart": self.chart, "repository": self.repository, "version": self.version}
        directory = Path(self.directory)
        asset = s3_assets.Asset(
            scope,
            asset_id,
            path=str(directory),
            exclude=[f"charts/{name}" for name in stale_archives(directory)],
        )
        return {"chart": None, "repository": None, "version": None, "chart_asset": asset}


def _declared_dependencies(directory: Path) -> dict[str, dict[str, Any]]:
    """Dependencies listed in ``Chart.yaml`` and ``Chart.lock``, by name."""
    declared: dict[str, dict[str, Any]] = {}
    for name in ("Chart.yaml", "Chart.lock"):
        path = directory / name
        if path.is_file():
            for dependency in (yaml.safe_load(path.read_text()) or {}).get("dependencies") or []:
                declared.setdefault(str(dependency["name"]), dependency)
    return declared


def _unpacked(charts: Path) -> set[str]:
    """Names of the subcharts unpacked under ``charts``."""
    return {
        str(yaml.safe_load((entry / "Chart.yaml").read_text())["name"])
        for entry in charts.iterdir()
        if entry.is_dir() and (entry / "Chart.yaml").is_file()
    }


def _archives(charts: Path) -> dict[str, str]:
    """File name -> subchart name of the ``.tgz`` archives under ``charts``."""
    return {
        entry.name: entry.name[: -len(".tgz")].rsplit("-", 1)[0]
        for entry in charts.iterdir()
        if entry.name.endswith(".tgz")
    }


def missing_dependencies(directory: Path) -> list[str]:
    """``name version`` of each declared dependency Helm would not find in the directory.

    A ``file://`` dependency must exist at its path; any other must be vendored under
    ``charts/`` (Helm checks every dependency, enabled or not, before installing).
    """
    charts = directory / "charts"
    vendored = _unpacked(charts) | set(_archives(charts).values()) if charts.is_dir() else set()
    missing: list[str] = []
    for name, dependency in sorted(_declared_dependencies(directory).items()):
        repository = str(dependency.get("repository") or "")
        if repository.startswith("file://"):
            present = (directory / repository[len("file://") :]).is_dir()
        else:
            present = name in vendored
        if not present:
            missing.append(f"{name} {dependency.get('version', '')}".strip())
    return missing


def stale_archives(directory: Path) -> list[str]:
    """``charts/*.tgz`` archives of a subchart that is also unpacked there.

    Helm loads both and keeps whichever it reads last, so the render changes from run to run
    (aws/sagemaker-hyperpod-cli commits ``charts/health-monitoring-agent-0.1.0.tgz`` next to the
    newer ``charts/health-monitoring-agent/``): the asset leaves the archive out.
    """
    charts = directory / "charts"
    if not charts.is_dir():
        return []
    unpacked = _unpacked(charts)
    return sorted(file for file, name in _archives(charts).items() if name in unpacked)

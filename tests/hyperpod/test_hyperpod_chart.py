"""The HyperPod dependencies chart: vendored or published, installed before the HyperPod cluster."""

from __future__ import annotations

import json
import shutil
import stat

import pytest

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.addons import HelmChartSource, HyperPodServingAddons
from cdk_llm_serving.hyperpod.chart_source import missing_dependencies, stale_archives
from tests.support.builders import new_stack, template_of
from tests.support.hyperpod import hyperpod_cluster
from tests.support.kubectl_handler import load_helm_handler, run_create
from tests.support.template_helpers import flatten, only_resource, resources_of_type

HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"


@pytest.fixture(scope="module")
def handler(tmp_path_factory):
    """aws-cdk-lib's kubectl handler (Helm part), as installed."""
    return load_helm_handler(tmp_path_factory.mktemp("handler"))


def _chart_copy(shared_dir, tmp_path, drop=()):
    source = shared_dir / "charts" / "hyperpod-dependencies-011ca92"
    if not source.is_dir():
        pytest.skip(
            f"{source} (AWS's HyperPod chart, vendored) is not in this checkout's shared dir"
        )
    target = tmp_path / "HyperPodHelmChart"
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:  # the shared copy is read-only
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    for name in drop:
        path = target / "charts" / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return target


def _with_chart(source: HelmChartSource, **addon_props):
    stack = new_stack("HyperPodChart")
    cluster = hyperpod_cluster(stack)
    HyperPodServingAddons(stack, "Addons", cluster=cluster, hyperpod_chart=source, **addon_props)
    return template_of(stack)


def _refused(source: HelmChartSource) -> ConfigurationError:
    stack = new_stack("Refused")
    cluster = hyperpod_cluster(stack)
    with pytest.raises(ConfigurationError) as caught:
        HyperPodServingAddons(stack, "Addons", cluster=cluster, hyperpod_chart=source)
    return caught.value


def _hyperpod_chart(template: dict) -> tuple[str, dict]:
    (found,) = [
        (key, value)
        for key, value in resources_of_type(template, HELM_CHART).items()
        if value["Properties"]["Release"] == "hyperpod-dependencies"
    ]
    return found


def test_a_git_checkout_without_its_remote_dependencies_is_refused_naming_each(
    shared_dir, tmp_path
):
    chart = _chart_copy(
        shared_dir,
        tmp_path,
        drop=("nvidia-device-plugin", "aws-efa-k8s-device-plugin", "cert-manager"),
    )
    assert missing_dependencies(chart) == [
        "aws-efa-k8s-device-plugin 0.5.20",
        "cert-manager v1.18.2",
        "nvidia-device-plugin 0.16.1",
    ]
    error = _refused(HelmChartSource.from_directory(str(chart)))
    (problem,) = error.problems
    assert problem.property == "hyperpod_chart.directory"
    for name in ("nvidia-device-plugin 0.16.1", "aws-efa-k8s-device-plugin", "cert-manager"):
        assert name in problem.allowed
    assert f"helm dependency build {chart}" in problem.allowed


def test_a_vendored_chart_is_an_asset_alone_installed_before_the_hyperpod_cluster(
    shared_dir, tmp_path, handler
):
    chart = _chart_copy(shared_dir, tmp_path)
    assert missing_dependencies(chart) == []
    assert stale_archives(chart) == ["health-monitoring-agent-0.1.0.tgz"]
    template = _with_chart(HelmChartSource.from_directory(str(chart)))
    key, resource = _hyperpod_chart(template)
    props = resource["Properties"]
    # aws-cdk-lib's kubectl handler asserts Chart, Repository and Version are absent with an asset
    assert "ChartAssetURL" in props
    assert not {"Chart", "Repository", "Version"} & set(props)
    assert props["Namespace"] == "kube-system" and "Wait" not in props
    # the handler itself accepts it, downloads the asset and installs without --wait
    commands = run_create(handler, props, "/tmp/chart")
    assert commands[1][0] == "fetch" and commands[1][1].startswith("s3://")
    helm = commands[-1]
    assert helm[:5] == ["helm", "upgrade", "hyperpod-dependencies", "/tmp/chart", "--install"]
    assert "--wait" not in helm and "--repo" not in helm and "--version" not in helm
    # what the previous rendering did (Chart next to the asset) the handler refuses
    with pytest.raises(AssertionError):
        run_create(handler, {**props, "Chart": "hyperpod-dependencies"}, "/tmp/chart")
    cluster_key, cluster = only_resource(template, "AWS::SageMaker::Cluster")
    assert cluster_key not in resource.get("DependsOn", [])
    assert key in cluster["DependsOn"]
    assert not any("NodesReady" in dep for dep in resource.get("DependsOn", []))
    # the other charts still wait for the nodes (cluster.nodes_ready: the node wait)
    for other_key, other in resources_of_type(template, HELM_CHART).items():
        if other_key != key:
            assert any("NodesReady" in dep for dep in other.get("DependsOn", [])), other_key


def test_hyperpod_chart_values_place_its_device_plugins_and_keep_the_users(shared_dir, tmp_path):
    chart = _chart_copy(shared_dir, tmp_path)
    template = _with_chart(
        HelmChartSource.from_directory(str(chart)),
        hyperpod_chart_values={"mlflow": {"enabled": False}, "global": {"extra": 1}},
    )
    values = json.loads(flatten(_hyperpod_chart(template)[1]["Properties"]["Values"]))
    assert values["global"] == {"region": "us-east-1", "extra": 1}
    assert values["mlflow"] == {"enabled": False}
    efa = values["aws-efa-k8s-device-plugin"]
    assert efa["supportedInstanceLabels"]["values"] == ["ml.p5en.48xlarge"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in efa[
        "tolerations"
    ]
    nvidia = values["nvidia-device-plugin"]
    assert nvidia["fullnameOverride"] == "nvidia-device-plugin"
    # no direct installs next to the chart
    releases = {
        r["Properties"]["Release"] for r in resources_of_type(template, HELM_CHART).values()
    }
    assert not {"nvidia-device-plugin", "aws-efa-k8s-device-plugin"} & releases


def test_a_published_copy_is_pulled_from_oci(handler):
    template = _with_chart(
        HelmChartSource.from_repository(
            "oci://111122223333.dkr.ecr.us-east-1.amazonaws.com/charts/hyperpod-helm-chart", "0.1.0"
        )
    )
    props = _hyperpod_chart(template)[1]["Properties"]
    assert props["Repository"].endswith("/charts/hyperpod-helm-chart")
    assert props["Version"] == "0.1.0" and "ChartAssetURL" not in props
    commands = run_create(handler, props, "/tmp/pulled/hyperpod-helm-chart")
    assert commands[1][0] == "fetch" and commands[1][2:] == [props["Repository"], "0.1.0"]
    assert commands[-1][:4] == [
        "helm",
        "upgrade",
        "hyperpod-dependencies",
        "/tmp/pulled/hyperpod-helm-chart",
    ]


@pytest.mark.parametrize(
    ("repository", "version", "wrong"),
    [
        ("https://example.com/charts", "0.1.0", "hyperpod_chart.repository"),
        (
            "oci://111122223333.dkr.ecr.us-east-1.amazonaws.com/charts",
            "0.1.0",
            "hyperpod_chart.repository",
        ),
        (
            "oci://111122223333.dkr.ecr.us-east-1.amazonaws.com/charts/hyperpod-helm-chart",
            "",
            "hyperpod_chart.version",
        ),
    ],
)
def test_repository_sources_the_handler_cannot_pull_are_refused(repository, version, wrong):
    error = _refused(HelmChartSource.from_repository(repository, version))
    assert [p.property for p in error.problems] == [wrong]


def test_a_directory_without_chart_yaml_is_refused(tmp_path):
    error = _refused(HelmChartSource.from_directory(str(tmp_path)))
    assert "Chart.yaml" in error.problems[0].allowed


def test_archives_helm_dependency_build_writes_count_as_vendored(shared_dir, tmp_path):
    """`helm dependency build` leaves <name>-<version>.tgz archives, also of file:// subcharts."""
    chart = _chart_copy(shared_dir, tmp_path, drop=("nvidia-device-plugin",))
    (chart / "charts" / "nvidia-device-plugin-0.16.1.tgz").write_bytes(b"")
    (chart / "charts" / "mpi-operator-0.1.0.tgz").write_bytes(b"")
    assert missing_dependencies(chart) == []
    assert stale_archives(chart) == ["health-monitoring-agent-0.1.0.tgz", "mpi-operator-0.1.0.tgz"]

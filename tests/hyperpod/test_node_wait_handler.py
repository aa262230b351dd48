"""The nodes-ready handler against botocore's real ``ListClusterNodes`` shapes (Stubber
validates every request and response against the sagemaker service model)."""

from __future__ import annotations

import datetime
import importlib.util
from types import ModuleType

import botocore.session
import pytest
from botocore.stub import Stubber

from cdk_llm_serving.hyperpod.node_readiness import NODE_WAIT_CODE

ARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdefgh1234"


@pytest.fixture(scope="module")
def handler() -> ModuleType:
    spec = importlib.util.spec_from_file_location("node_wait_index", NODE_WAIT_CODE / "index.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def client():
    return botocore.session.get_session().create_client(
        "sagemaker",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _node(group: str, index: int, status: str, message: str | None = None) -> dict:
    instance_status = {"Status": status} | ({"Message": message} if message else {})
    return {
        "InstanceGroupName": group,
        "InstanceId": f"i-{index:017x}",
        "InstanceType": "ml.p5en.48xlarge" if group != "system" else "ml.m5.2xlarge",
        "LaunchTime": datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC),
        "InstanceStatus": instance_status,
    }


def _event(request: str = "Create", final: str = "true", started: float = 1000.0) -> dict:
    return {
        "RequestType": request,
        "ResourceProperties": {
            "ClusterName": ARN,
            "InstanceGroups": {"gpu": "2", "system": "1"},
            "DeadlineSeconds": "600",
            "Final": final,
        },
        "Data": {"StartedAt": str(int(started))},
    }


def _cluster(
    status: str = "InService",
    groups: dict[str, str] | None = None,
    failure: str | None = None,
) -> dict:
    """A DescribeCluster response: the cluster's status and each group's."""
    response: dict = {
        "ClusterArn": ARN,
        "ClusterStatus": status,
        "InstanceGroups": [
            {"InstanceGroupName": name, "Status": group_status}
            for name, group_status in (groups or {"gpu": "Creating", "system": "InService"}).items()
        ],
    }
    if failure is not None:
        response["FailureMessage"] = failure
    return response


def _stub_pages(client, *pages: list[dict], cluster: dict | None = None) -> Stubber:
    stubber = Stubber(client)
    stubber.add_response("describe_cluster", cluster or _cluster(), {"ClusterName": ARN})
    for index, page in enumerate(pages):
        expected = {"ClusterName": ARN, "MaxResults": 100}
        if index:
            expected["NextToken"] = f"t{index}"
        response: dict = {"ClusterNodeSummaries": page}
        if index < len(pages) - 1:
            response["NextToken"] = f"t{index + 1}"
        stubber.add_response("list_cluster_nodes", response, expected)
    stubber.activate()
    return stubber


def test_complete_when_every_group_has_its_nodes_running_across_pages(handler, client):
    stubber = _stub_pages(
        client,
        [_node("gpu", 1, "Running"), _node("system", 2, "Running")],
        [_node("gpu", 3, "Running")],
    )
    assert handler.is_complete(_event(), client=client, now=1010.0) == {
        "IsComplete": True,
        "Data": {"Ready": "true"},
    }
    stubber.assert_no_pending_responses()


def test_group_names_match_exactly_and_only_running_counts(handler, client):
    # A longer group name containing "gpu" and nodes still in deep health checks don't count.
    _stub_pages(
        client,
        [
            _node("gpu", 1, "Running"),
            _node("gpu", 2, "DeepHealthCheckInProgress"),
            _node("gpu-b200", 3, "Running"),
            _node("system", 4, "Running"),
        ],
    )
    assert handler.is_complete(_event(), client=client, now=1010.0) == {"IsComplete": False}


def test_at_the_deadline_a_middle_stage_hands_over_and_the_last_fails(handler, client):
    nodes = [_node("gpu", 1, "Pending"), _node("system", 2, "Running")]
    stubber = Stubber(client)
    for _ in range(2):  # one description and one single-page listing per call
        stubber.add_response("describe_cluster", _cluster())
        stubber.add_response("list_cluster_nodes", {"ClusterNodeSummaries": nodes})
    stubber.activate()
    assert handler.is_complete(_event(final="false"), client=client, now=1700.0) == {
        "IsComplete": True,
        "Data": {"Ready": "false"},
    }
    with pytest.raises(RuntimeError, match=r"'gpu': '0/2'"):
        handler.is_complete(_event(final="true"), client=client, now=1700.0)


def test_delete_needs_no_call(handler, client):
    stubber = Stubber(client)
    stubber.activate()
    assert handler.is_complete(_event("Delete"), client=client) == {"IsComplete": True}
    stubber.assert_no_pending_responses()


def test_on_event_keeps_the_physical_id_and_records_the_start(handler):
    created = handler.on_event({**_event(), "LogicalResourceId": "NodesReadyStage1"})
    assert created["PhysicalResourceId"] == f"{ARN}/NodesReadyStage1"
    assert int(created["Data"]["StartedAt"]) > 0
    updated = handler.on_event({**_event("Update"), "PhysicalResourceId": "kept"})
    assert updated["PhysicalResourceId"] == "kept"


def test_stubber_refuses_a_response_that_botocore_would_not_return(client):
    """The shapes are checked: a node without its required InstanceStatus is refused."""
    stubber = Stubber(client)
    broken = _node("gpu", 1, "Running")
    del broken["InstanceStatus"]
    with pytest.raises(Exception, match="InstanceStatus"):
        stubber.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [broken]})


def test_running_is_a_status_botocore_knows(handler, client):
    """The one status the handler counts is in the service model's ClusterInstanceStatus."""
    shape = client.meta.service_model.shape_for("ClusterInstanceStatus")
    assert handler.RUNNING in shape.enum
    assert "DeepHealthCheckInProgress" in shape.enum  # not yet ready: deep health checks run


# -- fail fast, say why, and what a timeout costs -------------------------------------------------


def test_a_node_in_failure_fails_the_wait_at_once_with_its_reason(handler, client):
    reason = "Lifecycle script on_create.sh exited with code 1"
    _stub_pages(
        client,
        [
            _node("gpu", 1, "Running"),
            _node("gpu", 2, "Failure", reason),
            _node("system", 3, "Running"),
        ],
    )
    # Long before the deadline (10 s of 600): the wait does not run out its budget.
    with pytest.raises(RuntimeError) as caught:
        handler.is_complete(_event(), client=client, now=1010.0)
    message = str(caught.value)
    assert "i-00000000000000002" in message and "'gpu'" in message
    assert reason in message and "Failure" in message


def test_a_failed_instance_group_fails_the_wait_with_the_clusters_message(handler, client):
    failure = "InsufficientCapacity: not enough ml.p5en.48xlarge capacity in use1-az4"
    _stub_pages(
        client,
        [_node("system", 1, "Running")],
        cluster=_cluster("InService", {"gpu": "Failed", "system": "InService"}, failure=failure),
    )
    with pytest.raises(RuntimeError, match="instance group 'gpu' is Failed") as caught:
        handler.is_complete(_event(), client=client, now=1010.0)
    assert failure in str(caught.value)


@pytest.mark.parametrize("status", ["Failed", "RollingBack"])
def test_a_failed_cluster_fails_the_wait(handler, client, status):
    stubber = Stubber(client)
    stubber.add_response("describe_cluster", _cluster(status, failure="quota exceeded"))
    stubber.activate()
    with pytest.raises(RuntimeError, match=f"is {status}: quota exceeded"):
        handler.is_complete(_event(), client=client, now=1010.0)


def test_nodes_of_other_groups_or_recovering_ones_do_not_fail_the_wait(handler, client):
    _stub_pages(
        client,
        [
            _node("gpu", 1, "Running"),
            _node("gpu", 2, "Pending"),
            _node("other", 3, "Failure", "not ours"),
            _node("system", 4, "Running"),
        ],
    )
    assert handler.is_complete(_event(), client=client, now=1010.0) == {"IsComplete": False}


def test_the_timeout_says_what_each_node_does_and_how_to_keep_the_capacity(handler, client):
    _stub_pages(
        client,
        [
            _node("gpu", 1, "Running"),
            _node("gpu", 2, "DeepHealthCheckInProgress"),
            _node("system", 3, "Running"),
        ],
    )
    with pytest.raises(RuntimeError) as caught:
        handler.is_complete(_event(final="true"), client=client, now=1700.0)
    message = str(caught.value)
    assert "'gpu': '1/2'" in message
    assert "DeepHealthCheckInProgress" in message
    assert "--no-rollback" in message and "nodes_ready_timeout" in message


def test_the_statuses_the_handler_acts_on_are_botocores(handler, client):
    model = client.meta.service_model
    assert handler.FAILED_NODE in model.shape_for("ClusterInstanceStatus").enum
    assert set(handler.FAILED_GROUP) <= set(model.shape_for("InstanceGroupStatus").enum)
    assert set(handler.FAILED_CLUSTER) <= set(model.shape_for("ClusterStatus").enum)


def _autoscaled(status: str, message: str | None = None) -> dict:
    cluster = _cluster(groups={"gpu": "InService", "system": "InService"})
    cluster["AutoScaling"] = {"Mode": "Enable", "AutoScalerType": "Karpenter", "Status": status}
    if message:
        cluster["AutoScaling"]["FailureMessage"] = message
    return cluster


def test_with_node_autoscaling_the_wait_holds_until_karpenter_is_in_service(handler, client):
    """The Karpenter objects applied after the wait need HyperPod's Karpenter installed
    (review finding M1): nodes alone do not end the wait while AutoScaling is Creating."""
    running = [
        _node("gpu", 1, "Running"),
        _node("gpu", 3, "Running"),
        _node("system", 2, "Running"),
    ]
    stubber = _stub_pages(client, running, cluster=_autoscaled("Creating"))
    assert handler.is_complete(_event(), client=client, now=1010.0) == {"IsComplete": False}
    stubber.deactivate()
    stubber = _stub_pages(client, running, cluster=_autoscaled("InService"))
    assert handler.is_complete(_event(), client=client, now=1010.0)["IsComplete"] is True
    stubber.deactivate()
    stubber = _stub_pages(client, running, cluster=_autoscaled("Failed", "role cannot be assumed"))
    with pytest.raises(RuntimeError, match="node autoscaling failed: role cannot be assumed"):
        handler.is_complete(_event(), client=client, now=1010.0)

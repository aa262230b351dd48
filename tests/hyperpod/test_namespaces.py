"""One CloudFormation resource declares each Kubernetes namespace; every manifest with objects
in it depends on that resource.

aws-cdk-lib's kubectl handler deletes every object of a manifest when its resource is deleted
(``kubectl delete -f``), and deleting a Namespace deletes everything in it: a namespace two
resources declared went with whichever was removed first (the operator variant declared
``inference`` from the FSx store's volume and from the operator's endpoint).
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tests.support.template_helpers import resources_of_type

KUBECTL = "Custom::AWSCDK-EKS-KubernetesResource"


def _objects(resource: dict) -> list[dict]:
    """The manifest's objects; a token (``Ref``, ``Fn::GetAtt``) inside one of its strings reads
    as ``TOKEN``."""
    manifest = resource["Properties"]["Manifest"]
    if not isinstance(manifest, str):
        manifest = "".join(p if isinstance(p, str) else "TOKEN" for p in manifest["Fn::Join"][1])
    return json.loads(manifest)


def _depends_on(template: dict, logical_id: str) -> set[str]:
    seen: set[str] = set()
    todo = [logical_id]
    while todo:
        current = todo.pop()
        for dependency in template["Resources"][current].get("DependsOn", []):
            if dependency not in seen:
                seen.add(dependency)
                todo.append(dependency)
    return seen


@pytest.mark.parametrize("which", ["hyperpod", "inference_operator_template"])
def test_each_namespace_has_one_owner_and_its_objects_depend_on_it(which, request):
    template = request.getfixturevalue(which)
    owners: dict[str, list[str]] = defaultdict(list)
    users: dict[str, set[str]] = defaultdict(set)
    for logical_id, resource in resources_of_type(template, KUBECTL).items():
        for obj in _objects(resource):
            if obj.get("kind") == "Namespace":
                owners[obj["metadata"]["name"]].append(logical_id)
            elif namespace := obj.get("metadata", {}).get("namespace"):
                users[namespace].add(logical_id)
    assert owners, "no namespace declared at all"
    assert {name: ids for name, ids in owners.items() if len(ids) > 1} == {}
    for namespace, ids in users.items():
        if namespace not in owners:
            continue  # a chart's or an add-on's namespace
        (owner,) = owners[namespace]
        missing = sorted(i for i in ids if i != owner and owner not in _depends_on(template, i))
        assert missing == [], f"{missing} put objects in {namespace} before {owner} declares it"

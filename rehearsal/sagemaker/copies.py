"""The copies of a synthesized pool endpoint: one per instance pool, each the
``AWS::SageMaker::Model`` that pool runs, with its container's environment.

A production variant with ``InstancePools`` runs, on each pool, the variant's ``ModelName``
unless the pool names another model in ``ModelNameOverride``
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_InstancePool.html). A model whose
``ModelDataSource.S3DataSource`` is an uncompressed ``S3Prefix`` has that prefix downloaded to
``/opt/ml/model`` in the container
(https://docs.aws.amazon.com/sagemaker/latest/dg/large-model-inference-uncompressed.html), so an
object a ``Custom::AWS`` ``putObject`` writes under the prefix at deploy time appears there too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Where SageMaker puts the model's S3 prefix in the container.
MODEL_DIR = "/opt/ml/model"


@dataclass(frozen=True)
class Copy:
    """One pool's copy of the model, as the container receives it."""

    #: The ``AWS::SageMaker::Model``'s logical id.
    model_id: str
    #: The pool's instance type and priority (1: tried first).
    instance_type: str
    priority: int
    endpoint_name: str
    variant_name: str
    #: The container's ``Environment``, as synthesized.
    environment: Mapping[str, str]
    #: The model's ``S3DataSource.S3Uri`` (``s3://bucket/prefix/``).
    s3_uri: str
    #: Files written under the model's S3 prefix at deploy time: path relative to the prefix ->
    #: body (a ``Custom::AWS`` ``putObject`` into the same bucket and prefix).
    deploy_files: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``<endpoint>/<variant>/<instance type>`` (one copy per pool)."""
        return f"{self.endpoint_name}/{self.variant_name}/{self.instance_type}"


def _ref_id(value: Any) -> str | None:
    """The logical id of ``{"Fn::GetAtt": [id, ...]}`` / ``{"Ref": id}``."""
    if isinstance(value, Mapping):
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
        if "Ref" in value:
            return str(value["Ref"])
    return None


def _put_objects(resources: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(bucket, key, body) of every ``Custom::AWS`` S3 ``putObject`` on create."""
    found = []
    for resource in resources.values():
        if resource.get("Type") != "Custom::AWS":
            continue
        create = resource.get("Properties", {}).get("Create")
        if not isinstance(create, str):
            continue
        call = json.loads(create)
        if call.get("service") != "S3" or call.get("action") != "putObject":
            continue
        params = call.get("parameters", {})
        if all(isinstance(params.get(k), str) for k in ("Bucket", "Key", "Body")):
            found.append((params["Bucket"], params["Key"], params["Body"]))
    return found


def _deploy_files(s3_uri: str, puts: list[tuple[str, str, str]]) -> dict[str, str]:
    bucket, _, prefix = s3_uri.removeprefix("s3://").partition("/")
    files = {}
    for put_bucket, key, body in puts:
        if put_bucket == bucket and key.startswith(prefix):
            files[key[len(prefix) :].lstrip("/")] = body
    return files


def copies_of(template: Mapping[str, Any]) -> list[Copy]:
    """Every pool's copy of every pool endpoint in ``template`` (endpoint, variant, priority
    order). A variant without ``InstancePools`` is one copy on its ``InstanceType``."""
    resources: Mapping[str, Any] = template.get("Resources", {})
    puts = _put_objects(resources)
    endpoints = {
        _ref_id(r["Properties"].get("EndpointConfigName")): r["Properties"]
        for r in resources.values()
        if r.get("Type") == "AWS::SageMaker::Endpoint"
    }
    found: list[Copy] = []
    for config_id, config in sorted(resources.items()):
        if config.get("Type") != "AWS::SageMaker::EndpointConfig":
            continue
        endpoint = endpoints.get(config_id, {})
        endpoint_name = endpoint.get("EndpointName")
        if not isinstance(endpoint_name, str):
            endpoint_name = config_id  # a generated name: the rehearsal names it by its config
        for variant in config["Properties"].get("ProductionVariants", []):
            default_model = _ref_id(variant.get("ModelName"))
            pools = variant.get("InstancePools") or [
                {"InstanceType": variant.get("InstanceType", "?"), "Priority": 1}
            ]
            for pool in sorted(pools, key=lambda p: int(p.get("Priority", 1))):
                model_id = _ref_id(pool.get("ModelNameOverride")) or default_model
                if model_id is None or model_id not in resources:
                    continue
                container = resources[model_id]["Properties"].get("PrimaryContainer", {})
                s3 = container.get("ModelDataSource", {}).get("S3DataSource", {})
                s3_uri = s3.get("S3Uri", "") if isinstance(s3.get("S3Uri"), str) else ""
                found.append(
                    Copy(
                        model_id=model_id,
                        instance_type=str(pool["InstanceType"]),
                        priority=int(pool.get("Priority", 1)),
                        endpoint_name=endpoint_name,
                        variant_name=str(variant.get("VariantName", "AllTraffic")),
                        environment={
                            str(k): str(v) for k, v in (container.get("Environment") or {}).items()
                        },
                        s3_uri=s3_uri,
                        deploy_files=_deploy_files(s3_uri, puts) if s3_uri else {},
                    )
                )
    return found


def load_template(assembly: Path, stack: str) -> dict[str, Any]:
    """``<assembly>/<stack>.template.json``."""
    data: dict[str, Any] = json.loads((assembly / f"{stack}.template.json").read_text())
    return data

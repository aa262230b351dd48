"""A cloud assembly read as CloudFormation would deploy it: its resources in dependency order, and
their properties with the intrinsic functions resolved to deterministic stand-in values.

Order (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-dependson.html):
a resource is created after every resource it names in ``DependsOn`` and every resource its
properties reference with ``Ref``, ``Fn::GetAtt`` or ``Fn::Sub`` (implicit dependencies);
CloudFormation creates independent resources in parallel, so the rehearsal picks one valid
order: among the resources whose dependencies are all created, the first by logical id.

Stand-ins: ``Ref`` and ``Fn::GetAtt`` resolve to values shaped as AWS returns them (``subnet-``
ids, ARNs) derived from the logical id, so two runs agree. The attributes of resources the
rehearsal plays (``Custom::AWSCDK-EKS-KubernetesObjectValue``'s ``Value``) are set as it plays
them. Availability zones: ``Fn::GetAZs`` answers ``<region>a`` .. ``<region>d`` and zone
``<region>{a,b,c,d}`` has ID ``<short>-az{1,2,3,4}``. ASSUMED: one fixed name-to-ID mapping (it
differs per account, https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html;
the load balancer rule compares zones only where every account agrees).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rehearsal.variants import STACK

ACCOUNT = "123456789012"
#: The value of ``Ref: AWS::NoValue``: the property is removed.
NO_VALUE = object()
_REGION_SHORT = {
    "us-east-1": "use1",
    "us-east-2": "use2",
    "us-west-1": "usw1",
    "us-west-2": "usw2",
    "eu-west-1": "euw1",
    "eu-central-1": "euc1",
    "ap-northeast-1": "apne1",
}


def _hex(seed: str, length: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:length]


def az_id(az_name: str) -> str:
    """The stand-in AZ ID of a zone name (``us-west-2b`` -> ``usw2-az2``)."""
    region, letter = az_name[:-1], az_name[-1]
    return f"{_REGION_SHORT.get(region, region.replace('-', ''))}-az{ord(letter) - ord('a') + 1}"


def az_name(zone_id: str, region: str) -> str:
    """The zone name of a stand-in AZ ID (``usw2-az2`` -> ``us-west-2b``)."""
    number = int(zone_id.rpartition("-az")[2])
    return f"{region}{chr(ord('a') + number - 1)}"


@dataclass(frozen=True)
class Resource:
    logical_id: str
    type: str
    properties: Mapping[str, Any]
    depends_on: tuple[str, ...] = ()
    condition: str | None = None
    path: str = ""
    deletion_policy: str | None = None


def references(value: Any) -> Iterator[str]:
    """The logical ids (and parameters, pseudo parameters) a property value refers to."""
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str):
            yield value["Ref"]
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            yield (target[0] if isinstance(target, list) else str(target).split(".")[0])
        if "Fn::Sub" in value:
            sub = value["Fn::Sub"]
            text, variables = (sub, {}) if isinstance(sub, str) else (sub[0], sub[1])
            for name in re.findall(r"\$\{([^}!]+)\}", text):
                if name.split(".")[0] not in variables:
                    yield name.split(".")[0]
            yield from references(variables)
        for item in value.values():
            yield from references(item)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)


class Assembly:
    """One stack of a synthesized cloud assembly (``cdk synth -o DIR``)."""

    def __init__(self, directory: Path, stack: str = STACK) -> None:
        self.directory = Path(directory)
        self.manifest = json.loads((self.directory / "manifest.json").read_text())
        artifact = self.manifest["artifacts"][stack]
        self.stack = stack
        self.region = artifact["environment"].rpartition("/")[2]
        template_file = artifact["properties"]["templateFile"]
        self.template: dict[str, Any] = json.loads((self.directory / template_file).read_text())
        self.resources: dict[str, Resource] = {}
        for logical_id, raw in self.template["Resources"].items():
            depends = raw.get("DependsOn") or []
            self.resources[logical_id] = Resource(
                logical_id=logical_id,
                type=raw["Type"],
                properties=raw.get("Properties") or {},
                depends_on=tuple([depends] if isinstance(depends, str) else depends),
                condition=raw.get("Condition"),
                path=(raw.get("Metadata") or {}).get("aws:cdk:path", ""),
                deletion_policy=raw.get("DeletionPolicy"),
            )

    def asset(self, asset_hash: str) -> Path:
        """A staged asset's directory (``asset.<hash>``) or archive (``asset.<hash>.zip``)."""
        for candidate in (f"asset.{asset_hash}", f"asset.{asset_hash}.zip"):
            if (self.directory / candidate).exists():
                return self.directory / candidate
        raise FileNotFoundError(f"asset {asset_hash} is not staged in {self.directory}")

    def dependencies(self, logical_id: str) -> set[str]:
        """What CloudFormation creates before ``logical_id``: DependsOn and references."""
        resource = self.resources[logical_id]
        found = set(resource.depends_on) | set(references(dict(resource.properties)))
        return {name for name in found if name in self.resources and name != logical_id}

    def order(self) -> list[str]:
        """A creation order CloudFormation could follow (ties: the first logical id)."""
        remaining = {lid: self.dependencies(lid) for lid in self.resources}
        done: list[str] = []
        created: set[str] = set()
        while remaining:
            ready = sorted(lid for lid, deps in remaining.items() if deps <= created)
            if not ready:
                raise ValueError(f"dependency cycle among {sorted(remaining)}")
            lid = ready[0]
            done.append(lid)
            created.add(lid)
            del remaining[lid]
        return done

    def of_type(self, resource_type: str) -> list[Resource]:
        return [r for r in self.resources.values() if r.type == resource_type]


@dataclass
class Resolver:
    """Resolves intrinsic functions against an assembly, with stand-ins for what AWS returns.

    ``attributes[(logical_id, name)]`` overrides a ``Fn::GetAtt`` (set by the rehearsal as it
    plays resources whose attributes come from the cluster).
    """

    assembly: Assembly
    attributes: dict[tuple[str, str], Any] = field(default_factory=dict)

    # -- pseudo parameters and stand-ins ------------------------------------------------------

    def pseudo(self, name: str) -> Any:
        region = self.assembly.region
        values = {
            "AWS::Region": region,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.assembly.stack,
            "AWS::StackId": f"arn:aws:cloudformation:{region}:{ACCOUNT}:stack/"
            f"{self.assembly.stack}/{_hex(self.assembly.stack, 8)}",
            "AWS::NoValue": NO_VALUE,
            "AWS::NotificationARNs": [],
        }
        if name not in values:
            raise KeyError(f"unknown pseudo parameter {name}")
        return values[name]

    def ref(self, name: str) -> Any:
        if name.startswith("AWS::"):
            return self.pseudo(name)
        parameters = self.assembly.template.get("Parameters") or {}
        if name in parameters:
            default = parameters[name].get("Default", f"{name}-value")
            return default
        resource = self.assembly.resources[name]
        props = resource.properties
        h = _hex(name, 17)
        prefixes = {
            "AWS::EC2::Subnet": "subnet-",
            "AWS::EC2::VPC": "vpc-",
            "AWS::EC2::SecurityGroup": "sg-",
            "AWS::EC2::RouteTable": "rtb-",
            "AWS::EC2::InternetGateway": "igw-",
            "AWS::EC2::NatGateway": "nat-",
            "AWS::EC2::VPCEndpoint": "vpce-",
            "AWS::FSx::FileSystem": "fs-",
            "AWS::FSx::DataRepositoryAssociation": "dra-",
            "AWS::KMS::Key": "",
        }
        if resource.type in prefixes:
            return prefixes[resource.type] + h
        named = {
            "AWS::EKS::Cluster": "Name",
            "AWS::S3::Bucket": "BucketName",
            "AWS::IAM::Role": "RoleName",
            "AWS::Lambda::Function": "FunctionName",
            "AWS::Logs::LogGroup": "LogGroupName",
            "AWS::SageMaker::Cluster": "ClusterName",
            "AWS::SSM::Parameter": "Name",
        }
        if resource.type in named:
            given = props.get(named[resource.type])
            if given is not None:
                return self.resolve(given)
            stem = name[:24]
            return (stem.lower() if resource.type == "AWS::S3::Bucket" else stem) + "-" + h[:12]
        if resource.type in (
            "AWS::SecretsManager::Secret",
            "AWS::SNS::Topic",
            "AWS::IAM::ManagedPolicy",
        ):
            return self.arn(name)
        return f"{name}-{h[:12]}"

    def arn(self, logical_id: str) -> str:
        resource = self.assembly.resources[logical_id]
        service = resource.type.split("::")[1].lower()
        region = "" if service == "iam" else self.assembly.region
        kind = resource.type.split("::")[2].lower()
        suffix = {
            "secretsmanager": f"secret:{logical_id}-{_hex(logical_id, 6)}",
            "sns": f"{logical_id}-{_hex(logical_id, 8)}",
            "lambda": f"function:{logical_id}-{_hex(logical_id, 8)}",
            "eks": f"cluster/{self.ref(logical_id)}"
            if kind == "cluster"
            else f"{kind}/{logical_id}",
            "sagemaker": f"cluster/{_hex(logical_id, 12)}",
        }.get(service, f"{kind}/{logical_id}-{_hex(logical_id, 8)}")
        return f"arn:aws:{service}:{region}:{ACCOUNT}:{suffix}"

    def get_att(self, logical_id: str, name: str) -> Any:
        if (logical_id, name) in self.attributes:
            return self.attributes[(logical_id, name)]
        resource = self.assembly.resources[logical_id]
        props = resource.properties
        if name in ("Arn", "ClusterArn", "TopicArn", "SecretArn") or name.endswith("Arn"):
            return self.arn(logical_id)
        if resource.type == "AWS::EC2::VPC" and name == "CidrBlock":
            return self.resolve(props["CidrBlock"])
        if resource.type == "AWS::EC2::Subnet" and name == "AvailabilityZone":
            return self.subnet_az(logical_id)[0]
        if resource.type == "AWS::EC2::Subnet" and name == "AvailabilityZoneId":
            return self.subnet_az(logical_id)[1]
        if resource.type == "AWS::EC2::SecurityGroup" and name == "GroupId":
            return self.ref(logical_id)
        if name in ("GroupId", "Id", "Name"):
            return self.ref(logical_id)
        if resource.type == "AWS::FSx::FileSystem" and name == "LustreMountName":
            return _hex(logical_id, 8)
        if resource.type == "AWS::FSx::FileSystem" and name == "DNSName":
            return f"{self.ref(logical_id)}.fsx.{self.assembly.region}.amazonaws.com"
        if resource.type == "AWS::EKS::Cluster" and name == "Endpoint":
            return f"https://{_hex(logical_id, 32).upper()}.gr7.{self.assembly.region}.eks.amazonaws.com"
        return f"{logical_id}.{name}"

    def subnet_az(self, logical_id: str) -> tuple[str, str]:
        """A subnet's zone name and ID."""
        props = self.assembly.resources[logical_id].properties
        if "AvailabilityZoneId" in props:
            zone_id = str(self.resolve(props["AvailabilityZoneId"]))
            return az_name(zone_id, self.assembly.region), zone_id
        name = str(self.resolve(props["AvailabilityZone"]))
        return name, az_id(name)

    # -- conditions --------------------------------------------------------------------------

    def condition(self, name: str) -> bool:
        return bool(self.resolve((self.assembly.template.get("Conditions") or {})[name]))

    # -- resolve -----------------------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        """``value`` with every intrinsic function evaluated; ``AWS::NoValue`` entries dropped."""
        if isinstance(value, list):
            items = [self.resolve(v) for v in value]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                lid, name = arg if isinstance(arg, list) else str(arg).split(".", 1)
                return self.get_att(lid, self.resolve(name))
            if key == "Fn::Join":
                sep, parts = arg
                return str(self.resolve(sep)).join(str(p) for p in self.resolve(parts))
            if key == "Fn::Sub":
                return self._sub(arg)
            if key == "Fn::Select":
                index, items = self.resolve(arg[0]), self.resolve(arg[1])
                return items[int(index)]
            if key == "Fn::Split":
                sep, text = arg
                return str(self.resolve(text)).split(self.resolve(sep))
            if key == "Fn::GetAZs":
                return [f"{self.assembly.region}{c}" for c in "abcd"]
            if key == "Fn::If":
                name, yes, no = arg
                return self.resolve(yes if self.condition(name) else no)
            if key == "Fn::Equals":
                a, b = self.resolve(arg[0]), self.resolve(arg[1])
                return a == b
            if key == "Fn::Not":
                return not self.resolve(arg[0])
            if key == "Fn::And":
                return all(self.resolve(a) for a in arg)
            if key == "Fn::Or":
                return any(self.resolve(a) for a in arg)
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::Base64":
                import base64

                return base64.b64encode(str(self.resolve(arg)).encode()).decode()
            if key == "Fn::ImportValue":
                return f"import-{self.resolve(arg)}"
        resolved = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}

    def _sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        values = {k: self.resolve(v) for k, v in variables.items()}

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in values:
                return str(values[name])
            if "." in name and not name.startswith("AWS::"):
                lid, attribute = name.split(".", 1)
                return str(self.get_att(lid, attribute))
            return str(self.ref(name))

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def properties(self, logical_id: str) -> dict[str, Any]:
        """A resource's properties, resolved."""
        return dict(self.resolve(dict(self.assembly.resources[logical_id].properties)))

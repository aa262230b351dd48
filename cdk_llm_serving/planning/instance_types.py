"""``InstanceType``: an instance type name checked once, carrying what the library knows of it.

Where SageMaker takes it comes from botocore's service model (``_cdk.service_limits``); what it
carries from the planner's default catalog. It is a ``str``, so a template is the same whichever
a user passes (docs/design/planner.md, "Instance types").
"""

from __future__ import annotations

import functools
import re
from typing import ClassVar, Final

from .._cdk.service_limits import hyperpod_instance_types, production_variant_instance_types
from ..errors import CheckedName, Problems, check_choice
from .catalog import InstanceSpec, default_catalog

__all__ = ["InstanceType"]

#: Families with NVIDIA GPUs: P, G and Gr6 (aws.amazon.com/ec2/instance-types/).
_NVIDIA_FAMILY: Final = re.compile(r"^ml\.(?:p\d|g\d|gr6)")


@functools.cache
def _known() -> tuple[frozenset[str], frozenset[str], tuple[str, ...]]:
    """(hosting types, HyperPod types, every known name sorted)."""
    hosting = frozenset(production_variant_instance_types())
    hyperpod = frozenset(hyperpod_instance_types())
    catalog = {spec.instance_type for spec in default_catalog()}
    return hosting, hyperpod, tuple(sorted(hosting | hyperpod | catalog))


class InstanceType(CheckedName):
    """A SageMaker instance type (``ml.p5.48xlarge``), validated when it is made.

    ``InstanceType("ml.p5.48xlarge")``, ``InstanceType.of(value)`` or a constant
    (``InstanceType.ML_P5_48XLARGE``); every construct and the planner also take the plain
    string and convert it. An unknown name raises ``ConfigurationError`` naming the closest
    known types; ``parse`` adds that problem to a construct's ``Problems`` instead.
    """

    ML_G5_XLARGE: ClassVar[InstanceType]
    ML_G5_2XLARGE: ClassVar[InstanceType]
    ML_G5_12XLARGE: ClassVar[InstanceType]
    ML_G5_48XLARGE: ClassVar[InstanceType]
    ML_G6_XLARGE: ClassVar[InstanceType]
    ML_G6_12XLARGE: ClassVar[InstanceType]
    ML_G6_48XLARGE: ClassVar[InstanceType]
    ML_G6E_XLARGE: ClassVar[InstanceType]
    ML_G6E_2XLARGE: ClassVar[InstanceType]
    ML_G6E_12XLARGE: ClassVar[InstanceType]
    ML_G6E_48XLARGE: ClassVar[InstanceType]
    ML_P4D_24XLARGE: ClassVar[InstanceType]
    ML_P4DE_24XLARGE: ClassVar[InstanceType]
    ML_P5_4XLARGE: ClassVar[InstanceType]
    ML_P5_48XLARGE: ClassVar[InstanceType]
    ML_P5E_48XLARGE: ClassVar[InstanceType]
    ML_P5EN_48XLARGE: ClassVar[InstanceType]
    ML_P6_B200_48XLARGE: ClassVar[InstanceType]
    ML_P6_B300_48XLARGE: ClassVar[InstanceType]
    ML_P6E_GB200_36XLARGE: ClassVar[InstanceType]

    _PROP: ClassVar[str] = "instance_type"

    @classmethod
    def _check(cls, problems: Problems, prop: str, value: object) -> bool:
        return _check_known(problems, prop, value)

    @property
    def family(self) -> str:
        """``p5`` of ``ml.p5.48xlarge``."""
        return self.split(".")[1]

    @property
    def sagemaker_hosting(self) -> bool:
        """Whether an endpoint variant (an instance pool) takes this type (botocore's enum)."""
        return self in _known()[0]

    @property
    def hyperpod(self) -> bool:
        """Whether a HyperPod cluster instance group takes this type (botocore's enum)."""
        return self in _known()[1]

    @property
    def spec(self) -> InstanceSpec | None:
        """What the planner's default catalog records of the type; ``None`` if it has none."""
        catalog = default_catalog()
        return catalog.get(self) if self in catalog else None

    @property
    def gpus(self) -> int:
        """GPUs per instance (0 when the catalog does not record the type)."""
        spec = self.spec
        return spec.gpus if spec is not None else 0

    @property
    def efa(self) -> bool:
        """Whether the catalog records EFA devices on the type."""
        spec = self.spec
        return bool(spec is not None and spec.efa_devices)

    @property
    def nvidia_gpu(self) -> bool:
        """Whether the type carries NVIDIA GPUs (so it runs CUDA images)."""
        return bool(_NVIDIA_FAMILY.match(self))

    def check_hosting(self, problems: Problems, prop: str) -> bool:
        """Adds a problem unless an endpoint variant takes the type; returns whether it does."""
        what = "SageMaker production-variant instance types"
        return check_choice(problems, prop, self.name, sorted(_known()[0]), what)

    def check_hyperpod(self, problems: Problems, prop: str) -> bool:
        """Adds a problem unless a HyperPod instance group takes the type; returns whether it does."""
        what = "HyperPod cluster instance types"
        return check_choice(problems, prop, self.name, sorted(_known()[1]), what)


def _check_known(problems: Problems, prop: str, value: object) -> bool:
    if isinstance(value, str) and value in _known()[2]:
        return True
    if not isinstance(value, str):
        problems.add(
            prop, value, f"must be an instance type name (a str), not {type(value).__name__}"
        )
        return False
    return check_choice(problems, prop, value, _known()[2], "SageMaker instance types")


def _constant_name(name: str) -> str:
    return name.upper().replace(".", "_").replace("-", "_")


# Constants for the catalog's types (made without the botocore read: the catalog knows them).
for _spec in default_catalog():
    _attribute = _constant_name(_spec.instance_type)
    if _attribute in InstanceType.__annotations__:
        setattr(InstanceType, _attribute, InstanceType._known(_spec.instance_type))

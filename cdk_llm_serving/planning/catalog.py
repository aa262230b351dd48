"""The instance catalog: what each GPU instance type carries and costs (data in ``data/``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from ..errors import ConfigurationError, Problems, check_choice

GIB = 1024**3


class UnknownInstanceTypeError(ConfigurationError):
    """An instance type the catalog has no spec for (``Catalog.get``)."""


def load_data(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        resources.files(__package__).joinpath("data", name).read_text()
    )
    return data


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_gib: float
    bandwidth_tbps: float
    compute_capability: str
    native_formats: tuple[str, ...]
    dense_tflops: tuple[tuple[str, float], ...] = ()
    link_gb_per_s: float = 0.0
    #: Share of ``dense_tflops`` the routed experts' grouped GEMM reaches, by precision
    #: (``data/gpus.json``, ``grouped_gemm_source``); ``None`` = not measured.
    grouped_gemm_efficiency: tuple[tuple[str, float], ...] = ()

    def grouped_gemm_share(self, precision: str) -> float | None:
        """Measured share of dense peak for MoE expert GEMMs at ``precision``; ``None`` if absent."""
        return dict(self.grouped_gemm_efficiency).get(precision)

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * GIB

    @property
    def large_batch_defaults(self) -> bool:
        """Whether vLLM's OpenAI server takes its larger batch defaults here: at least 70 GiB,
        not an A100 (``EngineArgs.get_batch_defaults`` in vllm/engine/arg_utils.py)."""
        return self.memory_gib >= 70 and "a100" not in self.name.lower()

    def peak_flops(self, precision: str) -> float:
        """Dense tensor-core FLOP/s at ``precision`` (``bf16``, ``fp8``, ``fp4``); BF16 if absent."""
        table = dict(self.dense_tflops)
        return table.get(precision, table.get("bf16", 0.0)) * 1e12


@dataclass(frozen=True)
class InstanceSpec:
    """One instance type: its GPUs, host, network and on-demand price."""

    instance_type: str
    gpu: Gpu
    gpus: int
    host_memory_gib: float
    architecture: str
    network_gbps: float
    efa_devices: int | None
    price_per_hour: float
    price_estimated: bool = False
    #: vCPUs (``data/instance_vcpus.json``); ``None`` when not recorded.
    vcpus: int | None = None

    @property
    def gpu_memory_bytes(self) -> float:
        return self.gpu.memory_bytes * self.gpus

    @property
    def family(self) -> str:
        return self.instance_type.split(".")[1]


class Catalog:
    """Instance types by name; ``with_prices`` / ``with_instances`` return adjusted copies."""

    def __init__(
        self, instances: Mapping[str, InstanceSpec], price_region: str, price_source: str
    ) -> None:
        self._instances = dict(instances)
        self.price_region = price_region
        self.price_source = price_source

    def __contains__(self, instance_type: object) -> bool:
        return instance_type in self._instances

    def __iter__(self) -> Iterator[InstanceSpec]:
        return iter(self._instances.values())

    def __len__(self) -> int:
        return len(self._instances)

    def get(self, instance_type: str) -> InstanceSpec:
        """The spec of ``instance_type``; ``UnknownInstanceTypeError`` (a ``ConfigurationError``
        naming the closest types the catalog has) when it has none."""
        spec = self._instances.get(instance_type)
        if spec is not None:
            return spec
        problems = Problems("instance catalog")
        check_choice(
            problems, "instance_type", instance_type, sorted(self._instances), "catalog types"
        )
        raise UnknownInstanceTypeError(problems.subject, list(problems.problems()))

    def with_prices(
        self,
        prices: Mapping[str, float],
        source: str = "user-supplied",
        *,
        region: str | None = None,
    ) -> Catalog:
        """Your own prices (another region, a discount); unknown types are an error.

        ``region`` names the region the prices are for (default: unchanged). The result is
        an ordinary ``Catalog``: pass it to ``plan``, ``estimate_cost`` and the constructs.
        """
        updated = dict(self._instances)
        for instance_type, price in prices.items():
            updated[instance_type] = replace(
                self.get(instance_type), price_per_hour=price, price_estimated=False
            )
        return Catalog(
            updated, region or self.price_region, f"{self.price_source}; overridden: {source}"
        )

    def for_region(self, region: str) -> Catalog:
        """This catalog if its prices are ``region``'s; otherwise an error naming the ways to get them.

        No network at plan time: prices of another region come from a price file
        (``with_price_file``), e.g. one written by ``fleet --live-prices --save-prices``.
        """
        if region == self.price_region:
            return self
        problems = Problems("instance catalog")
        problems.add(
            "region",
            region,
            f"no recorded prices for region {region!r} (the catalog's prices are {self.price_region}'s); "
            "give a price file (--prices FILE, e.g. written by `fleet --live-prices --region "
            f"{region} --save-prices FILE`)",
        )
        problems.raise_if_any()
        return self

    def with_price_file(self, path: str) -> Catalog:
        """Prices from a JSON file ``{"region": ..., "source": ..., "prices": {type: $/h}}``;
        ``ConfigurationError`` when the file cannot be read or has another shape."""
        problems = Problems(f"price file {path}")
        try:
            with open(path) as handle:
                data = json.load(handle)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            problems.add("file", path, f"not a readable JSON price file ({error})")
            problems.raise_if_any()
        prices = data.get("prices") if isinstance(data, dict) else None
        if isinstance(prices, dict) and all(isinstance(v, int | float) for v in prices.values()):
            source = str(data.get("source") or f"price file {path}")
            return self.with_prices(prices, source, region=data.get("region"))
        problems.add(
            "prices",
            prices,
            f"price file {path} must hold {{'region': ..., 'prices': {{instance type: dollars per hour}}}}",
        )
        problems.raise_if_any()
        raise AssertionError("unreachable")

    def with_instances(self, extra: Iterable[InstanceSpec]) -> Catalog:
        """Add (or replace) instance types, e.g. a new family the data file lacks."""
        updated = dict(self._instances)
        updated.update({spec.instance_type: spec for spec in extra})
        return Catalog(updated, self.price_region, self.price_source)


@functools.cache
def gpus() -> dict[str, Gpu]:
    return {
        name: Gpu(
            name=name,
            memory_gib=g["memory_gib"],
            bandwidth_tbps=g["bandwidth_tbps"],
            compute_capability=g["compute_capability"],
            native_formats=tuple(g["native_formats"]),
            dense_tflops=tuple(sorted(g.get("dense_tflops", {}).items())),
            link_gb_per_s=float(g.get("link_gb_per_s", 0.0)),
            grouped_gemm_efficiency=tuple(sorted(g.get("grouped_gemm_efficiency", {}).items())),
        )
        for name, g in load_data("gpus.json")["gpus"].items()
    }


@functools.cache
def default_catalog() -> Catalog:
    data = load_data("instances.json")
    vcpus = load_data("instance_vcpus.json")["vcpus"]
    known_gpus = gpus()
    instances = {
        name: InstanceSpec(
            instance_type=name,
            gpu=known_gpus[entry["gpu"]],
            gpus=entry["gpus"],
            host_memory_gib=entry["host_memory_gib"],
            architecture=entry["architecture"],
            network_gbps=entry["network_gbps"],
            efa_devices=entry["efa_devices"],
            price_per_hour=entry["price_per_hour"],
            price_estimated=entry.get("price_estimated", False),
            vcpus=vcpus.get(name),
        )
        for name, entry in data["instances"].items()
    }
    # The long provenance stays in the data file; reports carry this short form.
    return Catalog(
        instances,
        data["price_region"],
        f"{data['price_region']} on-demand list prices as of {data['price_date']}",
    )

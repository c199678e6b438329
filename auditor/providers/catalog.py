"""The bundled GPU catalog: GPU models, the instance types that carry them, and on-demand prices."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from importlib import resources

import yaml


@dataclass(frozen=True)
class GpuModel:
    name: str
    memory_gb: float
    tflops: float
    vendor: str = "NVIDIA"
    kind: str = "gpu"  # gpu, or accelerator (Trainium, Inferentia: no MIG, no DCGM, not GPU spend)


@dataclass(frozen=True)
class InstanceType:
    provider: str
    name: str
    gpu_model: str
    gpu_count: int  # GPUs the instance shows (a fractional type's one logical GPU)
    price_per_hour: Decimal | None  # on-demand, in the provider's price region, USD; None: unpriced
    gpu_share: Decimal = Decimal(1)  # of a physical GPU per GPU shown: 0.125 on a g6f.xlarge (GpuPartitionSize)
    source: str | None = None  # where the price comes from, where not the provider's price_source
    unpriced: str | None = None  # why there is no price (sold only as capacity blocks, no public price found)

    @property
    def gpus(self) -> Decimal:
        """Physical GPUs' worth: what GPU-hours count (an eighth of an L4 on a g6f.xlarge)."""
        return self.gpu_count * self.gpu_share


@dataclass(frozen=True)
class PriceInfo:
    region: str
    as_of: str
    source: str
    typical_spot_discount: Decimal


GPU_COUNT = "DECIMAL(10,6)"  # GPUs per unit in the tables: fractional GPUs are a share of one


def family_of(provider: str, instance_type: str) -> str:
    """The key the catalog's gpu_families uses: `p4d` for AWS (SageMaker's `ml.` prefix dropped), `a2-highgpu`
    for GCP, the size for Azure. `family_sql` is the same rule in SQL."""
    if provider == "aws":
        return instance_type.removeprefix("ml.").split(".", 1)[0]
    if provider == "gcp":
        return instance_type.rsplit("-", 1)[0]
    return instance_type


def family_sql(provider: str, instance_type: str) -> str:
    """`family_of` as SQL over two expressions (DuckDB and Spark alike)."""
    return (f"CASE {provider} WHEN 'aws' THEN split_part(regexp_replace({instance_type}, '^ml\\.', ''), '.', 1) "
            f"WHEN 'gcp' THEN regexp_replace({instance_type}, '-[^-]+$', '') ELSE {instance_type} END")


class Catalog:
    def __init__(self, data: dict):
        self.version = data.get("version", 1)
        self.gpus = {name: GpuModel(name, float(g["memory_gb"]), float(g["tflops"]), g.get("vendor", "NVIDIA"),
                                    g.get("kind", "gpu"))
                     for name, g in data["gpus"].items()}
        # Accelerators that are not GPUs (AWS Trainium, Inferentia): known, never counted as GPU spend
        self.accelerators: dict[str, dict[str, str]] = {}
        self.prices: dict[str, PriceInfo] = {}
        self.families: dict[str, dict[str, str]] = {}
        self.types: dict[tuple[str, str], InstanceType] = {}
        for provider, p in data["providers"].items():
            self.prices[provider] = PriceInfo(p["price_region"], str(p["prices_as_of"]), p["price_source"],
                                              Decimal(str(p["typical_spot_discount"])))
            self.families[provider] = {k.lower(): v for k, v in p["gpu_families"].items()}
            self.accelerators[provider] = {k.lower(): v for k, v in (p.get("accelerator_families") or {}).items()}
            for name, (count, price, *more) in p["instance_types"].items():
                extra = more[0] if more else {}
                # A price or the reason there is none, never both nor neither: an unpriced type is never $0.
                if (price is None) == (not extra.get("unpriced")):
                    raise ValueError(f"catalog: {provider} {name}: give an on-demand price or `unpriced` with "
                                     "the reason there is none, not both")
                model = self.families[provider][family_of(provider, name).lower()]
                self.types[(provider, name.lower())] = InstanceType(
                    provider, name, model, int(count), Decimal(str(price)) if price is not None else None,
                    Decimal(str(extra.get("gpu_share", 1))), extra.get("source"), extra.get("unpriced"))
        self.aws_regions: dict[str, dict] = data.get("aws_regions", {})

    def instance(self, provider: str | None, instance_type: str | None) -> InstanceType | None:
        if not provider or not instance_type:
            return None
        return self.types.get((provider, instance_type.removeprefix("ml.").lower()))

    def gpu_model_for(self, provider: str | None, instance_type: str | None) -> str | None:
        if not provider or not instance_type:
            return None
        return self.families.get(provider, {}).get(family_of(provider, instance_type).lower())

    def gpu(self, model: str | None) -> GpuModel | None:
        return self.gpus.get(model) if model else None

    def accelerator_for(self, provider: str | None, instance_type: str | None) -> str | None:
        """The accelerator (not a GPU) an instance type carries: `Trainium` on a trn1.32xlarge."""
        if not provider or not instance_type:
            return None
        return self.accelerators.get(provider, {}).get(family_of(provider, instance_type).lower())

    def price_source(self, t: InstanceType) -> str:
        """Where a type's price comes from: its own source, else its provider's price page."""
        return t.source or self.prices[t.provider].source

    def instance_types(self, provider: str) -> list[InstanceType]:
        """The provider's GPU instance types with an on-demand price (what a saving can be priced against)."""
        return [t for (p, _), t in self.types.items() if p == provider and t.price_per_hour is not None]

    def register(self, con) -> None:
        """Load the catalog into DuckDB tables the billing readers join against (one statement each: a
        store is made per audit and per test, and row-by-row inserts made that slow)."""
        families = [(p, fam, model) for p, fams in self.families.items() for fam, model in fams.items()]
        types = [(t.provider, t.name.lower(), t.gpu_model, t.gpus) for t in self.types.values()]
        con.execute("CREATE OR REPLACE TABLE catalog_gpu_families AS SELECT * FROM (VALUES "
                    + ", ".join("(?, ?, ?)" for _ in families) + ") t(provider, family, gpu_model)",
                    [v for row in families for v in row])
        con.execute("CREATE OR REPLACE TABLE catalog_instance_types AS SELECT * FROM (VALUES "
                    + ", ".join(f"(?, ?, ?, CAST(? AS {GPU_COUNT}))" for _ in types)
                    + ") t(provider, instance_type, gpu_model, gpu_count)", [v for row in types for v in row])


@cache
def load_catalog() -> Catalog:
    text = resources.files("auditor.data").joinpath("catalog.yaml").read_text(encoding="utf-8")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: the gate starts faster
    return Catalog(yaml.load(text, Loader=loader))  # noqa: S506 - a safe loader either way

"""The bundled catalog: the instance-family rule, written once for Python and once for SQL, must agree; every
price names where it is from and every type without one says why (issue 27), and a type without a price never
gives a $0 saving."""

import copy
from decimal import Decimal
from importlib import resources

import duckdb
import pytest
import yaml

from auditor.model import GpuAsset
from auditor.providers.catalog import Catalog, family_of, family_sql, load_catalog
from auditor.registry import get_rule
from auditor.sql import lit
from auditor.testing import context

CATALOG = load_catalog()
TYPES = [(p, t.name) for p in ("aws", "gcp", "azure") for t in CATALOG.instance_types(p)]
TYPES += [("aws", "ml.p4d.24xlarge"), ("aws", "ml.g5.xlarge"), ("gcp", "a3-megagpu-8g"), ("oracle", "BM.GPU4.8")]
DATA = yaml.safe_load(resources.files("auditor.data").joinpath("catalog.yaml").read_text(encoding="utf-8"))


def test_family_sql_agrees_with_family_of():
    con = duckdb.connect()
    got = con.execute("SELECT " + ", ".join(family_sql(lit(p), lit(t)) for p, t in TYPES)).fetchone()
    assert list(got) == [family_of(p, t) for p, t in TYPES]
    assert len(TYPES) > 50


def test_every_price_has_a_source_and_every_unpriced_type_a_reason():
    for t in CATALOG.types.values():
        if t.price_per_hour is None:
            assert t.unpriced and len(t.unpriced) > 20, t.name
        else:
            assert t.price_per_hour > 0 and CATALOG.price_source(t), t.name
    # The prices checked against SkyPilot's public catalog (us-east-1 / eastus), with it named beside them
    checked = {("aws", "g6f.large"): "0.202", ("aws", "g6f.xlarge"): "0.2375", ("aws", "g6f.2xlarge"): "0.475",
               ("aws", "g6f.4xlarge"): "0.95", ("aws", "gr6f.4xlarge"): "1.066", ("aws", "p5en.48xlarge"): "63.296",
               ("aws", "p6-b200.48xlarge"): "113.9328", ("azure", "standard_nv36ads_a10_v5"): "3.20",
               ("azure", "standard_nv72ads_a10_v5"): "6.52"}
    for key, price in checked.items():
        t = CATALOG.types[key]
        assert t.price_per_hour == Decimal(price) and "skypilot-catalog" in CATALOG.price_source(t), key
    unpriced = {k for k, t in CATALOG.types.items() if t.price_per_hour is None}
    assert unpriced == {("aws", "p6e-gb200.36xlarge"), ("azure", "standard_nv6ads_a10_v5"),
                        ("azure", "standard_nv12ads_a10_v5"), ("azure", "standard_nv18ads_a10_v5")}
    assert CATALOG.instance("aws", "p6e-gb200.36xlarge").gpus == 4
    # A type's share of its GPU is what AWS's GpuPartitionSize says (SkyPilot's AcceleratorCount agrees)
    assert [CATALOG.instance("aws", n).gpus for n in ("g6f.large", "g6f.xlarge", "g6f.2xlarge", "g6f.4xlarge",
                                                        "gr6f.4xlarge")] == [Decimal("0.125")] * 2 + [
        Decimal("0.25"), Decimal("0.5"), Decimal("0.5")]
    # Unpriced types are never offered as a cheaper target
    assert not {t.name for p in ("aws", "azure") for t in CATALOG.instance_types(p)} & {
        "p6e-gb200.36xlarge", "Standard_NV6ads_A10_v5"}


@pytest.mark.parametrize("extra", [{}, {"unpriced": "no reason needed"}], ids=["neither", "both"])
def test_a_type_needs_a_price_or_the_reason_it_has_none_not_both(extra):
    data = copy.deepcopy(DATA)
    types = data["providers"]["aws"]["instance_types"]
    types["g5.xlarge"] = [1, None if not extra else 1.006, extra]
    with pytest.raises(ValueError, match="g5.xlarge: give an on-demand price or `unpriced`"):
        Catalog(data)


def test_an_idle_unpriced_type_states_why_it_has_no_saving_never_zero():
    asset = GpuAsset(id="u-1", provider="aws", instance_type="p6e-gb200.36xlarge", gpu_model="GB200",
                     gpu_count=4, usage_hours=300, mean_util_pct=1.0)
    [f] = get_rule("GPU001")({}).check(asset, context())
    assert f.monthly_savings is None and f.cost is None
    assert f.evidence["savings_basis"].startswith("no on-demand price: sold only as P6e-GB200 UltraServer")

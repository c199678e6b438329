"""Each column of a FOCUS line, one line for each way the FOCUS reader reads it: the columns FOCUS defines read as
they are, the provider's every spelling, the instance type from each place an export writes it, tags (JSON text,
MAP or STRUCT, and a 1.3 allocated charge's own tags over them), a 1.3 provider split, SkuPriceDetails' GpuCount,
kinds, and a bad value of each column read as a number, a time or JSON named by file, line and column.

The expected values are worked out from the FOCUS specification (../shared/reference) and the reader's
docstrings. Each test reads its own small file: mutmut runs a test against the functions it saw that test call."""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from auditor.errors import InputError
from auditor.tables.store import Store

D = Decimal

TEXT = ("ChargeCategory", "ChargeDescription", "ServiceName", "ServiceCategory", "ProviderName", "BillingAccountId",
        "SubAccountId", "ResourceId", "RegionId", "AvailabilityZone", "SkuId", "PricingCategory",
        "CommitmentDiscountId", "CommitmentDiscountStatus", "CommitmentDiscountType", "CommitmentDiscountUnit",
        "CapacityReservationId", "CapacityReservationStatus", "ContractApplied", "ConsumedUnit", "x_UsageType")


def line(**over: str) -> dict[str, str]:
    """A FOCUS 1.3 line of an hour of compute, every text column its own value, with `over` changed."""
    row = {"BilledCost": "10.00", "EffectiveCost": "8.00", "ListCost": "12.00", "BillingCurrency": "USD",
           "ChargePeriodStart": "2024-09-01T00:00:00Z", "ChargePeriodEnd": "2024-09-01T01:00:00Z",
           "ConsumedQuantity": "1", "CommitmentDiscountQuantity": "", "Tags": "", "SkuPriceDetails": "",
           "x_SkuDetails": "", "SkuMeter": "", "AllocatedMethodId": "", "AllocatedResourceId": "",
           "AllocatedTags": ""}
    row.update({c: f"{c.lower()}-1" for c in TEXT})
    row.update(ChargeCategory="Usage", ServiceCategory="Compute", ProviderName="Microsoft", x_UsageType="")
    row.update(over)
    return row


def write(tmp_path: Path, rows: list[dict[str, str]], name: str = "focus.csv") -> Path:
    path = tmp_path / name
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return path


def read(path: Path, columns: str) -> list[tuple]:
    store = Store()
    assert store.load_file(path).format.startswith("focus-")
    return store.lines().execute(f"SELECT {columns} FROM lines ORDER BY x_SourceRow").fetchall()


def test_every_column_focus_defines_is_read_as_it_is(tmp_path):
    row = line(CommitmentDiscountQuantity="0.5", ConsumedQuantity="2.25", x_UsageType="USE1-Requests-Tier1")
    got = read(write(tmp_path, [row]), ", ".join(TEXT) + ", BilledCost, EffectiveCost, ListCost, BillingCurrency, "
               "CommitmentDiscountQuantity, ConsumedQuantity, strftime(ChargePeriodStart, '%H'), "
               "strftime(ChargePeriodEnd, '%H')")
    assert got == [(*(row[c] for c in TEXT), D("10.00"), D("8.00"), D("12.00"), "USD", D("0.5"), D("2.25"),
                    "00", "01")]


def test_every_provider_spelling(tmp_path):
    names = {"AWS": "aws", "Amazon Web Services": "aws", "Microsoft": "azure", "Azure": "azure",
             "Microsoft Azure": "azure", "Google": "gcp", "Google Cloud": "gcp", "GCP": "gcp", "Oracle": "oci",
             "OCI": "oci", "Alibaba Cloud": "alibaba cloud"}  # a provider FOCUS exports name, else its name
    got = read(write(tmp_path, [line(ProviderName=n) for n in names]), "ProviderName, x_Provider")
    assert got == list(names.items())


def test_the_instance_type_from_each_place_an_export_writes_it(tmp_path):
    """SkuPriceDetails' InstanceType (FOCUS 1.1+), Azure's x_SkuDetails ServiceType, an AWS usage type, then the
    description: an AWS type, an Azure size, a GCP machine type; in that order."""
    rows = [line(SkuPriceDetails=json.dumps({"InstanceType": "p5.48xlarge"}), x_UsageType="BoxUsage:g5.xlarge"),
            line(x_SkuDetails=json.dumps({"ServiceType": "Standard_ND96asr_v4"})),
            line(x_UsageType="USE1-BoxUsage:g5.xlarge", ChargeDescription="p4d.24xlarge"),
            line(ChargeDescription="$32.77 per On Demand Linux p4d.24xlarge Instance Hour"),
            line(ChargeDescription="NC24ads A100 v4 Standard_NC24ads_A100_v4 in East US"),
            line(ChargeDescription="Compute a2-highgpu-1g running in Americas"),
            line(ChargeDescription="a storage bucket")]
    assert read(write(tmp_path, rows), "x_InstanceType") == [
        ("p5.48xlarge",), ("Standard_ND96asr_v4",), ("g5.xlarge",), ("p4d.24xlarge",), ("Standard_NC24ads_A100_v4",),
        ("a2-highgpu-1g",), (None,)]


def test_kinds(tmp_path):
    """Transfer first, then Storage, then Compute (AI and Machine Learning too where it names an instance type)."""
    rows = [line(ServiceCategory="Storage"), line(ServiceCategory="Compute"),
            line(ServiceCategory="AI and Machine Learning", ChargeDescription="ml.g5.xlarge hosting",
                 ProviderName="AWS"),
            line(ServiceCategory="AI and Machine Learning"), line(ServiceCategory="Databases"),
            line(ServiceCategory="Networking", x_UsageType="USE1-USW2-AWS-Out-Bytes")]
    assert read(write(tmp_path, rows), "x_CostCategory, x_TransferKind") == [
        ("storage", None), ("other_compute", None), ("gpu_compute", None), ("other", None), ("other", None),
        ("transfer", "inter_region")]


@pytest.mark.heavy
def test_tags_and_a_split_charges_own_tags_over_them(tmp_path):
    """Tags as JSON text; on a FOCUS 1.3 allocated charge, AllocatedTags over Tags key by key."""
    tags = json.dumps({"team": "platform", "env": "prod"})
    rows = [line(Tags=tags), line(Tags=tags, AllocatedTags=json.dumps({"team": "nlp"})),
            line(AllocatedTags=json.dumps({"team": "nlp"})), line()]
    assert read(write(tmp_path, rows), "Tags") == [
        ({"team": "platform", "env": "prod"},), ({"env": "prod", "team": "nlp"},), ({"team": "nlp"},), ({},)]
    no_allocated = [{k: v for k, v in r.items() if k != "AllocatedTags"} for r in rows]
    assert read(write(tmp_path, no_allocated, "focus-12.csv"), "Tags") == [
        ({"team": "platform", "env": "prod"},)] * 2 + [({},)] * 2


def test_tags_and_price_details_as_parquet_map_and_struct(tmp_path):
    """A Parquet export holds Tags as a MAP and SkuPriceDetails as a STRUCT: read as the JSON text is."""
    rows = [line(Tags=json.dumps({"team": "nlp"}), SkuPriceDetails=json.dumps({"InstanceType": "p5.48xlarge",
                                                                                "GpuCount": 8}))]
    src = write(tmp_path, rows)
    path = tmp_path / "focus.parquet"
    duckdb.execute(f"COPY (SELECT * REPLACE (CAST(CAST(Tags AS JSON) AS MAP(VARCHAR, VARCHAR)) AS Tags, "
                   f"CAST(SkuPriceDetails AS JSON)::STRUCT(InstanceType VARCHAR, GpuCount INTEGER) "
                   f"AS SkuPriceDetails) FROM read_csv('{src}', all_varchar=true)) TO '{path}' (FORMAT parquet)")
    assert read(path, "Tags, x_InstanceType, x_GpuCount") == [({"team": "nlp"}, "p5.48xlarge", 8)]


def test_a_provider_split_and_its_unused_part(tmp_path):
    """FOCUS 1.3 allocated charges: the split charge of a resource to what it was split to, at its effective
    cost; a split charge with no allocated resource is the resource's unused part."""
    rows = [line(AllocatedMethodId="proportional", AllocatedResourceId="pod-1", EffectiveCost="3.00"),
            line(AllocatedMethodId="proportional", EffectiveCost="1.00"), line()]
    assert read(write(tmp_path, rows), "x_SplitMethod, x_SplitResourceId, x_SplitParentId, x_SplitCost, "
                                       "x_SplitUnusedCost") == [
        ("proportional", "pod-1", "resourceid-1", D("3.00"), None),
        ("proportional", None, "resourceid-1", None, D("1.00")), (None, None, None, None, None)]


def test_gpu_count_from_sku_price_details(tmp_path):
    """SkuPriceDetails' GpuCount (FOCUS 1.2+) makes a line GPU spend where the catalog does not know its type."""
    rows = [line(SkuPriceDetails=json.dumps({"GpuCount": 0.5})), line(SkuPriceDetails=json.dumps({"x": 1})),
            line()]
    assert read(write(tmp_path, rows), "x_GpuCount, x_CostCategory") == [
        (0.5, "gpu_compute"), (None, "other_compute"), (None, "other_compute")]


@pytest.mark.parametrize("column, value", [
    ("BilledCost", "ten"), ("EffectiveCost", "8,00"), ("ListCost", "n/a"), ("ConsumedQuantity", "1 h"),
    ("CommitmentDiscountQuantity", "half"), ("ChargePeriodStart", "next week"), ("ChargePeriodEnd", "soon"),
    ("Tags", "{team: nlp"), ("SkuPriceDetails", "{GpuCount"), ("AllocatedTags", "[team")])
def test_a_bad_value_names_file_line_and_column(tmp_path, column, value):
    path = write(tmp_path, [line(), line(**{column: value})])
    with pytest.raises(InputError) as err:
        Store().load_billing([path])
    assert (err.value.path, err.value.line, err.value.column) == (str(path), 3, column)
    assert f"{path}:3: " in str(err.value) and repr(value) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("column", ["Tags", "AllocatedTags"])
def test_a_json_object_naming_a_key_twice_names_file_line_and_column(tmp_path, column):
    """Which of two values is the team's? DuckDB's map said "Map keys must be unique", naming no line."""
    value = '{"team": "nlp", "owner": "ana", "team": "cv"}'
    path = write(tmp_path, [line(), line(**{column: value})])
    with pytest.raises(InputError) as err:
        Store().load_billing([path])
    assert str(err.value) == f"{path}:3: column {column!r}: {value!r} names a key twice"


@pytest.mark.heavy
def test_tags_as_the_objects_of_a_json_export_and_a_file_without_tags(tmp_path):
    """A newline-delimited JSON export holds Tags as an object (a STRUCT to DuckDB): read as its JSON text is. A
    file without a Tags column has no tags."""
    rows = [line(Tags=json.dumps({"team": "nlp"})), line(Tags=json.dumps({"team": "cv", "env": "dev"}))]
    path = tmp_path / "focus.jsonl"
    objects = [{**{k: v or None for k, v in r.items()}, "Tags": json.loads(r["Tags"])} for r in rows]
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    # DuckDB reads the objects as one STRUCT of every key: a key a line lacks is there without a value
    assert read(path, "Tags['team'], Tags['env']") == [("nlp", None), ("cv", "dev")]
    untagged = [{k: v for k, v in r.items() if k not in ("Tags", "AllocatedTags")} for r in rows]
    assert read(write(tmp_path, untagged), "Tags") == [({},), ({},)]


def test_transfers_from_each_place_an_export_names_them(tmp_path):
    """An AWS usage type, an AWS description naming both regions (`... - US West (Oregon) data transfer to EU
    (Ireland)`, or `from`: then the first is where it went), Azure's meter subcategory, a SKU meter: the transfer's
    kind, direction and regions (the line's own region where the export names no source)."""
    def transfer(**over: str) -> dict[str, str]:
        return line(**{"ServiceCategory": "Networking", "x_SkuMeterSubcategory": ""} | over)

    rows = [transfer(x_UsageType="USE1-USW2-AWS-Out-Bytes"),
            transfer(ChargeDescription="$0.02 per GB - US West (Oregon) data transfer to EU (Ireland)"),
            transfer(ChargeDescription="$0.02 per GB - US West (Oregon) data transfer from EU (Ireland)"),
            transfer(x_SkuMeterSubcategory="Inter-Region", ChargeDescription="Bandwidth"),
            transfer(SkuMeter="Inter Zone Data Transfer"),
            transfer(SkuMeter="Internet Egress"),
            transfer(SkuMeter="Ingress")]
    assert read(write(tmp_path, rows), "x_CostCategory, x_TransferKind, x_TransferDirection, x_TransferFrom, "
                                       "x_TransferTo") == [
        ("transfer", "inter_region", "out", "regionid-1", None),
        ("transfer", "inter_region", "out", "us-west-2", "eu-west-1"),
        ("transfer", "inter_region", "in", "eu-west-1", "us-west-2"),
        ("transfer", "inter_region", "out", "regionid-1", None),
        ("transfer", "inter_zone", "out", "regionid-1", None),
        ("transfer", "internet", "out", "regionid-1", None),
        ("other", None, None, None, None)]


@pytest.mark.parametrize("container", ["parquet", "json"])
def test_an_amount_as_text_with_a_digit_separator_is_refused_in_parquet_and_json(tmp_path, container):
    """A Parquet or JSON export written from a spreadsheet holds its amounts as text: `1_000` there is refused as
    in a CSV (DuckDB's cast read it as 1000); a number column is a number and needs no such look."""
    src = write(tmp_path, [line(), line(BilledCost="1_000", ListCost="2e3")])
    path = tmp_path / f"focus.{container}"
    duckdb.execute(f"COPY (SELECT * FROM read_csv('{src}', all_varchar=true)) TO '{path}' "
                   f"(FORMAT {'parquet' if container == 'parquet' else 'json'})")
    with pytest.raises(InputError) as e:
        read(path, "BilledCost")
    assert (e.value.line, e.value.column, e.value.message) == (2, "BilledCost", "'1_000' is not a number")
    src = write(tmp_path, [line(), line(ListCost="2e3")])
    duckdb.execute(f"COPY (SELECT * FROM read_csv('{src}', all_varchar=true)) TO '{path}' "
                   f"(FORMAT {'parquet' if container == 'parquet' else 'json'})")
    assert read(path, "BilledCost, ListCost") == [(Decimal("10"), Decimal("12")), (Decimal("10"), Decimal("2000"))]


def test_a_focus_exports_cost_column_is_billed_cost(tmp_path):
    """What the file's own total is summed from (a spreadsheet's total row is checked against it)."""
    source = Store().load_file(write(tmp_path, [line()]))
    assert source.cost_column == "BilledCost"

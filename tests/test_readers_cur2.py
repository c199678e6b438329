"""AWS CUR 2.0 (Data Exports) and the CUR delivery layout: the same lines as the hand-written legacy CUR
fixture, re-laid in CUR 2.0's fixed snake_case schema with its `resource_tags` and `product` maps, as gzip
CSV (maps as JSON text) and as Parquet (real MAP columns). Every form must give the same lines, totals and
classification as the legacy file. Then a CUR report folder with a superseded assembly and its manifest."""

from __future__ import annotations

import csv
import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]
LEGACY = REPO / "fixtures" / "billing" / "cur-gpu-spot.csv"
COMPARE = ("BilledCost", "EffectiveCost", "ChargeCategory", "PricingCategory", "x_InstanceType", "x_GpuModel",
           "x_GpuCount", "x_CostCategory", "x_TransferKind", "x_TransferFrom", "x_TransferTo", "RegionId",
           "ResourceId", "Tags")


def snake(column: str) -> str:
    """`lineItem/UnblendedCost` -> `line_item_unblended_cost`."""
    category, name = column.split("/", 1)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", category).lower() + "_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def cur2_rows() -> tuple[list[str], list[dict[str, str]]]:
    with open(LEGACY, newline="", encoding="utf-8") as f:
        legacy = list(csv.DictReader(f))
    header: list[str] = []
    rows = []
    for r in legacy:
        out: dict[str, str] = {"bill_payer_account_name": "Example Payer", "line_item_usage_account_name": "ml-prod"}
        tags = {}
        for col, value in r.items():
            if col.startswith("resourceTags/user:"):
                if value:
                    tags["user_" + col.split(":", 1)[1]] = value
                continue
            if col == "product/instanceType":  # CUR 2.0 promotes it under this name
                out["product_instance_type"] = value
            elif col == "product/regionCode":
                out["product_region_code"] = value
            else:
                out[snake(col)] = value
        out["resource_tags"] = json.dumps(tags) if tags else ""
        out["product"] = json.dumps({"servicecode": r["lineItem/ProductCode"], "region": r["product/regionCode"]})
        rows.append(out)
        header = list(out)
    return header, rows


def write_cur2_csv_gz(path: Path) -> Path:
    header, rows = cur2_rows()
    with gzip.open(path, "wt", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows)
    return path


def write_cur2_parquet(tmp_path: Path) -> Path:
    plain = write_cur2_csv_gz(tmp_path / "plain.csv.gz")
    out = tmp_path / "cur2.parquet"
    con = duckdb.connect()
    con.execute(f"""COPY (SELECT * REPLACE (
            CAST(line_item_unblended_cost AS DECIMAL(38, 10)) AS line_item_unblended_cost,
            CAST(line_item_usage_start_date AS TIMESTAMP) AS line_item_usage_start_date,
            CASE WHEN resource_tags IS NULL THEN MAP() ELSE CAST(CAST(resource_tags AS JSON) AS MAP(VARCHAR, VARCHAR))
                 END AS resource_tags,
            CAST(CAST(product AS JSON) AS MAP(VARCHAR, VARCHAR)) AS product)
        FROM read_csv('{plain}', all_varchar = true)) TO '{out}' (FORMAT parquet)""")
    types = dict((r[0], r[1]) for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{out}')").fetchall())
    assert types["resource_tags"].startswith("MAP") and types["line_item_unblended_cost"].startswith("DECIMAL")
    return out


def lines(path: Path) -> tuple[Store, list[tuple]]:
    store = Store()
    source = store.load_file(path)
    cols = ", ".join(COMPARE)
    return store, [source.format] + store.lines().execute(
        f"SELECT {cols} FROM lines ORDER BY x_SourceRow").fetchall()


@pytest.fixture(scope="module")
def legacy_lines():
    return lines(LEGACY)[1][1:]


@pytest.mark.heavy
@pytest.mark.parametrize("form", ["csv.gz", "parquet"])
def test_cur2_reads_as_the_legacy_file(tmp_path, legacy_lines, form):
    path = write_cur2_csv_gz(tmp_path / "cur2.csv.gz") if form == "csv.gz" else write_cur2_parquet(tmp_path)
    _, got = lines(path)
    assert got[0] == "aws-cur2"
    assert got[1:] == legacy_lines
    # the resource_tags map keys `user_team` become the tag `team`, as the legacy columns do
    assert any(t == {"team": "research"} for *_, t in got[1:])


def test_cur2_totals_reconcile(tmp_path):
    path = write_cur2_csv_gz(tmp_path / "cur2.csv.gz")
    store = Store()
    source = store.load_file(path)
    _, rows = cur2_rows()
    independent = sum(Decimal(r["line_item_unblended_cost"]) for r in rows)
    assert source.stats["billed_cost"]["USD"] == independent
    assert source.rows == len(rows)


def test_cur_report_folder_reads_only_the_manifests_assembly(tmp_path):
    """AWS re-delivers a month as a new assembly beside the old one; the manifest names the current one."""
    period = tmp_path / "cur" / "report" / "20260701-20260801"
    old, new = period / "asm-old", period / "asm-new"
    for folder in (old, new):
        folder.mkdir(parents=True)
        (folder / "report-1.csv").write_bytes(LEGACY.read_bytes())
    (period / "report-Manifest.json").write_text(json.dumps({
        "assemblyId": "asm-new", "reportKeys": ["cur/report/20260701-20260801/asm-new/report-1.csv"]}))
    store = Store()
    sources = store.load_billing([tmp_path / "cur"])
    assert [Path(s.path).parent.name for s in sources] == ["asm-new"]
    assert any("asm-old" in w and "superseded" in w for w in store.warnings)
    single = Store().load_file(LEGACY)
    assert sources[0].stats["billed_cost"] == single.stats["billed_cost"]


@pytest.mark.heavy
def test_redelivered_month_is_counted_once(tmp_path):
    """The same month exported twice, the second time with one more line, is counted once: from the copy
    that reaches further. Parts of one export (disjoint lines) are all kept."""
    text = LEGACY.read_text(encoding="utf-8")
    header, *body = text.splitlines()
    first = tmp_path / "a-first.csv"
    first.write_text("\n".join([header, *body]) + "\n", encoding="utf-8")
    extra = body[0].replace("li-01", "li-99").replace("2026-07-01T00:00:00Z,2026-07-01T01:00:00Z",
                                                      "2026-07-02T00:00:00Z,2026-07-02T01:00:00Z")
    second = tmp_path / "b-second.csv"
    second.write_text("\n".join([header, *body, extra]) + "\n", encoding="utf-8")
    store = Store()
    kept = store.load_billing([tmp_path])
    assert [Path(s.path).name for s in kept] == ["b-second.csv"]
    assert any("a-first.csv" in w and "counted once" in w for w in store.warnings)
    alone = Store().load_file(second)
    total = store.lines().execute("SELECT sum(BilledCost), count(*) FROM lines").fetchall()[0]
    assert total == (alone.stats["billed_cost"]["USD"], alone.rows)


def test_parts_of_one_export_are_all_kept(tmp_path):
    header, *body = LEGACY.read_text(encoding="utf-8").splitlines()
    half = len(body) // 2
    for i, part in enumerate((body[:half], body[half:]), 1):
        (tmp_path / f"report-{i}.csv").write_text("\n".join([header, *part]) + "\n", encoding="utf-8")
    store = Store()
    assert len(store.load_billing([tmp_path])) == 2
    assert store.lines().execute("SELECT count(*) FROM lines").fetchall()[0][0] == len(body)
    assert not store.warnings

"""Format detection (auditor/providers/billing/detect.py) stated directly, on small files each test writes: which
files a folder holds, each format's signature and what is refused, gzip and plain, BOM, line endings and
delimiters, the columns resolved (Parquet and JSON fields dotted), the long-line checks, and every field of
`Sniffed`. Each expected answer is worked out from detect's docstrings and the export formats, not read back.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from auditor.errors import InputError
from auditor.providers.billing import detect
from auditor.providers.billing.detect import (
    MAX_LINE,
    READS,
    URI_NEEDS_SPARK,
    Sniffed,
    detect_format,
    expand,
    first_line_over,
    flatten,
    gzip_line_over,
    has_long_line,
    is_data,
    is_uri,
    manifest_keys,
    near_miss,
    norm,
    sniff,
    struct_fields,
)

REPO = Path(__file__).resolve().parents[1]
AVRO = REPO / "fixtures" / "billing" / "gcp" / "gcp-detailed-export.avro"

# The smallest header of each format: the columns its reader cannot do without (detect.FAMILIES' needs).
CUR = "identity/LineItemId,lineItem/UsageStartDate,lineItem/UnblendedCost,lineItem/CurrencyCode"
CUR_LINE = "li-1,2026-07-01T00:00:00Z,1.50,USD"
FOCUS = "BilledCost,ChargePeriodStart,BillingCurrency"
FOCUS_LINE = "1.50,2026-07-01T00:00:00Z,USD"


@pytest.fixture
def con():
    con = duckdb.connect()
    yield con
    con.close()


def refusal(call) -> str:
    with pytest.raises(InputError) as err:
        call()
    return str(err.value)


# --- names: URIs, spellings, data files -------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "uri"), [
    ("s3a://bucket/cur/", True), ("gs://bucket/x.csv", True), ("abfss://c@a.dfs.core.windows.net/x", True),
    ("hdfs://nn/x", True), ("file:///tmp/x.csv", True), ("dbfs:/mnt/x", True), ("s3:/bucket/x", True),
    ("s3+x.y-z://b/x", True),  # a scheme's letters, digits, + . and -
    ("C:/billing/x.csv", False),  # one letter: a Windows drive
    ("3s://bucket/x", False),  # a scheme starts with a letter
    ("bucket/s3://x", False), ("billing.csv", False), ("s3:bucket", False),
])
def test_a_uri_is_a_scheme_of_two_letters_or_more_then_a_slash(path, uri):
    assert is_uri(path) is uri
    assert is_uri(Path("billing.csv")) is False and is_uri(Path("s3a:/bucket/x")) is False  # a Path is no URI


def test_norm_keeps_lower_case_letters_and_digits():
    assert norm("lineItem/UsageType") == norm("line_item_usage_type") == "lineitemusagetype"
    assert norm("Sku.Description ") == "skudescription"
    assert norm("costInUsd-2") == "costinusd2"


@pytest.mark.parametrize(("name", "data"), [
    ("a.csv", True), ("a.CSV", True), ("a.csv.gz", True), ("a.gz", True), ("a.parquet", True), ("a.txt", True),
    ("a.json", True), ("a.jsonl", True), ("a.ndjson", True), ("a.avro", True), ("a.Parquet", True),
    ("a.xlsx", False), ("a.csv.bak", False), ("a", False), ("README.md", False),
    (".a.csv", False),  # hidden
    ("gpu-cur-Manifest.json", False), ("manifest.json", False), ("inventory.json", False),  # sidecars
    ("Inventory.JSON", False),
    ("manifest.csv", True),  # only a JSON file is a sidecar
    ("inventory-2026.json", True), ("costs.json", True),
])
def test_which_files_are_billing_data(name, data):
    assert is_data(Path("folder") / name) is data


# --- CUR manifests --------------------------------------------------------------------------------------------------

def test_a_cur_1_manifest_lists_each_report_key_by_assembly_and_name():
    text = json.dumps({"reportKeys": ["cur/gpu/20260701-20260801/abc-123/gpu-1.csv.gz",
                                      "cur/gpu/20260701-20260801/abc-123/gpu-2.csv.gz/", "cur/X/gpu-X"]})
    assert manifest_keys(text, "m.json") == {"abc-123/gpu-1.csv.gz", "gpu-1.csv.gz",
                                             "abc-123/gpu-2.csv.gz", "gpu-2.csv.gz", "X/gpu-X", "gpu-X"}


def test_a_cur_2_manifest_lists_its_data_files():
    text = json.dumps({"reportKeys": [], "dataFiles": ["s3://b/exports/data/BILLING_PERIOD=2026-07/x-1.parquet"]})
    assert manifest_keys(text, "m.json") == {"BILLING_PERIOD=2026-07/x-1.parquet", "x-1.parquet"}
    assert manifest_keys(json.dumps({"dataFiles": ["x-2.parquet"]}), "m") == {"x-2.parquet"}


@pytest.mark.parametrize("text", ["{}", "[]", '"reportKeys"', '{"reportKeys": null}', "7"])
def test_a_manifest_without_report_keys_lists_nothing(text):
    assert manifest_keys(text, "m.json") == set()


def test_a_manifest_that_is_no_json_is_named():
    assert refusal(lambda: manifest_keys("{", "cur/m.json")) == (
        "cur/m.json: cannot read the CUR manifest: Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1)")


# --- expand: files named, folders, manifests ------------------------------------------------------------------------

def write(path: Path, data: bytes | str = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def test_a_folder_expands_to_its_data_files_sorted_and_recursively(tmp_path):
    top = tmp_path / "billing"
    for name in ("b.csv", "a.parquet", "sub/c.json", "sub/deeper/d.csv.gz", "notes.md", ".hidden.csv",
                 "inventory.json", "sub/z.avro"):
        write(top / name)
    named = write(tmp_path / "named.txt")
    assert expand([named, top]) == [named, top / "a.parquet", top / "b.csv", top / "sub" / "c.json",
                                    top / "sub" / "deeper" / "d.csv.gz", top / "sub" / "z.avro"]


def test_a_file_named_is_kept_whatever_its_name(tmp_path):
    odd = write(tmp_path / "costs.xlsx")
    assert expand([odd]) == [odd]


def test_a_folder_without_billing_files_is_refused(tmp_path):
    empty = tmp_path / "empty"
    write(empty / "README.md")
    write(empty / "manifest.json", "{}")
    assert refusal(lambda: expand([empty])) == (
        f"{empty}: folder holds no billing files (.csv, .csv.gz, .parquet, .json, .avro)")


def test_a_folder_with_cur_manifests_reads_only_the_assemblies_they_list(tmp_path):
    """AWS re-delivers a month as a new assembly beside the old one; the manifest names the current one."""
    top = tmp_path / "cur"
    old = write(top / "20260701-20260801" / "old-1" / "gpu-1.csv.gz")
    new = write(top / "20260701-20260801" / "new-2" / "gpu-1.csv.gz")
    write(top / "20260701-20260801" / "gpu-Manifest.json",
          json.dumps({"reportKeys": ["cur/gpu/20260701-20260801/new-2/gpu-1.csv.gz"]}))
    notes: list[str] = []
    assert expand([top], notes) == [new]
    assert notes == [f"{old}: not in the folder's CUR manifest (a superseded delivery); not read"]
    assert expand([top]) == [new]  # no notes asked for


def test_files_a_manifest_names_by_name_alone_are_kept_where_no_assembly_matches(tmp_path):
    """A CUR 2.0 export's files, or files copied out of their assembly folder: matched by name."""
    top = tmp_path / "export"
    one = write(top / "part-1.parquet")
    write(top / "part-0.parquet")
    write(top / "metadata" / "x-MANIFEST.JSON", json.dumps({"dataFiles": ["s3://b/x/data/BILLING/part-1.parquet"]}))
    notes: list[str] = []
    assert expand([top], notes) == [one]
    assert notes == [f"{top / 'part-0.parquet'}: not in the folder's CUR manifest (a superseded delivery); not read"]


def test_a_manifest_that_lists_none_of_the_files_leaves_nothing_to_read(tmp_path):
    top = tmp_path / "cur"
    write(top / "a.csv")
    write(top / "gpu-Manifest.json", json.dumps({"reportKeys": ["x/y/other.csv"]}))
    assert refusal(lambda: expand([top], [])) == (
        f"{top}: folder holds no billing files (.csv, .csv.gz, .parquet, .json, .avro)")


def test_a_manifest_whose_files_are_in_the_folder_in_part_is_refused(tmp_path):
    """A month downloaded in part (a sync cut short): its first files were read as the whole month, without a word."""
    top = tmp_path / "cur"
    month = top / "20260701-20260801"
    keys = [f"cur/gpu/20260701-20260801/asm-2/gpu-{i}.csv.gz" for i in (1, 2, 3, 4)]
    manifest = write(month / "gpu-Manifest.json", json.dumps({"reportKeys": keys}))
    for i in (1, 2):
        write(month / "asm-2" / f"gpu-{i}.csv.gz")
    assert refusal(lambda: expand([top], [])) == (
        f"{manifest}: lists 4 files, of which 2 are not in the folder (the first: asm-2/gpu-3.csv.gz): an "
        "incomplete download, whose period would be read in part; download the rest")
    write(month / "asm-2" / "gpu-3.csv.gz")
    assert "of which 1 is not in the folder (the first: asm-2/gpu-4.csv.gz)" in refusal(lambda: expand([top], []))
    write(month / "gpu-4.csv.gz")  # beside the assembly's folder, not in it: not the listed file
    assert "of which 1 is not in the folder (the first: asm-2/gpu-4.csv.gz)" in refusal(lambda: expand([top], []))
    write(month / "asm-2" / "gpu-4.csv.gz")
    assert len(expand([top], [])) == 4


def test_a_cur_2_manifest_of_names_alone_is_judged_whole(tmp_path):
    top = tmp_path / "export"
    write(top / "a.parquet")
    manifest = write(top / "metadata" / "x-Manifest.json", json.dumps({"dataFiles": ["a.parquet", "b.parquet"]}))
    assert refusal(lambda: expand([top], [])) == (
        f"{manifest}: lists 2 files, of which 1 is not in the folder (the first: b.parquet): an incomplete download, "
        "whose period would be read in part; download the rest")


def test_a_cur_manifest_that_cannot_be_read_is_named(tmp_path, monkeypatch):
    top = tmp_path / "cur"
    write(top / "a.csv")
    manifest = write(top / "gpu-Manifest.json", "{}")

    def failing(path, what):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("auditor.providers.billing.detect.read_text", failing)
    assert refusal(lambda: expand([top])) == f"{manifest}: cannot read the CUR manifest: [Errno 5] Input/output error"


def test_files_found_by_name_alone_are_judged_whole_too(tmp_path):
    """Where no file lies in its assembly's folder, files are found by name (copied out of their folders), and a
    listed name missing is a download in part as well: here the old assembly's a.csv stood in for the new one's."""
    top = tmp_path / "cur"
    write(top / "m" / "asm-1" / "a.csv")
    manifest = write(top / "m" / "gpu-Manifest.json",
                     json.dumps({"reportKeys": ["cur/m/asm-2/a.csv", "cur/m/asm-2/b.csv"]}))
    assert refusal(lambda: expand([top], [])) == (
        f"{manifest}: lists 2 files, of which 1 is not in the folder (the first: asm-2/b.csv): an incomplete "
        "download, whose period would be read in part; download the rest")
    b = write(top / "m" / "b.csv")
    assert expand([top], []) == [top / "m" / "asm-1" / "a.csv", b]


def test_a_manifest_without_keys_or_a_folder_named_like_one_changes_nothing(tmp_path):
    top = tmp_path / "cur"
    a, b = write(top / "a.csv"), write(top / "b.csv")
    write(top / "gpu-Manifest.json", "{}")
    (top / "dir-manifest.json").mkdir()
    assert expand([top], []) == [a, b]


def test_each_month_s_manifest_lists_its_own_assembly(tmp_path):
    """A CUR report folder holds a folder per billing period, each with its manifest: the files every one lists."""
    top = tmp_path / "gpu"
    kept = []
    for month, old, new in (("20260701-20260801", "a-1", "a-2"), ("20260801-20260901", "b-1", "b-2")):
        write(top / month / old / "gpu-1.csv.gz")
        kept.append(write(top / month / new / "gpu-1.csv.gz"))
        write(top / month / "gpu-Manifest.json", json.dumps({"reportKeys": [f"cur/gpu/{month}/{new}/gpu-1.csv.gz"]}))
    assert expand([top], []) == kept


def test_a_manifest_in_a_folder_that_is_no_json_is_named(tmp_path):
    top = tmp_path / "cur"
    write(top / "a.csv")
    manifest = write(top / "gpu-Manifest.json", "{")
    assert refusal(lambda: expand([top])) == (
        f"{manifest}: cannot read the CUR manifest: Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1)")


def test_a_manifest_is_read_as_utf8_under_an_ascii_locale(tmp_path):
    """The manifest is UTF-8 JSON (AWS writes it so) whatever the machine's locale: under LC_ALL=C (neither
    Python's coercion to C.UTF-8 nor its UTF-8 mode), a key naming a folder `Zürich-2026` is read."""
    top = tmp_path / "cur"
    one = write(top / "part-1.csv")
    write(top / "part-0.csv")
    write(top / "gpu-Manifest.json", json.dumps({"reportKeys": ["cur/Zürich-2026/part-1.csv"]}, ensure_ascii=False))
    assert expand([top], []) == [one]  # here, then alone
    code = ("import sys; from pathlib import Path; from auditor.providers.billing.detect import expand; "
            "print(*[p.name for p in expand([Path(sys.argv[1])], [])])")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    out = subprocess.run([sys.executable, "-c", code, str(top)], env=env, capture_output=True, text=True)
    assert (out.stdout, out.stderr) == ("part-1.csv\n", "")


def test_a_manifest_that_cannot_be_read_is_named(tmp_path):
    top = tmp_path / "cur"
    write(top / "a.csv")
    manifest = write(top / "gpu-Manifest.json", b'{"reportKeys": ["\xff"]}')
    assert refusal(lambda: expand([top])) == (
        f"{manifest}:1: the CUR manifest is not UTF-8 text: byte 0xff, the line's byte 18 (Latin-1 or "
        "Windows-1252?); save it as UTF-8")


def test_a_uri_is_refused_unless_a_local_path_of_that_name_exists(tmp_path, monkeypatch):
    assert refusal(lambda: expand(["s3a://bucket/cur/"])) == f"s3a://bucket/cur/: {URI_NEEDS_SPARK}"
    assert refusal(lambda: expand([Path("gs:/bucket/x.csv")])) == f"gs:/bucket/x.csv: {URI_NEEDS_SPARK}"
    monkeypatch.chdir(tmp_path)  # a folder `s3:` beside the command: a local path after all
    local = write(tmp_path / "s3:" / "bucket" / "x.csv")
    assert expand([Path("s3:/bucket")]) == [Path("s3:/bucket/x.csv")] and local.exists()
    assert expand([Path("s3:/bucket/x.csv")]) == [Path("s3:/bucket/x.csv")]


def test_a_missing_path_is_named(tmp_path):
    assert refusal(lambda: expand([tmp_path / "nope.csv"])) == f"{tmp_path / 'nope.csv'}: no such file or folder"


def test_a_link_to_nothing_is_named_as_a_billing_file(tmp_path):
    link = tmp_path / "cur.csv"
    link.symlink_to(tmp_path / "gone.csv")
    assert refusal(lambda: expand([link])) == (
        f"{link}: cannot read the billing file: a symbolic link to {tmp_path / 'gone.csv'}, which does not exist")
    top = tmp_path / "billing"
    write(top / "a.csv")
    inside = top / "b.csv"
    inside.symlink_to(tmp_path / "gone.csv")
    assert refusal(lambda: expand([top])) == (
        f"{inside}: cannot read the billing file: a symbolic link to {tmp_path / 'gone.csv'}, which does not exist")


# --- detect_format and near misses ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("columns", "fmt"), [
    (CUR.split(","), "aws-cur"),
    (["line_item_unblended_cost", "line_item_usage_start_date"], "aws-cur"),  # Athena's spelling of CUR 1
    (["line_item_unblended_cost", "line_item_usage_start_date", "bill_payer_account_name"], "aws-cur2"),
    (["line_item_unblended_cost", "line_item_usage_start_date", "line_item_usage_account_name"], "aws-cur2"),
    (FOCUS.split(","), "focus-1.0"),
    (FOCUS.split(",") + ["BillingAccountType"], "focus-1.0"),  # Microsoft's 1.0 export already has it
    (FOCUS.split(",") + ["ServiceSubcategory"], "focus-1.1"), (FOCUS.split(",") + ["SkuMeter"], "focus-1.1"),
    (FOCUS.split(",") + ["SkuPriceDetails"], "focus-1.1"), (FOCUS.split(",") + ["CapacityReservationId"], "focus-1.1"),
    (FOCUS.split(",") + ["InvoiceId", "SkuMeter"], "focus-1.2"), (FOCUS.split(",") + ["PricingCurrency"], "focus-1.2"),
    (FOCUS.split(",") + ["PricingCurrencyEffectiveCost"], "focus-1.2"),
    (FOCUS.split(",") + ["PricingCurrencyListUnitPrice"], "focus-1.2"),
    (FOCUS.split(",") + ["ContractApplied", "InvoiceId"], "focus-1.3"),
    *[(FOCUS.split(",") + [c], "focus-1.3") for c in (
        "AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName",
        "AllocatedTags")],
    (["cost", "usage_start_time", "currency", "sku.description"], "gcp-billing"),
    (["cost", "usage_start_time", "currency", "sku_description"], "gcp-billing"),
    (["cost", "usage_start_time", "currency", "sku"], "gcp-billing"),  # the SKU as one STRUCT column
    (["cost", "usage_start_time", "currency"], None),  # no SKU: any CSV with a date and a cost
    (["CostInBillingCurrency", "Date", "MeterCategory"], "azure-cost"),
    (["Cost", "UsageDateTime", "ResourceLocation"], "azure-cost"),
    (["PreTaxCost", "ServicePeriodStartDate", "MeterCategory"], "azure-cost"),
    (["costInUsd", "date", "meterCategory"], "azure-cost"),
    (["Cost", "Date"], None),
    ([], None), (["a", "b"], None),
])
def test_the_format_of_a_header(columns, fmt):
    assert detect_format(columns) == fmt
    assert detect_format(tuple(columns)) == fmt


def test_a_file_with_the_columns_of_two_formats_is_the_first_family_s():
    """FOCUS is tried first, then AWS, GCP and Azure (an export with every needed column of two families)."""
    assert detect_format(FOCUS.split(",") + CUR.split(",")) == "focus-1.0"
    assert detect_format(CUR.split(",") + ["cost", "usage_start_time", "currency", "sku"]) == "aws-cur"
    assert detect_format(["cost", "usage_start_time", "currency", "sku", "Date", "MeterCategory"]) == "gcp-billing"


def test_a_needed_column_and_a_family_s_own_columns_by_any_spelling():
    """FAMILIES is built from these at import, where no test's mutant reaches: they are stated here directly."""
    assert detect._need("lineItem/UnblendedCost", "the billed cost") == detect.Need(
        frozenset({"lineitemunblendedcost"}), "lineItem/UnblendedCost", "the billed cost")
    assert detect._need("Date or UsageDateTime", "the start time", "date", "usagedatetime") == detect.Need(
        frozenset({"date", "usagedatetime"}), "Date or UsageDateTime", "the start time")
    marks = detect._keyed("metercategory", "subscriptionguid")
    assert [marks(c) for c in ("MeterCategory", "meter_category", "Subscription GUID", "Meter", "")] == [
        True, True, True, False, False]


def test_a_near_miss_names_each_column_missing():
    assert near_miss(["lineItem/UsageType", "bill/PayerAccountId", "product/instanceType"]) == (
        "looks like an AWS CUR but has no lineItem/UnblendedCost column (the billed cost) and no "
        "lineItem/UsageStartDate column (the start time); gpu-auditor reads such an export only with those columns")
    assert near_miss(["line_item_usage_type", "bill_payer_account_id", "line_item_usage_start_date"]) == (
        "looks like an AWS CUR but has no line_item_unblended_cost column (the billed cost); gpu-auditor reads "
        "such an export only with that column")
    assert near_miss(["ChargeCategory", "ServiceCategory", "BilledCost", "BillingCurrency"]) == (
        "looks like a FOCUS export but has no ChargePeriodStart column (the start time); gpu-auditor reads such an "
        "export only with that column")
    assert near_miss(["project.id", "service.description", "usage_start_time", "cost", "currency"]) == (
        "looks like a GCP BigQuery billing export but has no sku.description column (what each line bills for); "
        "gpu-auditor reads such an export only with that column")
    assert near_miss(["SubscriptionGuid", "MeterName", "ChargeType", "Date"]) == (
        "looks like an Azure cost details export but has no CostInBillingCurrency, Cost, PreTaxCost or costInUsd "
        "column (the billed cost) and no MeterCategory or ResourceLocation column (what each line bills for); "
        "gpu-auditor reads such an export only with those columns")


def test_a_near_miss_needs_three_of_a_family_s_own_columns():
    assert near_miss(["lineItem/UsageType", "bill/PayerAccountId"]) is None
    assert near_miss(["lineItem/UsageType", "bill/PayerAccountId", "savingsPlan/SavingsPlanARN"]) is not None
    assert near_miss(["lineItem/UsageType", "bill/PayerAccountId", "savings_plan_savings_plan_a_r_n"]) is not None
    assert near_miss(["MeterName", "ChargeType", "Whatever"]) is None
    assert near_miss([]) is None


def test_a_file_with_every_needed_column_is_no_near_miss():
    assert near_miss(CUR.split(",") + ["lineItem/UsageType", "bill/PayerAccountId"]) is None


def test_a_tie_between_families_names_the_first():
    """Three FOCUS columns and three Azure ones: FOCUS, the first family, is named."""
    assert near_miss(["ChargeCategory", "ServiceCategory", "RegionId", "MeterName", "ChargeType", "PartNumber"]
                     ).startswith("looks like a FOCUS export but has no BilledCost column")


def test_the_formats_read_are_named_with_the_newest_focus():
    assert READS == ("AWS Cost and Usage Reports (CUR 1 and 2.0), FOCUS 1.0 to 1.3, GCP BigQuery billing exports "
                     "and Azure cost details")


# --- sniff: CSV ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_a_plain_csv_whichever_its_line_endings(tmp_path, con, ending):
    path = write(tmp_path / "cur.csv", CUR + ending + CUR_LINE + ending)
    assert sniff(path, con) == Sniffed(path, "csv", "none", tuple(CUR.split(",")), "aws-cur", False, (), (), False)


def test_a_csv_with_a_bom(tmp_path, con):
    path = write(tmp_path / "focus.csv", b"\xef\xbb\xbf" + (FOCUS + "\n" + FOCUS_LINE + "\n").encode())
    s = sniff(path, con)
    assert (s.columns, s.format, s.has_bom, s.container, s.compression, s.serial) == (
        ("BilledCost", "ChargePeriodStart", "BillingCurrency"), "focus-1.0", True, "csv", "none", False)


def test_a_gzip_csv_is_read_serially(tmp_path, con):
    path = write(tmp_path / "cur.csv.gz", gzip.compress(b"\xef\xbb\xbf" + (CUR + "\r\n" + CUR_LINE + "\r\n").encode()))
    assert sniff(path, con) == Sniffed(path, "csv", "gzip", tuple(CUR.split(",")), "aws-cur", True, (), (), True)


def test_a_gzip_file_is_told_by_its_magic_not_its_name(tmp_path, con):
    path = write(tmp_path / "cur.csv", gzip.compress((CUR + "\n" + CUR_LINE + "\n").encode()))
    assert (sniff(path, con).compression, sniff(path, con).format) == ("gzip", "aws-cur")
    plain = write(tmp_path / "plain.csv.gz", CUR + "\n" + CUR_LINE + "\n")
    assert (sniff(plain, con).compression, sniff(plain, con).serial) == ("none", False)


def test_header_names_are_stripped_quoted_and_kept_with_an_unnamed_last_one(tmp_path, con):
    path = write(tmp_path / "focus.csv", ' BilledCost ,"ChargePeriodStart","Billing,Currency",BillingCurrency,\n'
                 "1,2026-07-01T00:00:00Z,x,USD,\n")
    s = sniff(path, con)
    assert s.columns == ("BilledCost", "ChargePeriodStart", "Billing,Currency", "BillingCurrency", "")
    assert s.format == "focus-1.0"


def test_a_header_with_an_empty_name_before_the_last_is_refused(tmp_path, con):
    path = write(tmp_path / "focus.csv", "BilledCost,,ChargePeriodStart,BillingCurrency\n")
    assert refusal(lambda: sniff(path, con)) == f"{path}:1: column 2 of the header has no name"


def test_a_file_whose_first_line_is_blank_has_an_empty_header(tmp_path, con):
    path = write(tmp_path / "focus.csv", "\n" + FOCUS + "\n" + FOCUS_LINE + "\n")
    assert refusal(lambda: sniff(path, con)) == (f"{path}:1: not a billing export gpu-auditor reads (header: ); "
                                                 f"it reads {READS}")


def test_only_the_header_line_is_decoded(tmp_path, con):
    """Later lines are checked as DuckDB reads them: a Latin-1 value on line 2 is no refusal here."""
    path = write(tmp_path / "focus.csv", (FOCUS + "\n").encode() + "1.50,2026-07-01,\u20ac\n".encode("latin-1",
                                                                                                  "replace"))
    assert sniff(path, con).format == "focus-1.0"


@pytest.mark.parametrize(("data", "where", "message"), [
    (b"", "", "the file is empty"),
    (b" \r\n\t\n", "", "the file is empty"),
    (b"\xef\xbb\xbf", "", "the file is empty"),  # a byte order mark and nothing after it
    (b"\xef\xbb\xbf\r\n", "", "the file is empty"),
    (b"\xff\xfe" + FOCUS.encode("utf-16-le"), ":1", "the file is UTF-16; save it as UTF-8"),
    (b"\xfe\xff" + FOCUS.encode("utf-16-be"), ":1", "the file is UTF-16; save it as UTF-8"),
    (b"\xef\xbb\xbf\xff\xfe" + FOCUS.encode("utf-16-le"), ":1", "the file is UTF-16; save it as UTF-8"),
    (FOCUS.encode() + b"\n1,\x00,USD\n", "", "the file is binary, not CSV text"),
    ("Co\u00fbt,Date\n".encode("latin-1"), ":1", "the header is not UTF-8 text; save the file as UTF-8"),
])
def test_what_cannot_be_read_as_csv_text_is_refused(tmp_path, con, data, where, message):
    path = write(tmp_path / "x.csv", data)
    assert refusal(lambda: sniff(path, con)) == f"{path}{where}: {message}"
    packed = write(tmp_path / "x.csv.gz", gzip.compress(data))
    assert refusal(lambda: sniff(packed, con)) == f"{packed}{where}: {message}"


def test_a_nul_past_the_first_64_kib_is_left_to_the_reader(tmp_path, con):
    """The header check reads the first 64 KiB (1 << 16 bytes) only."""
    body = (FOCUS_LINE + "\n").encode()
    lines = (1 << 16) // len(body) + 1
    path = write(tmp_path / "focus.csv", (FOCUS + "\n").encode() + body * lines + b"\x00\n")
    assert sniff(path, con).format == "focus-1.0"
    head = (FOCUS + "\n").encode() + body * 10
    at_edge = write(tmp_path / "edge.csv", head + b"x" * ((1 << 16) - len(head) - 1) + b"\x00")
    assert refusal(lambda: sniff(at_edge, con)) == f"{at_edge}: the file is binary, not CSV text"


@pytest.mark.parametrize(("data", "message"), [
    (gzip.compress(b"BilledCost,ChargePeriodStart\n" * 50, mtime=0)[:-12],
     "Compressed file ended before the end-of-stream marker was reached"),
    (b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"not deflate data at all", "Error -3 while decompressing data: invalid "
     "block type"),
], ids=["cut-short", "not-deflate"])
def test_a_damaged_gzip_file_is_named(tmp_path, con, data, message):
    path = write(tmp_path / "cur.csv.gz", data)
    assert refusal(lambda: sniff(path, con)) == f"{path}: cannot read the file: {message}"


def test_a_file_that_cannot_be_opened_is_named(tmp_path, con):
    folder = tmp_path / "x.csv"
    folder.mkdir()
    assert refusal(lambda: detect._read_header(folder, False)) == (
        f"{folder}: cannot read the file: [Errno 21] Is a directory: '{folder}'")


@pytest.mark.parametrize(("delim", "name"), [(";", "semicolons"), ("\t", "tabs"), ("|", "pipes")])
def test_a_file_of_another_delimiter_is_named_for_it(tmp_path, con, delim, name):
    path = write(tmp_path / "focus.csv", FOCUS.replace(",", delim) + "\n" + FOCUS_LINE.replace(",", delim) + "\n")
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}:1: the columns are separated by {name}; gpu-auditor reads comma-separated files: export the file "
        "as CSV with commas")


def test_a_one_column_file_of_no_format_in_any_delimiter_is_unknown(tmp_path, con):
    path = write(tmp_path / "x.csv", "a;b;c\n1;2;3\n")
    assert refusal(lambda: sniff(path, con)) == (f"{path}:1: not a billing export gpu-auditor reads (header: a;b;c); "
                                                 f"it reads {READS}")


def test_a_file_of_two_columns_joined_by_another_delimiter_is_not_taken_for_it(tmp_path, con):
    """Only a header read as one column is split again: a comma-separated header of other columns is unknown."""
    path = write(tmp_path / "x.csv", "BilledCost;ChargePeriodStart;BillingCurrency,x\n")
    assert refusal(lambda: sniff(path, con)).startswith(f"{path}:1: not a billing export gpu-auditor reads")


def test_an_unknown_header_is_shown_clipped(tmp_path, con):
    long = "c" * 41
    path = write(tmp_path / "x.csv", ",".join(["a", "b" * 40, long, "d", "e", "f", "g"]) + "\n")
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}:1: not a billing export gpu-auditor reads (header: a, {'b' * 40}, {'c' * 40}..., d, e, f, ...); "
        f"it reads {READS}")
    six = write(tmp_path / "six.csv", "a,b,c,d,e,f\n")
    assert refusal(lambda: sniff(six, con)) == (
        f"{six}:1: not a billing export gpu-auditor reads (header: a, b, c, d, e, f); it reads {READS}")


def test_a_csv_near_miss_names_its_header_line(tmp_path, con):
    path = write(tmp_path / "cur.csv", "lineItem/UsageType,bill/PayerAccountId,lineItem/UnblendedCost\n")
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}:1: looks like an AWS CUR but has no lineItem/UsageStartDate column (the start time); gpu-auditor "
        "reads such an export only with that column")


# --- sniff: Parquet, JSON, Avro -------------------------------------------------------------------------------------

def parquet(con, path: Path, select: str) -> Path:
    con.execute(f"COPY (SELECT {select}) TO '{path}' (FORMAT parquet)")
    return path


def test_a_parquet_file_with_nested_fields(tmp_path, con):
    path = parquet(con, tmp_path / "gcp.parquet",
                   "1.5::DOUBLE AS cost, 'USD' AS currency, TIMESTAMP '2026-07-01' AS usage_start_time, "
                   "{'id': 'A1', 'description': 'GPU'} AS sku, "
                   "{'labels': {'k': 'v'}} AS \"pro ject\"")
    s = sniff(path, con)
    assert (s.container, s.compression, s.format, s.has_bom, s.serial) == ("parquet", "none", "gcp-billing", False,
                                                                           False)
    assert s.columns == ("cost", "currency", "usage_start_time", "sku", "sku.id", "sku.description", "pro ject",
                         "pro ject.labels", "pro ject.labels.k")
    assert s.fields == (("sku.id", '"sku"."id"'), ("sku.description", '"sku"."description"'),
                        ("pro ject.labels", '"pro ject"."labels"'), ("pro ject.labels.k", '"pro ject"."labels"."k"'))
    assert s.types == (("cost", "DOUBLE"), ("currency", "VARCHAR"), ("usage_start_time", "TIMESTAMP"),
                       ("sku", "STRUCT(id VARCHAR, description VARCHAR)"), ("sku.id", "VARCHAR"),
                       ("sku.description", "VARCHAR"), ("pro ject", "STRUCT(labels STRUCT(k VARCHAR))"),
                       ("pro ject.labels", "STRUCT(k VARCHAR)"), ("pro ject.labels.k", "VARCHAR"))


def test_a_parquet_cur_2_and_its_maps(tmp_path, con):
    path = parquet(con, tmp_path / "cur2.parquet",
                   "1.5::DOUBLE AS line_item_unblended_cost, TIMESTAMP '2026-07-01' AS line_item_usage_start_date, "
                   "'Acme' AS bill_payer_account_name, MAP {'team': 'nlp'} AS resource_tags")
    s = sniff(path, con)
    assert (s.format, s.columns, s.fields) == ("aws-cur2", ("line_item_unblended_cost", "line_item_usage_start_date",
                                                            "bill_payer_account_name", "resource_tags"), ())
    assert s.types[-1] == ("resource_tags", "MAP(VARCHAR, VARCHAR)")


def test_two_parquet_columns_of_one_name_are_refused_by_their_places(tmp_path, con):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "focus.parquet"
    cost = pa.array([1.5])
    nested = pa.array([{"BilledCost": 1.0, "x": {"BilledCost": 2.0}}])
    table = pa.table([nested, cost, pa.array(["2026-07-01"]), cost, pa.array(["USD"])],
                     names=["s", "BilledCost", "ChargePeriodStart", "BilledCost", "BillingCurrency"])
    pq.write_table(table, path)
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}: columns 2 and 4 are both named 'BilledCost'; gpu-auditor cannot tell which to read (remove or "
        "rename one)")


@pytest.mark.parametrize(("header", "message"), [
    # DuckDB's own words for these named its struct_pack, and no line
    (CUR + ",lineItem/UnblendedCost", "columns 3 and 5 are both named 'lineItem/UnblendedCost'"),
    (CUR + ",pricing/term,pricing/term", "columns 5 and 6 are both named 'pricing/term'"),  # a column no reader reads
    # one tag's column twice (two AWS tags in case read apart: test_readers_cur_lines.py), other columns in case
    (CUR + ",resource_tags_user_team,resource_tags_user_team",
     "columns 5 and 6 are both named 'resource_tags_user_team'"),
    (CUR + ",pricing/term,Pricing/Term", "columns 5 and 6 are named 'pricing/term' and 'Pricing/Term', one name in "
                                         "any case"),
])
def test_a_csv_header_naming_a_column_twice_is_refused_on_its_line(tmp_path, con, header, message):
    extra = header.count(",") - CUR.count(",")
    path = write(tmp_path / "cur.csv", f"{header}\n{CUR_LINE}{',x' * extra}\n")
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}:1: {message}; gpu-auditor cannot tell which to read (remove or rename one)")


def test_parquet_and_json_columns_named_in_two_cases_are_refused(tmp_path, con):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "focus.parquet"
    pq.write_table(pa.table({"BilledCost": [1.5], "ChargePeriodStart": ["2026-07-01"], "billedcost": [9.5],
                             "BillingCurrency": ["USD"]}), path)
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}: columns 1 and 3 are named 'BilledCost' and 'billedcost', one name in any case; gpu-auditor cannot "
        "tell which to read (remove or rename one)")
    # DuckDB reads a second key in another case as `Cost_1`, and the first as the cost: the first line's keys
    path = write(tmp_path / "gcp.jsonl", '{"cost": 1.5, "currency": "USD", "usage_start_time": "2026-07-01", '
                                         '"sku": {"description": "x"}, "Cost": 1000}\n')
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}:1: columns 1 and 5 are named 'cost' and 'Cost', one name in any case; gpu-auditor cannot tell which "
        "to read (remove or rename one)")


@pytest.mark.parametrize("container", ["parquet", "json", "csv"])
def test_two_tags_in_case_keep_their_names_and_are_read_by_duckdb_s(tmp_path, con, container):
    """AWS tags `team`, `Team_1` and `Team` are three columns: each keeps its own name, and the one DuckDB reads
    under another (`Team` after `Team_1`: `..._Team_1_1`) is reached by that name (a field)."""
    names = ["BilledCost", "ChargePeriodStart", "BillingCurrency", "resource_tags_user_team",
             "resource_tags_user_Team_1", "resource_tags_user_Team"]
    values = [1.5, "2026-07-01", "USD", "nlp", "x", "vision"]
    path = tmp_path / f"focus.{container}"
    if container == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table([pa.array([v]) for v in values], names=names), path)
    elif container == "json":
        write(path, "{" + ", ".join(f"{json.dumps(n)}: {json.dumps(v)}" for n, v in zip(names, values, strict=True))
              + "}\n")
    else:
        write(path, ",".join(names) + "\n" + ",".join(map(str, values)) + "\n")
    s = sniff(path, con)
    assert (s.format, s.columns) == ("focus-1.0", tuple(names))
    assert s.fields == (("resource_tags_user_Team", '"resource_tags_user_Team_1_1"'),)


def test_json_lines_whose_later_lines_add_keys_are_read_by_every_key(tmp_path, con):
    """The first line's keys are the columns as written; a key only a later line holds is read too, each column
    then by the name DuckDB gives it."""
    first = {"BilledCost": 1.5, "ChargePeriodStart": "2026-07-01", "BillingCurrency": "USD"}
    path = write(tmp_path / "focus.jsonl", json.dumps(first) + "\n" + json.dumps({**first, "x_Team": "nlp"}) + "\n")
    s = sniff(path, con)
    assert (s.format, s.columns, s.fields) == ("focus-1.0", (*first, "x_Team"), ())


def test_columns_that_differ_in_the_case_of_a_letter_beyond_ascii_are_two(tmp_path, con):
    """DuckDB folds the case of ASCII letters alone: `Équipe` and `équipe` are two columns to it, read each by its
    own name (`Team` and `team` would be one, refused above)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "focus.parquet"
    names = ["BilledCost", "ChargePeriodStart", "BillingCurrency", "x_Équipe", "x_équipe"]
    pq.write_table(pa.table([pa.array([v]) for v in (1.5, "2026-07-01", "USD", "nlp", "cv")], names=names), path)
    s = sniff(path, con)
    assert (s.format, s.columns, s.fields) == ("focus-1.0", tuple(names), ())


GCP_LINE = '{"cost": 1.5, "currency": "USD", "usage_start_time": "2026-07-01", "sku": {"description": "x"}}'


@pytest.mark.parametrize("text", [f"[{GCP_LINE}]", f"[\n  {GCP_LINE}\n]\n", "\ufeff  []"])
def test_a_json_array_is_refused_on_its_first_line(tmp_path, con, text):
    """`bq query --format=json` writes one array: it was "not a billing export", or "has no cost column"."""
    path = write(tmp_path / "gcp.json", text.encode())
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}:1: the file is one JSON array; gpu-auditor reads JSON lines, one object a line (BigQuery exports a "
        "table so: bq extract --destination_format NEWLINE_DELIMITED_JSON; or convert it with jq -c '.[]')")


def test_json_lines_with_a_byte_order_mark_or_blank_lines_first_are_json(tmp_path, con):
    for text in ("\ufeff" + GCP_LINE + "\n", "  \n\n" + GCP_LINE + "\n"):
        s = sniff(write(tmp_path / "gcp.jsonl", text.encode()), con)
        assert (s.container, s.format) == ("json", "gcp-billing")


def test_a_json_line_that_is_no_object_is_named(tmp_path, con):
    path = write(tmp_path / "gcp.jsonl", f"\ufeff{GCP_LINE}\n\n{GCP_LINE}\n42\n".encode())  # the BOM's line is one
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}:4: the line is not a JSON object; a JSON lines file holds one object a line")


def test_a_parquet_column_named_like_a_nested_field_is_no_twin(tmp_path, con):
    """A STRUCT's fields (and theirs) are skipped over when the top-level names are listed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "focus.parquet"
    nested = pa.array([{"BilledCost": 1.0, "x": {"BillingCurrency": "EUR", "ChargePeriodStart": "y"}, "z": 1}])
    table = pa.table([nested, pa.array([1.5]), pa.array(["2026-07-01"]), pa.array(["USD"])],
                     names=["s", "BilledCost", "ChargePeriodStart", "BillingCurrency"])
    pq.write_table(table, path)
    s = sniff(path, con)
    assert s.format == "focus-1.0"
    assert s.columns == ("s", "s.BilledCost", "s.x", "s.x.BillingCurrency", "s.x.ChargePeriodStart", "s.z",
                         "BilledCost", "ChargePeriodStart", "BillingCurrency")
    assert detect._parquet_names(path, con) == ["s", "BilledCost", "ChargePeriodStart", "BillingCurrency"]


def test_a_damaged_parquet_file_is_named_without_its_path_twice(tmp_path, con):
    path = write(tmp_path / "focus.parquet", b"PAR1" + b"\x00" * 20)
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}: cannot read the Parquet file (cut short or damaged?): No magic bytes found at end of file")


def test_a_json_file_with_nested_fields(tmp_path, con):
    doc = {"cost": 1.5, "currency": "USD", "usage_start_time": "2026-07-01 00:00:00",
           "sku": {"id": "A1", "description": "GPU"}}
    path = write(tmp_path / "gcp.jsonl", json.dumps(doc) + "\n" + json.dumps(doc) + "\n")
    s = sniff(path, con)
    assert (s.container, s.compression, s.format, s.has_bom, s.serial) == ("json", "none", "gcp-billing", False,
                                                                           False)
    assert s.columns == ("cost", "currency", "usage_start_time", "sku", "sku.id", "sku.description")
    assert s.fields == (("sku.id", '"sku"."id"'), ("sku.description", '"sku"."description"'))
    assert dict(s.types)["sku"] == "STRUCT(id VARCHAR, description VARCHAR)"
    assert dict(s.types)["cost"] == "DOUBLE"


def test_a_json_file_that_starts_with_white_space(tmp_path, con):
    path = write(tmp_path / "focus.json", "\n " + json.dumps({"BilledCost": 1.5, "ChargePeriodStart": "2026-07-01",
                                                              "BillingCurrency": "USD"}) + "\n")
    s = sniff(path, con)
    assert (s.container, s.format, s.columns) == ("json", "focus-1.0", ("BilledCost", "ChargePeriodStart",
                                                                        "BillingCurrency"))


def test_a_json_file_that_is_no_json_is_named(tmp_path, con):
    """Named once, with the line DuckDB names, and DuckDB's reason without the file's name again."""
    path = write(tmp_path / "focus.json", '{"BilledCost": 1.5, \n')
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}:2: cannot read the JSON file (cut short or damaged?): Malformed JSON at byte 22: unexpected end "
        "of data")


def test_duckdb_s_refusal_names_the_file_once_with_its_line():
    path = Path("/data/focus.json")
    error = detect._unreadable("JSON", path, 'Invalid Input Error: Malformed JSON in file "/data/focus.json", at byte '
                                             "3 in line 7: unexpected character.\nthe rest of the message")
    assert (str(error), error.line) == ("/data/focus.json:7: cannot read the JSON file (cut short or damaged?): "
                                        "Malformed JSON at byte 3: unexpected character", 7)
    error = detect._unreadable("Parquet", path, "IO Error: No magic bytes found at end of file '/data/focus.json'")
    assert (str(error), error.line) == ("/data/focus.json: cannot read the Parquet file (cut short or damaged?): "
                                        "No magic bytes found at end of file", None)
    assert str(detect._unreadable("Parquet", path, " \n")) == (
        "/data/focus.json: cannot read the Parquet file (cut short or damaged?): unknown error")


def test_an_unknown_parquet_file_names_no_line(tmp_path, con):
    path = parquet(con, tmp_path / "x.parquet", "1 AS a, 2 AS b")
    assert refusal(lambda: sniff(path, con)) == (f"{path}: not a billing export gpu-auditor reads (header: a, b); "
                                                 f"it reads {READS}")
    near = parquet(con, tmp_path / "near.parquet", "1 AS line_item_usage_type, 2 AS bill_payer_account_id, "
                   "3 AS line_item_unblended_cost")
    assert refusal(lambda: sniff(near, con)) == (
        f"{near}: looks like an AWS CUR but has no line_item_usage_start_date column (the start time); gpu-auditor "
        "reads such an export only with that column")


def test_a_one_column_parquet_file_is_not_split_as_a_delimited_header(tmp_path, con):
    path = parquet(con, tmp_path / "x.parquet", "1 AS \"BilledCost;ChargePeriodStart;BillingCurrency\"")
    assert "not a billing export" in refusal(lambda: sniff(path, con))


def test_an_avro_file(con):
    s = sniff(AVRO, con)
    assert (s.container, s.compression, s.format, s.has_bom, s.serial) == ("avro", "none", "gcp-billing", False,
                                                                           False)
    assert {"cost", "currency", "usage_start_time", "sku", "sku.description"} <= set(s.columns)
    assert ("sku.description", '"sku"."description"') in s.fields
    assert dict(s.types)["cost"] == "DOUBLE"


# --- flatten and struct_fields --------------------------------------------------------------------------------------

def test_struct_fields_split_at_top_level_commas_only():
    assert struct_fields('id VARCHAR, "na""me" VARCHAR, "a b" DECIMAL(12,2), usage STRUCT(a INTEGER, b INTEGER[]), '
                         "m MAP(VARCHAR, VARCHAR), l INTEGER[]") == [
        ("id", "VARCHAR"), ('na"me', "VARCHAR"), ("a b", "DECIMAL(12,2)"),
        ("usage", "STRUCT(a INTEGER, b INTEGER[])"), ("m", "MAP(VARCHAR, VARCHAR)"), ("l", "INTEGER[]")]
    assert struct_fields("TAX DOUBLE,X STRUCT(XA INTEGER, XB VARCHAR),b VARCHAR") == [
        ("TAX", "DOUBLE"), ("X", "STRUCT(XA INTEGER, XB VARCHAR)"), ("b", "VARCHAR")]
    assert struct_fields("only") == []  # no type: not a field
    assert struct_fields("") == []


def test_flatten_dots_struct_fields_and_leaves_lists_and_maps_whole():
    assert flatten([("TAX", "DOUBLE"), ("X", "VARCHAR")]) == (["TAX", "X"], [], [("TAX", "DOUBLE"), ("X", "VARCHAR")])
    names, fields, types = flatten([("a", "INTEGER"), ("s", 'STRUCT("x y" INTEGER, t STRUCT(u VARCHAR))'),
                                    ("l", "STRUCT(a INTEGER)[]"), ('q"t', "VARCHAR"), ("m", "MAP(VARCHAR, VARCHAR)")])
    assert names == ["a", "s", "s.x y", "s.t", "s.t.u", "l", 'q"t', "m"]
    assert fields == [("s.x y", '"s"."x y"'), ("s.t", '"s"."t"'), ("s.t.u", '"s"."t"."u"'), ('q"t', '"q""t"')]
    assert types == [("a", "INTEGER"), ("s", 'STRUCT("x y" INTEGER, t STRUCT(u VARCHAR))'), ("s.x y", "INTEGER"),
                     ("s.t", "STRUCT(u VARCHAR)"), ("s.t.u", "VARCHAR"), ("l", "STRUCT(a INTEGER)[]"),
                     ('q"t', "VARCHAR"), ("m", "MAP(VARCHAR, VARCHAR)")]


# --- long lines -----------------------------------------------------------------------------------------------------

def test_has_long_line_looks_at_every_stretch_of_a_block(tmp_path):
    path = tmp_path / "x.csv"
    for data, block, long in [
        (b"abc\nefgh", 4, True),  # the last whole stretch, [4, 8), has no line break
        (b"abc\nefg\n", 4, False),
        (b"abcdefg\n", 4, True),  # [0, 4)
        (b"abc\nefg\nhij", 4, False),  # the tail past the last whole stretch is not looked at
        (b"\nabc\nefg", 4, False),  # a stretch that starts with its line break
        (b"ab\nxxxx\nab", 4, False),  # a line of a block's length that fills no whole stretch (they start at 0, 4, ...)
        (b"abcdefg", 4, False),  # under two blocks
        (b"a\nbcdefgh\ni", 4, True),  # [4, 8) lies inside the long line
    ]:
        path.write_bytes(data)
        assert has_long_line(path, block) is long, data
    path.write_bytes(b"abc\refg\rhij\r")
    assert has_long_line(path, 4, eol=b"\r") is False and has_long_line(path, 4) is True


def test_has_long_line_by_default_looks_for_a_mib_without_a_line_break(tmp_path):
    path = tmp_path / "x.csv"
    path.write_bytes(b"a\n" * (1 << 20) + b"x" * ((1 << 20) - 1) + b"\n")  # 3 MiB, no 1 MiB stretch lacks one
    assert has_long_line(path) is False
    path.write_bytes(b"a\n" * (1 << 19) + b"x" * ((1 << 20) + 1) + b"\n")
    assert has_long_line(path) is True
    path.write_bytes(b"x" * ((2 << 20) - 1))  # under two MiB: never
    assert has_long_line(path) is False


def test_first_line_over_counts_lines_to_the_long_one(tmp_path):
    path = tmp_path / "x.csv"
    for data, limit, block, line in [
        (b"ab\ncd\n" + b"x" * 12 + b"\nef\n", 10, 4, 3),
        (b"ab\ncd\n" + b"x" * 10 + b"\nef\n", 10, 4, None),  # exactly the limit
        (b"ab\ncd\n" + b"x" * 11 + b"\nef\n", 10, 4, 3),
        (b"x" * 30, 10, 4, 1),  # no line break at all
        (b"ab\n" + b"x" * 30, 10, 4, 2),  # the last line, unended
        (b"ab\n" + b"x" * 10, 10, 4, None),
        (b"ab\n" + b"x" * 11, 10, 4, 2),
        (b"xxxx\nab\ncd\n", 3, 4, 1),  # over a limit shorter than a stretch: found in the first stretch only
        (b"a\n" * 10 + b"wxyz", 3, 4, 11),  # in the last whole stretch only, [20, 24)
        (b"a\n" * 10 + b"xyz", 2, 4, None),  # over the limit, but in no whole stretch
        (b"a\nbcdef\ngh\n", 3, 4, None),  # the same: each stretch it touches holds a line break
        (b"\n" + b"y" * 20, 10, 4, 2),  # after a first line that is empty
        (b"a\n" + b"x" * 8 + b"\n" + b"y" * 8 + b"\n" + b"z" * 11 + b"\n", 10, 4, 4),  # past shorter long stretches
        (b"a\n" * 6 + b"x" * 9 + b"\n" + b"a\n" * 3, 8, 4, 7),
        (b"x" * 5 + b"\n" + b"y" * 20, 10, 4, 2),
        (b"abc\nxyz" + b"y" * 20, 10, 16, None),  # no stretch of 16 bytes without a line break: not looked at
        (b"\n" * 4 + b"y" * 20, 10, 4, 5),
    ]:
        path.write_bytes(data)
        assert first_line_over(path, limit, block) == line, data
    path.write_bytes(b"ab\rcd\r" + b"x" * 12 + b"\ref\r")
    assert first_line_over(path, 10, 4, eol=b"\r") == 3
    assert first_line_over(path, 10, 4) == 1  # looked for as LF, the file is one line
    path.write_bytes(b"ab\r\n" + b"x" * 12 + b"\r\n")
    assert first_line_over(path, 10, 4) == 2


def test_first_line_over_counts_lines_before_the_long_one_past_8_mib(tmp_path):
    """The line breaks before the long line are counted in 8 MiB slices: the count is the same across them."""
    path = tmp_path / "x.csv"
    short = b"a\n" * ((9 << 20) // 2)  # 4,718,592 lines over 9 MiB
    path.write_bytes(short + b"x" * 40 + b"\n")
    assert first_line_over(path, 30, block=16) == (9 << 20) // 2 + 1
    assert first_line_over(path, 40, block=16) is None


def test_gzip_line_over_names_the_first_line_longer_than_the_limit(tmp_path):
    path = tmp_path / "x.csv.gz"
    for data, limit, line in [
        (b"a,b\n1,2\n" + b"x" * 50 + b"\n3,4\n", 20, 3),
        (b"a\n" * 10, 20, None),
        (b"a\n1\n" + b"y" * 30, 20, 3),  # unended
        (b"ab" * 5 + b"\n", 5, 1),
        (b"a\n" + b"x" * 20 + b"\n", 20, None),  # exactly the limit
        (b"x" * 20 + b"\na\n", 20, None), (b"x" * 21 + b"\na\n", 20, 1),  # the first line
        (b"a\n" + b"x" * 20, 20, None), (b"a\n" + b"x" * 21, 20, 2),  # the last line, unended
        (b"a\n" + b"x" * 21 + b"\n", 20, 2),
        (b"a\n" + b"x" * 10 + b"\n" + b"y" * 10 + b"\n" + b"z" * 21 + b"\nb\n", 20, 4),
        (b"", 20, None),
    ]:
        path.write_bytes(gzip.compress(data))
        for block in (3, 7, 8, 21, 64, 1 << 20):
            assert gzip_line_over(path, limit, block) == line, (data[:12], block)
    path.write_bytes(gzip.compress(b"a\nb\n") + gzip.compress(b"c\n" + b"z" * 100 + b"\n"))
    assert gzip_line_over(path, 20, 3) == gzip_line_over(path, 20) == 4
    path.write_bytes(gzip.compress(b"a\n" * 10)[:-6])  # cut short: not this check's to name
    assert gzip_line_over(path, 20) is None
    path.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"no deflate")
    assert gzip_line_over(path, 20) is None
    assert gzip_line_over(tmp_path / "missing.csv.gz", 20) is None


def test_gzip_line_over_by_default_names_a_line_over_2_000_000_bytes(tmp_path):
    path = tmp_path / "x.csv.gz"
    path.write_bytes(gzip.compress(b"a\n" + b"x" * MAX_LINE + b"\nb\n"))
    assert gzip_line_over(path) is None
    path.write_bytes(gzip.compress(b"a\n" + b"x" * (MAX_LINE + 1) + b"\nb\n"))
    assert gzip_line_over(path) == 2
    assert MAX_LINE == 2_000_000


def cur_file(path: Path, lines: list[bytes], eol: bytes = b"\n") -> Path:
    path.write_bytes(eol.join([CUR.encode(), *lines, b""]))
    return path


def test_a_plain_csv_of_2_mib_with_a_line_of_a_mib_is_read_serially(tmp_path, con):
    """A stretch of a MiB without a line break: DuckDB's single-threaded reader (Sniffed.serial)."""
    value = b"x" * 1_900_000  # from byte 700,000 or so: it holds the whole stretch [1 MiB, 2 MiB)
    path = cur_file(tmp_path / "cur.csv", [b"li-1,2026-07-01T00:00:00Z,1.50,USD"] * 20_000 +
                    [b"li-2,2026-07-01T00:00:00Z,1.50," + value])
    assert path.stat().st_size >= 2 << 20
    s = sniff(path, con)
    assert (s.serial, s.format, s.compression) == (True, "aws-cur", "none")
    short = cur_file(tmp_path / "short.csv", [b"li-1,2026-07-01T00:00:00Z,1.50,USD"] * 80_000)
    assert short.stat().st_size >= 2 << 20 and sniff(short, con).serial is False


def test_a_line_over_the_limit_is_refused_with_its_number(tmp_path, con):
    path = cur_file(tmp_path / "cur.csv", [b"li-1,2026-07-01T00:00:00Z,1.50,USD"] * 3 +
                    [b"li-2,2026-07-01T00:00:00Z,1.50," + b"x" * (MAX_LINE + 200_000)])
    assert path.stat().st_size >= 2 << 20
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}:5: cannot read the file: the line is longer than 2,000,000 bytes, the longest line gpu-auditor reads")
    under = cur_file(tmp_path / "under.csv", [b"li-1,2026-07-01T00:00:00Z,1.50,USD"] * 20_000 +
                     [b"li-2,2026-07-01T00:00:00Z,1.50," + b"x" * (MAX_LINE - 31)])
    assert sniff(under, con).serial is True  # its line of 2,000,000 bytes (bytes 700,081 on) is read


@pytest.mark.parametrize("eol", [b"\r", b"\r\n"])
def test_a_file_of_2_mib_whose_lines_end_in_cr_is_not_one_long_line(tmp_path, con, eol):
    """Excel for Mac ends lines with CR alone: the long-line checks look for what ends the file's lines."""
    line = b"li-1,2026-07-01T00:00:00Z,1.50,USD"
    count = ((2 << 20) - len(CUR) - len(eol)) // (len(line) + len(eol))
    path = cur_file(tmp_path / "cur.csv", [line] * count, eol)
    path.write_bytes(path.read_bytes() + b"0" * ((2 << 20) - path.stat().st_size))  # exactly 2 MiB
    assert path.stat().st_size == 2 << 20
    s = sniff(path, con)
    assert (s.serial, s.format) == (False, "aws-cur")


def test_a_gzip_file_is_not_searched_for_long_lines(tmp_path, con):
    path = tmp_path / "cur.csv.gz"
    path.write_bytes(gzip.compress(CUR.encode() + b"\nli-1,2026-07-01T00:00:00Z,1.50," + b"x" * (MAX_LINE + 10)
                                   + b"\n"))
    s = sniff(path, con)
    assert (s.compression, s.serial) == ("gzip", True)  # its long line is named when DuckDB fails on it


def test_a_file_whose_lines_end_in_cr_names_its_long_line(tmp_path, con):
    path = cur_file(tmp_path / "cur.csv", [b"li-1,2026-07-01T00:00:00Z,1.50,USD"] * 3 +
                    [b"li-2,2026-07-01T00:00:00Z,1.50," + b"x" * (MAX_LINE + 200_000)], b"\r")
    assert refusal(lambda: sniff(path, con)) == (
        f"{path}:5: cannot read the file: the line is longer than 2,000,000 bytes, the longest line gpu-auditor reads")


def test_a_large_parquet_file_is_not_searched_for_long_lines(tmp_path, con):
    """Only a plain CSV is: 3 MB of a Parquet file without a byte 0x0A is no line of text."""
    path = tmp_path / "focus.parquet"
    con.execute(f"""COPY (SELECT 1.5 AS BilledCost, '2026-07-01' AS ChargePeriodStart, 'USD' AS BillingCurrency,
        repeat('x', 3000000) AS x_Note) TO '{path}' (FORMAT parquet, COMPRESSION uncompressed)""")
    assert path.stat().st_size > 2 << 20 and b"x" * MAX_LINE in path.read_bytes()
    s = sniff(path, con)
    assert (s.container, s.format, s.serial) == ("parquet", "focus-1.0", False)

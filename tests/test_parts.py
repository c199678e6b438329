"""A folder of many small files of one export (the parts AWS writes a CUR in, daily files) is read as one scan
(tables/store.py: _batches, _read), not a query per file. These tests hold such a read to the same files read one
at a time: every sum, count and time, each file's own figures, the line each `costs` row names, and the
diagnosis of a bad or empty part, on public samples cut into parts, in CSV, gzip CSV, newline JSON and Parquet."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import duckdb
import pytest

from auditor.errors import InputError
from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]
SAMPLES = ["aws_cur_legacy/focus_converters__sample-anonymous-aws-export-dataset.csv",
           "focus/FOCUS-Sample-Data__FOCUS-1.0__focus_sample.csv"]
# What the summaries group by (x_SourceFile aside: a row of a scan of parts is named by its first line's file).
KEYS = ("date_trunc('day', ChargePeriodStart), BillingCurrency, ResourceId, x_UsageType, x_CostCategory, "
        "ChargeCategory, PricingCategory, x_TransferKind, x_GpuModel, x_GpuCount, x_InstanceType, RegionId, "
        "SubAccountId, CAST(Tags AS VARCHAR)")


def cut(source: Path, folder: Path, parts: int, kind: str = "csv") -> list[Path]:
    """The rows of a CSV export cut into `parts` files with its header, in order, as `kind` (csv, gz,
    parquet)."""
    with source.open(newline="", encoding="utf-8-sig") as f:
        header, *rows = list(csv.reader(f))
    folder.mkdir(parents=True)
    size = -(-len(rows) // parts)
    out = []
    for i in range(parts):
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows[i * size:(i + 1) * size])
        path = folder / f"part-{i:05d}.csv"
        if kind == "gz":
            path = path.with_suffix(".csv.gz")
            path.write_bytes(gzip.compress(buf.getvalue().encode()))
        else:
            path.write_text(buf.getvalue(), encoding="utf-8")
        if kind == "parquet":
            parquet = path.with_suffix(".parquet")
            duckdb.connect().execute(f"COPY (SELECT * FROM read_csv('{path}', all_varchar = true, header = true, "
                                     "nullstr = ['', 'NULL'])) "
                                     f"TO '{parquet}' (FORMAT parquet)")
            path.unlink()
            path = parquet
        out.append(path)
    return out


def sums(store: Store) -> list[tuple]:
    rows = store.con.execute(
        f"SELECT {KEYS}, sum(BilledCost), sum(EffectiveCost), sum(ListCost), sum(ConsumedQuantity), "
        "min(ChargePeriodStart), max(ChargePeriodEnd), sum(x_Lines) FROM costs GROUP BY ALL").fetchall()
    return sorted(rows, key=repr)


def one_at_a_time(paths: list[Path]) -> Store:
    store = Store()
    for path in paths:
        store.load_file(path)
    return store


def counted_once(export: Path, parts: list[Path], copy: Path) -> None:
    """The export read with a re-delivered copy of one part beside it: the parts kept, the copy named in a warning
    and left out, every sum that of the parts alone."""
    store = Store()
    assert [s.path for s in store.load_billing([export])] == [str(p) for p in parts]
    assert any("re-delivered" in w and str(copy) in w for w in store.warnings)
    assert sums(store) == sums(one_at_a_time(parts))


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["csv", "gz", "parquet"])
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: Path(p).parent.name)
def test_parts_read_as_one_scan_equal_the_parts_read_one_by_one(sample, kind, tmp_path, locate):
    parts = cut(locate(sample), tmp_path / "export", 7, kind)
    together = Store()
    sources = together.load_billing([tmp_path / "export"])
    assert [s.path for s in sources] == [str(p) for p in parts]
    assert {s.part_of for s in sources} != {None} and len(together.parts) == 1  # one scan, not seven
    alone = one_at_a_time(parts)
    assert sums(together) == sums(alone)
    # Fewer rows than the parts make one by one: a resource's day is one row, whichever parts hold its lines.
    count = "SELECT count(*) FROM costs"
    assert together.con.execute(count).fetchone()[0] <= alone.con.execute(count).fetchone()[0]
    # Each file's own figures, as read alone.
    for source, single in zip(sources, alone.sources, strict=True):
        for key in ("rows", "period_start", "period_end", "billed_cost", "effective_cost"):
            assert source.stats[key] == single.stats[key], (source.path, key)
    # The figures of the scan are those of its files together.
    [scan] = together.parts.values()
    assert scan["files"] == [str(p) for p in parts]
    assert scan["stats"]["rows"] == sum(s.rows for s in sources)
    total = dict(alone.con.execute("SELECT BillingCurrency, sum(BilledCost) FROM costs GROUP BY 1").fetchall())
    assert scan["stats"]["billed_cost"] == total
    # Every row names a line of its own file that is its first: same day, resource and usage type.
    lines = together.lines()
    assert lines.execute(
        "SELECT count(*) FROM costs c LEFT JOIN lines l USING (x_SourceFile, x_SourceRow) WHERE l.x_SourceRow IS NULL "
        "OR l.ResourceId IS DISTINCT FROM c.ResourceId OR l.x_UsageType IS DISTINCT FROM c.x_UsageType "
        "OR date_trunc('day', l.ChargePeriodStart) <> date_trunc('day', c.ChargePeriodStart)").fetchone()[0] == 0


def test_a_bad_line_in_one_part_is_named_by_its_file_and_line(tmp_path, locate):
    parts = cut(locate(SAMPLES[1]), tmp_path / "export", 5)
    text = parts[3].read_text(encoding="utf-8").splitlines(keepends=True)
    header = next(csv.reader([text[0]]))
    row = next(csv.reader([text[10]]))
    row[header.index("BilledCost")] = "twelve"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(row)
    text[10] = buf.getvalue()
    parts[3].write_text("".join(text), encoding="utf-8")
    with pytest.raises(InputError) as e:
        Store().load_billing([tmp_path / "export"])
    assert e.value.path == str(parts[3]) and e.value.line == 11 and e.value.column == "BilledCost"


def test_an_empty_part_is_named(tmp_path, locate):
    parts = cut(locate(SAMPLES[1]), tmp_path / "export", 4)
    parts[2].write_text(parts[2].read_text(encoding="utf-8").splitlines(keepends=True)[0], encoding="utf-8")
    with pytest.raises(InputError, match="header but no billing lines") as e:
        Store().load_billing([tmp_path / "export"])
    assert e.value.path == str(parts[2])


@pytest.mark.heavy
def test_a_part_delivered_twice_in_the_same_folder_is_counted_once(tmp_path, locate):
    """A second download saved beside the first (a later copy with a few lines more): the scan finds lines two
    files share, reads the files one by one, and the re-delivery is counted once, from the later copy."""
    parts = cut(locate(SAMPLES[0]), tmp_path / "export", 3)
    lines = parts[1].read_text(encoding="utf-8").splitlines(keepends=True)
    copy = tmp_path / "export" / "part-00001 (1).csv"
    copy.write_text("".join(lines[:-3]), encoding="utf-8")  # a copy cut short: not byte-identical
    counted_once(tmp_path / "export", parts, copy)


@pytest.mark.heavy
def test_a_parquet_part_delivered_again_with_its_lines_elsewhere_is_counted_once(tmp_path, locate):
    """Shared lines are the same lines wherever they stand in each file: a Parquet copy of a part without its first
    lines, so that every line it shares stands elsewhere, is found as a re-delivery, and counted once."""
    parts = cut(locate(SAMPLES[0]), tmp_path / "export", 3, "parquet")
    copy = tmp_path / "export" / "part-00001 (1).parquet"
    duckdb.connect().execute(f"COPY (SELECT * EXCLUDE (file_row_number) FROM read_parquet('{parts[1]}', "
                             "file_row_number = true) WHERE file_row_number >= 3 ORDER BY file_row_number) "
                             f"TO '{copy}' (FORMAT parquet)")
    counted_once(tmp_path / "export", parts, copy)


@pytest.mark.heavy
def test_a_scan_out_of_memory_with_its_line_hashes_is_made_again_without_them(tmp_path, locate, monkeypatch):
    """DuckDB cannot spill a list to disk: a scan whose groups' listed line hashes run out of memory is made again
    without them, and its files are asked whether two share a line. Still one scan with the same rows; and a
    re-delivered part is still found."""
    from auditor.tables import store as store_module

    made = store_module.scan_rollup_sql
    listed: list[bool] = []

    def scan(*args, **kwargs):
        listed.append(kwargs["listed"])
        sql = made(*args, **kwargs)
        # the listed scan as a list no memory holds
        return sql._replace(sets="SELECT list(range) AS l FROM range(400000000)") if kwargs["listed"] else sql

    monkeypatch.setattr(store_module, "scan_rollup_sql", scan)
    monkeypatch.setenv("GPU_AUDITOR_MEMORY_LIMIT", "64MB")
    parts = cut(locate(SAMPLES[0]), tmp_path / "export", 3, "gz")
    store = Store()
    sources = store.load_billing([tmp_path / "export"])
    assert listed == [True, False]
    assert all(s.part_of for s in sources) and len(store.parts) == 1
    assert sums(store) == sums(one_at_a_time(parts))
    copy = tmp_path / "export" / "part-00001 (1).csv.gz"
    copy.write_bytes(gzip.compress(b"".join(gzip.decompress(parts[1].read_bytes()).splitlines(keepends=True)[:-2])))
    counted_once(tmp_path / "export", parts, copy)


def test_a_line_twice_in_one_part_is_no_line_two_parts_share(tmp_path, locate):
    """The same line twice in one file (two charges alike) is read as it is: the scan stays one, and counts both."""
    parts = cut(locate(SAMPLES[1]), tmp_path / "export", 3)
    lines = parts[1].read_text(encoding="utf-8").splitlines(keepends=True)
    parts[1].write_text("".join(lines[:3] + lines[2:]), encoding="utf-8")
    store = Store()
    sources = store.load_billing([tmp_path / "export"])
    assert all(s.part_of for s in sources) and len(store.parts) == 1
    assert sources[1].rows == len(lines)  # the header out, the line in twice
    assert sums(store) == sums(one_at_a_time(parts))
    assert not any("re-delivered" in w for w in store.warnings)


@pytest.mark.heavy
def test_exports_in_folders_of_their_own_are_scans_of_their_own(tmp_path, locate):
    """Two deliveries of one month, each in its folder (as AWS writes a re-delivered CUR): each is read as one
    scan, and the later is kept whole."""
    first = cut(locate(SAMPLES[0]), tmp_path / "20260701-20260801" / "a", 3)
    second = cut(locate(SAMPLES[0]), tmp_path / "20260701-20260801" / "b", 4)
    store = Store()
    sources = store.load_billing([tmp_path / "20260701-20260801"])
    assert len({s.part_of for s in sources}) == 1
    assert all(s.part_of and "/b:" in s.part_of for s in sources)
    assert len(store.parts) == 1 and any("re-delivered" in w for w in store.warnings)
    assert sums(store) == sums(one_at_a_time(second))
    assert len(first) == 3


def dated(part: Path, line: int, start: str) -> None:
    """Line `line` (0: the header) of a CSV part charged from `start`."""
    text = part.read_text(encoding="utf-8").splitlines(keepends=True)
    header = next(csv.reader([text[0]]))
    row = next(csv.reader([text[line]]))
    row[header.index("ChargePeriodStart")] = start
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(row)
    text[line] = buf.getvalue()
    part.write_text("".join(text), encoding="utf-8")


def test_parts_dated_before_2000_and_after_today_are_named_in_warnings(tmp_path, locate):
    """Each file's odd dates come from the scan's own figures of it (the same read as its groups)."""
    parts = cut(locate(SAMPLES[1]), tmp_path / "export", 3)
    dated(parts[1], 4, "1999-12-31T00:00:00Z")
    dated(parts[2], 2, "2100-01-02T00:00:00Z")
    dated(parts[2], 5, "2100-03-04T00:00:00Z")
    store = Store()
    sources = store.load_billing([tmp_path / "export"])
    assert all(s.part_of for s in sources)  # read as one scan
    [warning] = [w for w in store.warnings if "before 2000" in w]
    assert warning.startswith(f"{parts[1]}: 1 line(s) charged before 2000 (the first on 1999-12-31)")
    [warning] = [w for w in store.warnings if "after today" in w]
    assert warning.startswith(f"{parts[2]}: 2 line(s) charged after today (the last on 2100-03-04")


@pytest.mark.heavy
def test_a_scan_whose_key_hashes_clash_is_grouped_by_its_columns_in_one_read(tmp_path, locate, monkeypatch):
    """Two keys sharing a hash: the scan groups its lines by the key columns instead, still as one scan, with
    each file's figures from that read, and the same rows as without the clash."""
    from auditor.tables import normalize

    parts = cut(locate(SAMPLES[0]), tmp_path / "export", 4, "gz")
    exact = Store()
    exact_sources = exact.load_billing([tmp_path / "export"])
    monkeypatch.setattr(normalize, "KEY_HASH", "(hash({}) % 3)")  # hundreds of keys, three hashes
    clashing = Store()
    sources = clashing.load_billing([tmp_path / "export"])
    assert [s.path for s in sources] == [str(p) for p in parts]
    assert all(s.part_of for s in sources) and len(clashing.parts) == 1  # one scan still
    assert sums(clashing) == sums(exact) == sums(one_at_a_time(parts))
    for source, single in zip(sources, exact_sources, strict=True):
        assert source.stats == single.stats

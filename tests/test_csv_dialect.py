"""Billing CSVs as people have them (auditor/providers/billing/csv_dialect.py): every public sample in
../shared/samples/billing (the `samples` fixture), rewritten as spreadsheets, editors and mirrors write files,
reads to the same rows and cents as the original; what stays ambiguous is refused in one line naming the file,
the line and why. The variants are written to tmp_path; the samples are read in place."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.errors import InputError
from auditor.providers.billing import csv_dialect
from auditor.providers.billing.csv_dialect import Normalized
from auditor.tables.store import Store

SAMPLES = ["aws_cur_legacy/focus_converters__sample-anonymous-aws-export-dataset.csv",
           "azure/finops-toolkit__EA_ActualCost_Small.csv",
           "focus/FOCUS-Sample-Data__FOCUS-1.0__focus_sample.csv",
           "gcp_bigquery/koku__gcp__2022-08-01_5.csv"]
CUR = SAMPLES[0]
FOCUS_SAMPLE = SAMPLES[2]
COST = {"aws-cur": "lineItem/UnblendedCost"}
BOM = b"\xef\xbb\xbf"


def _lines(raw: bytes) -> list[bytes]:
    """The sample's lines without their endings (none of the samples holds a line break inside a value)."""
    return raw.removeprefix(BOM).splitlines()


def _variant(raw: bytes, kind: str) -> bytes:
    ls = _lines(raw)
    if kind == "mixed CRLF and LF":
        return b"".join(line + (b"\r\n" if i % 2 else b"\n") for i, line in enumerate(ls))
    if kind == "LF then CRLF (two files joined)":
        half = len(ls) // 2
        return b"\n".join(ls[:half]) + b"\n" + b"\r\n".join(ls[half:]) + b"\r\n"
    if kind == "CR only (Excel for Mac)":
        return b"\r".join(ls) + b"\r"
    if kind == "BOM and CRLF":
        return BOM + b"\r\n".join(ls) + b"\r\n"
    if kind == "BOM, mixed endings":
        return BOM + b"".join(line + (b"\r\n" if i % 3 else b"\n") for i, line in enumerate(ls))
    if kind == "trailing comma on every line":
        return b"".join(line + b",\r\n" for line in ls)
    if kind == "header repeated (concatenated)":
        half = len(ls) // 2
        return b"\n".join(ls[:half] + [ls[0]] + ls[half:]) + b"\n"
    if kind == "concatenated with BOMs, CRLF":
        half = len(ls) // 2
        return BOM + b"\r\n".join(ls[:half]) + b"\r\n" + BOM + b"\r\n".join([ls[0]] + ls[half:]) + b"\r\n"
    if kind == "every value quoted":
        rows = list(csv.reader(io.StringIO(raw.removeprefix(BOM).decode("utf-8"))))
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\r\n").writerows(rows)
        return out.getvalue().encode("utf-8")
    if kind == "gzip, CR only, trailing comma":
        return gzip.compress(b"\r".join(line + b"," for line in ls) + b"\r")
    if kind == "gzip, mixed endings":
        return gzip.compress(_variant(raw, "mixed CRLF and LF"))
    raise AssertionError(kind)


VARIANTS = ["mixed CRLF and LF", "LF then CRLF (two files joined)", "CR only (Excel for Mac)", "BOM and CRLF",
            "BOM, mixed endings", "trailing comma on every line", "header repeated (concatenated)",
            "concatenated with BOMs, CRLF", "every value quoted", "gzip, CR only, trailing comma",
            "gzip, mixed endings"]


def _read(path: Path) -> tuple[Store, list]:
    store = Store()
    return store, store.load_billing([path])


def _figures(store: Store, sources: list) -> tuple[str, int, dict, dict, list]:
    """Format, lines, billed and effective cost per currency (to the cent and beyond), and every line's amounts
    and tags in order."""
    [s] = sources
    lines = store.lines().execute("SELECT BilledCost, EffectiveCost, ResourceId, Tags FROM lines "
                                  "ORDER BY x_SourceRow").fetchall()
    return s.format, s.rows, s.stats["billed_cost"], s.stats["effective_cost"], lines


class _Originals(dict):
    """Each sample's figures read in place, once, when a test first asks (the fast loop reads one sample)."""

    def __init__(self, samples: Path):
        super().__init__()
        self.samples = samples

    def __missing__(self, name: str) -> tuple:
        self[name] = _figures(*_read(self.samples / name))
        return self[name]


@pytest.fixture(scope="module")
def originals(samples) -> dict[str, tuple]:
    return _Originals(samples)


@pytest.mark.heavy
@pytest.mark.parametrize("kind", VARIANTS)
@pytest.mark.parametrize("name", SAMPLES)
def test_every_sample_reads_the_same_in_every_dialect(name, kind, samples, originals, tmp_path):
    raw = (samples / name).read_bytes()
    path = tmp_path / (Path(name).stem + (".csv.gz" if kind.startswith("gzip") else ".csv"))
    path.write_bytes(_variant(raw, kind))
    store, sources = _read(path)
    fmt, rows, billed, effective, lines = _figures(store, sources)
    want = originals[name]
    assert (fmt, rows) == want[:2]
    assert billed == want[2] and effective == want[3]
    if "repeated" not in kind and "concatenated" not in kind:
        assert lines == want[4]  # the same amounts, ids and tags, line by line, no CR left in a value
    else:
        assert sorted(map(repr, lines)) == sorted(map(repr, want[4]))
    assert not any("\r" in str(cell) for line in lines for cell in line)


def test_a_repeated_header_is_named_in_a_warning(samples, tmp_path):
    ls = _lines((samples / CUR).read_bytes())
    path = tmp_path / "joined.csv"
    path.write_bytes(b"\n".join(ls[:10] + [ls[0]] + ls[10:]) + b"\n")
    store, _ = _read(path)
    assert any(w.startswith(f"{path}: the header is repeated at line(s) 11 ") for w in store.warnings), \
        store.warnings


def test_a_bad_value_after_a_repeated_header_names_its_own_line(samples, tmp_path):
    header = _lines((samples / CUR).read_bytes())[0]
    # line 40 of the file is the bad one; the repeated header is line 20 of the file, mixed endings throughout
    rows = list(csv.reader(io.StringIO((samples / CUR).read_text(encoding="utf-8"))))
    col = rows[0].index(COST["aws-cur"])
    rows[38][col] = "12.5 USD"  # line 39 of the sample, line 40 once the header is repeated above it
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    ls = out.getvalue().encode("utf-8").split(b"\n")[:-1]
    ls = ls[:19] + [header] + ls[19:]
    path = tmp_path / "cur.csv"
    path.write_bytes(b"".join(x + (b"\r\n" if i % 2 else b"\n") for i, x in enumerate(ls)))
    with pytest.raises(InputError) as e:
        _read(path)
    assert str(e.value) == f"{path}:40: column 'lineItem/UnblendedCost': '12.5 USD' is not a number"


@pytest.mark.parametrize("cost, read", [("NULL", None), ('"0.25"', Decimal("0.25"))])
def test_null_literals_and_quoted_numbers(cost, read, samples, tmp_path):
    """`NULL` is an empty value in every export (and a line needs a cost, so it is named); a quoted number is the
    number."""
    text = (samples / CUR).read_text(encoding="utf-8").split("\n")
    rows = list(csv.reader(text[:2]))
    col = rows[0].index(COST["aws-cur"])
    fields = next(csv.reader([text[1]]))
    fields[col] = "@@"
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(fields)
    text[1] = out.getvalue().replace("@@", cost)
    path = tmp_path / "cur.csv"
    path.write_text("\n".join(text), encoding="utf-8")
    if read is None:
        with pytest.raises(InputError) as e:
            _read(path)
        assert str(e.value) == f"{path}:2: the cost is empty; every billing line needs a cost and a start time"
    else:
        store, _ = _read(path)
        assert store.lines().execute("SELECT BilledCost FROM lines WHERE x_SourceRow = 2").fetchone()[0] == read


@pytest.mark.heavy
@pytest.mark.parametrize("bad, message", [
    # a spreadsheet's date: the month or the day first? Refused, as before
    (("lineItem/UsageStartDate", "9/18/2024"), "'9/18/2024' is not a UTC time like 2026-07-01T00:00:00Z"),
    # thousands separators: 1,234.50 or 1.234,50?
    (("lineItem/UnblendedCost", "1,234.50"), "'1,234.50' is not a number"),
])
def test_ambiguous_values_stay_refused_in_every_dialect(bad, message, samples, tmp_path):
    column, value = bad
    rows = list(csv.reader(io.StringIO((samples / CUR).read_text(encoding="utf-8"))))
    rows[6][rows[0].index(column)] = value
    for ending in ("\n", "\r\n", "\r"):
        out = io.StringIO()
        csv.writer(out, lineterminator=ending).writerows(rows)
        path = tmp_path / "cur.csv"
        path.write_bytes(b"".join(x + (b"\n" if i == 3 else b"") for i, x in
                                  enumerate(out.getvalue().encode("utf-8").splitlines(keepends=True))))
        with pytest.raises(InputError) as e:
            _read(path)
        assert str(e.value) == f"{path}:7: column {column!r}: {message}", ending


# An amount of every reader's: its sample, a column it reads as money.
AMOUNTS = [(CUR, "lineItem/UnblendedCost"), (CUR, "lineItem/UsageAmount"), (FOCUS_SAMPLE, "BilledCost"),
           (FOCUS_SAMPLE, "ListCost"), (SAMPLES[1], "Cost"), (SAMPLES[3], "cost")]


def _with_value(samples: Path, name: str, column: str, value: str, path: Path, row: int = 3) -> Path:
    rows = list(csv.reader(io.StringIO((samples / name).read_text(encoding="utf-8-sig"))))
    rows[row - 1][rows[0].index(column)] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


# DuckDB's cast reads `1_000` as 1000 and `1e3.` as 1000: numbers to it, to no bill. Refused as `$1,000` is.
# `0x10` (hex) its cast refuses already. Kept: a sign, a point first or last, leading zeros, an exponent.
@pytest.mark.parametrize("name, column", AMOUNTS, ids=[f"{Path(n).parts[0]}-{c}" for n, c in AMOUNTS])
@pytest.mark.parametrize("value", ["1_000", "1_000.50", "-2_5", "1e3.", "0x10", "$1,000"])
def test_amounts_duckdb_alone_reads_are_refused_in_every_reader(name, column, value, samples, tmp_path):
    path = _with_value(samples, name, column, value, tmp_path / "bill.csv")
    with pytest.raises(InputError) as e:
        _read(path)
    assert str(e.value) == f"{path}:3: column {column!r}: {value!r} is not a number"


@pytest.mark.parametrize("value, read", [("+5", "5"), (".5", "0.5"), ("5.", "5"), ("007", "7"), ("1e3", "1000"),
                                         ("1.5E-2", "0.015"), (" 2.25 ", "2.25")])
def test_plain_spellings_of_an_amount_are_read(value, read, samples, tmp_path):
    path = _with_value(samples, CUR, "lineItem/UnblendedCost", value, tmp_path / "cur.csv")
    store, _ = _read(path)
    assert store.lines().execute("SELECT BilledCost FROM lines WHERE x_SourceRow = 3").fetchone()[0] == Decimal(read)


# ---- what a spreadsheet leaves in a CSV it saves: empty rows, a row that totals the file ------------------------

def _rows(samples: Path, name: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO((samples / name).read_text(encoding="utf-8-sig"))))


def _write(rows: list[list[str]], path: Path, ending: str = "\r\n") -> Path:
    out = io.StringIO()
    csv.writer(out, lineterminator=ending).writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8", newline="")
    return path


def _total_row(rows: list[list[str]], column: str, label: str = "Total", at: int = 0) -> list[str]:
    """The row a spreadsheet's user adds: a label, the column's sum, the rest empty."""
    col = rows[0].index(column)
    row = [""] * len(rows[0])
    row[at if at != col else at + 1], row[col] = label, str(sum(Decimal(r[col]) for r in rows[1:]))
    return row


@pytest.mark.parametrize("name", [CUR, FOCUS_SAMPLE])
@pytest.mark.parametrize("ending", ["\r\n", "\n"])
def test_rows_of_only_delimiters_are_left_out_with_a_warning(name, ending, samples, originals, tmp_path):
    rows = _rows(samples, name)
    width = len(rows[0])
    rows = rows[:4] + [[""] * width] + rows[4:] + [[""] * width] * 3 + [[""] * (width - 3)]
    store, sources = _read(_write(rows, tmp_path / "bill.csv", ending))
    assert _figures(store, sources) == originals[name]
    last = len(rows)
    assert store.warnings == [f"{tmp_path / 'bill.csv'}: 5 line(s) hold no value, only delimiters (a spreadsheet's "
                              f"empty rows) at line(s) 5, {last - 3}, {last - 2}, {last - 1}, {last}; not read"]


@pytest.mark.parametrize("name, column", [(CUR, COST["aws-cur"]), (FOCUS_SAMPLE, "BilledCost")])
@pytest.mark.parametrize("label", ["Total", "GRAND TOTAL", "sum"])
def test_a_last_row_that_totals_the_file_is_left_out_with_a_warning(name, column, label, samples, originals,
                                                                     tmp_path):
    rows = _rows(samples, name)
    total = _total_row(rows, column, label, at=1)
    path = _write(rows + [total, [""] * len(rows[0]), [""] * len(rows[0])], tmp_path / "bill.csv")
    store, sources = _read(path)
    assert _figures(store, sources) == originals[name]  # every cent the real lines', the total's none
    assert store.warnings == [
        f"{path}: 2 line(s) hold no value, only delimiters (a spreadsheet's empty rows) at line(s) {len(rows) + 2}, "
        f"{len(rows) + 3}; not read",
        f"{path}: line {len(rows) + 1} is a total row ({total[rows[0].index(column)]}, the sum of {column} over the "
        "lines above it, a spreadsheet's?); not read"]


def test_a_total_row_is_matched_to_the_cent(samples, originals, tmp_path):
    """A spreadsheet shows the sum rounded: 1234.5 for 1234.4999; a total that differs by a cent is no total."""
    rows = _rows(samples, CUR)
    total = _total_row(rows, COST["aws-cur"])
    col = rows[0].index(COST["aws-cur"])
    exact = Decimal(total[col])
    total[col] = str(exact.quantize(Decimal("0.01")))
    assert _figures(*_read(_write(rows + [total], tmp_path / "a.csv"))) == originals[CUR]
    total[col] = str(exact.quantize(Decimal("0.01")) + Decimal("0.01"))
    with pytest.raises(InputError) as e:
        _read(_write(rows + [total], tmp_path / "b.csv"))
    assert str(e.value) == (
        f"{tmp_path / 'b.csv'}:{len(rows) + 1}: column {COST['aws-cur']!r}: a last line that names a total, whose "
        f"{total[col]} is not the sum of the column over the lines above it ({exact.quantize(Decimal('0.01'))}): not "
        "a total of this file, so it cannot be left out; remove it")


@pytest.mark.parametrize("change, message", [
    # a second amount (the usage) that is not its column's sum
    (lambda row, rows: row.__setitem__(rows[0].index("lineItem/UsageAmount"), "1"), "is not the sum"),
    # no cost: what it totals cannot be told
    (lambda row, rows: row.__setitem__(rows[0].index(COST["aws-cur"]), ""), "holds no cost"),
])
def test_a_total_row_that_is_no_total_of_the_file_is_refused(change, message, samples, tmp_path):
    rows = _rows(samples, CUR)
    total = _total_row(rows, COST["aws-cur"])
    change(total, rows)
    path = _write(rows + [total], tmp_path / "cur.csv")
    with pytest.raises(InputError) as e:
        _read(path)
    assert str(e.value).startswith(f"{path}:{len(rows) + 1}: ") and message in str(e.value)


def test_a_total_row_not_last_and_a_bad_value_after_empty_rows_are_refused_on_their_lines(samples, tmp_path):
    rows = _rows(samples, CUR)
    width = len(rows[0])
    total = _total_row(rows[:6], COST["aws-cur"])
    with pytest.raises(InputError) as e:
        _read(_write(rows[:6] + [total] + rows[6:], tmp_path / "a.csv"))
    assert str(e.value).startswith(f"{tmp_path / 'a.csv'}:7: ")  # a Total with lines after it is no total
    bad = [list(r) for r in rows]
    bad[9][rows[0].index(COST["aws-cur"])] = "abc"
    with pytest.raises(InputError) as e:
        _read(_write(bad[:3] + [[""] * width] * 2 + bad[3:], tmp_path / "b.csv"))
    assert str(e.value) == f"{tmp_path / 'b.csv'}:12: column {COST['aws-cur']!r}: 'abc' is not a number"


def test_a_header_column_without_a_name_is_refused(samples, tmp_path):
    text = (samples / CUR).read_text(encoding="utf-8")
    path = tmp_path / "cur.csv"
    path.write_text(text.replace(",", ",,", 1), encoding="utf-8")
    with pytest.raises(InputError) as e:
        _read(path)
    assert str(e.value) == f"{path}:1: column 2 of the header has no name"


def test_a_value_past_the_header_is_refused(samples, tmp_path):
    """A line with one field more than the header: an empty one is a trailing comma, a value has no column."""
    ls = _lines((samples / CUR).read_bytes())
    path = tmp_path / "cur.csv"
    path.write_bytes(b"\n".join(ls[:5] + [ls[5] + b",0.5"] + ls[6:]) + b"\n")
    with pytest.raises(InputError) as e:
        _read(path)
    assert str(e.value).startswith(f"{path}:6: cannot read the file: the line has ")
    path.write_bytes(b"\n".join(ls[:5] + [ls[5] + b","] + ls[6:]) + b"\n")
    assert _read(path)[1][0].rows == len(ls) - 1


def test_a_value_under_the_unnamed_last_column_is_refused(samples, tmp_path):
    """With a delimiter ending every line, the header's last column has no name: a value there has no meaning."""
    ls = _lines((samples / CUR).read_bytes())
    lines = [x + b"," for x in ls]
    lines[8] += b"7.5"
    path = tmp_path / "cur.csv"
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    with pytest.raises(InputError) as e:
        _read(path)
    assert str(e.value) == (f"{path}:9: a value past the header's last column, which has no name (the header ends "
                            "in a delimiter)")


def test_cr_only_and_trailing_comma_through_the_command_line(samples, tmp_path):
    """Excel for Mac's CR-only file with a comma ending every line: `inspect` reads it, no internal error."""
    from click.testing import CliRunner

    from auditor.cli import cli

    path = tmp_path / "cur.csv"
    path.write_bytes(b"\r".join(x + b"," for x in _lines((samples / CUR).read_bytes())) + b"\r")
    result = CliRunner().invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 0, result.output
    assert "internal error" not in result.output and "1,281" in result.output


def test_a_cr_only_file_over_two_mib_is_no_long_line(samples, tmp_path):
    """The long-line checks look for the file's own line break: a 3 MB file of CR-only lines is 3,843 lines of
    under a KiB, not one line over the 2,000,000-byte limit."""
    ls = _lines((samples / CUR).read_bytes())
    path = tmp_path / "cur.csv"
    path.write_bytes(b"\r".join([ls[0]] + ls[1:] * 3) + b"\r")
    assert path.stat().st_size > 3_000_000
    _, sources = _read(path)
    assert sources[0].rows == 3 * (len(ls) - 1)


def test_a_stray_quote_in_a_file_of_mixed_endings_names_its_line(samples, tmp_path):
    """What Python's csv cannot read either is refused naming the line (DuckDB's own word for it named none)."""
    ls = _lines((samples / FOCUS_SAMPLE).read_bytes())
    ls[7] = ls[7].replace(b'","', b'"x"', 1)
    path = tmp_path / "focus.csv"
    path.write_bytes(b"".join(x + (b"\r\n" if i % 2 else b"\n") for i, x in enumerate(ls)))
    with pytest.raises(InputError) as e:
        _read(path)
    assert str(e.value).startswith(f"{path}:8: cannot read the file: not comma-separated values (")


# ---- the helpers, one by one (fast: what mutation testing runs first) ---------------------------------------

def test_the_header_line_and_what_ends_a_files_lines(tmp_path):
    assert [csv_dialect.header_line(b) for b in (b"a,b\r\nc", b"a,b\rc\r", b"a,b\nc", b"a,b", b"")] == [
        b"a,b", b"a,b", b"a,b", b"a,b", b""]
    ends = {"cr": b"a\rb\r", "crlf": b"a\r\nb\r\n", "lf": b"a\nb\n", "empty": b""}
    for name, data in ends.items():
        (tmp_path / name).write_bytes(data)
    assert {n: csv_dialect.line_break(tmp_path / n) for n in ends} == {"cr": b"\r", "crlf": b"\n", "lf": b"\n",
                                                                       "empty": b"\n"}



def test_what_ends_a_files_lines_is_read_from_its_first_64_kib(tmp_path):
    """CR-only lines with an LF at the 65,536th byte, the last of the first 64 KiB: LF; one byte later: CR."""
    inside, past = tmp_path / "inside.csv", tmp_path / "past.csv"
    inside.write_bytes(b"a\r" + b"x" * (65_536 - 3) + b"\n")
    past.write_bytes(b"a\r" + b"x" * (65_536 - 2) + b"\n")
    assert (inside.stat().st_size, past.stat().st_size) == (65_536, 65_537)
    assert (csv_dialect.line_break(inside), csv_dialect.line_break(past)) == (b"\n", b"\r")

def test_header_names_and_the_unnamed_last_column(tmp_path):
    assert csv_dialect.header_names(["a", "b", ""], "f.csv") == ["a", "b", ""]
    with pytest.raises(InputError) as err:
        csv_dialect.header_names(["a", "", "c", ""], "f.csv")
    assert (str(err.value), err.value.line) == ("f.csv:1: column 2 of the header has no name", 1)
    with pytest.raises(InputError, match="^f.csv:1: column 2 of the header has no name$"):
        csv_dialect.header_names(["a", "", ""], "f.csv")
    assert csv_dialect.read_names(("a", "b", "")) == ["a", "b", "x_trailing_delimiter"]


@pytest.mark.parametrize("data, mixed", [
    (b"a\nb\n", False), (b"a\r\nb\r\n", False), (b"a\rb\r", False), (b"a\nb\r\n", True), (b"a\rb\n", True),
    (b"a\r\nb\r", True), (b"abc\r\nde\r\nf\r\n", False),  # with 4-byte chunks: a CRLF cut between two
    (b"abcd\nef\n", False), (b"abc\rdef\r", False)])  # a chunk that starts with LF, one that ends in CR: no CRLF
def test_mixed_line_endings_counted_across_chunks(tmp_path, monkeypatch, data, mixed):
    monkeypatch.setattr(csv_dialect, "CHUNK", 4)
    (tmp_path / "f.csv").write_bytes(data)
    (tmp_path / "f.csv.gz").write_bytes(gzip.compress(data))
    assert csv_dialect._mixed(tmp_path / "f.csv", False) is mixed
    assert csv_dialect._mixed(tmp_path / "f.csv.gz", True) is mixed


@pytest.mark.parametrize("data, repeats", [
    (b"a,b\n1,2\na,b\n3,4\n", True), (b"a,b\n1,2\na,b", True), (b"a,b\r1,2\ra,b\r3,4\r", True),
    (b"\xef\xbb\xbfa,b\n1,2\n\xef\xbb\xbfa,b\n3,4\n", True), (b"a,b\n1,2\na,bc\n", False),
    (b"a,b\n1,2\nxa,b\n", False), (b"a,b\n1,2\n", False), (b"", False),
    (b"a,b\n1,2,3,4,5,6,7\na,b\n", True),  # with 8-byte chunks: the repeat found across two
    (b"\xef\xbb\xbfa,b\n1,2\na,b\n3,4\n", True),  # a file with a BOM, its repeat without
    (b"a,b\n1,2\na,b\n3,4\na,bc\n", True),  # a repeat, then a line that starts like one
    (b"a,b\n1,2\na,bc\na,b\n", True),  # a line that starts like a repeat, then one
    (b"a,b\n1,234\n\xef\xbb\xbfa,b\n3,4\n", True),  # a repeat with a BOM ends a chunk; its line end starts the next
    (b"a,b\n1,2\n9999\na,bc\n", False)])  # a full chunk ends where "a,b" does; the next holds its "c"
def test_a_repeated_header(tmp_path, monkeypatch, data, repeats):
    monkeypatch.setattr(csv_dialect, "CHUNK", 8)
    (tmp_path / "f.csv").write_bytes(data)
    (tmp_path / "f.csv.gz").write_bytes(gzip.compress(data))
    assert csv_dialect._repeats_header(tmp_path / "f.csv", False) is repeats
    assert csv_dialect._repeats_header(tmp_path / "f.csv.gz", True) is repeats



def test_a_repeated_header_among_lines_that_start_like_it_in_one_chunk(tmp_path):
    """Every place the header's text starts a line is looked at, in order, within one chunk."""
    for data, repeats in ((b"a,b\n1,2\na,bc\na,b\na,bd\n", True), (b"a,b\n1,2\na,bc\na,bd\n", False)):
        (tmp_path / "f.csv").write_bytes(data)
        assert csv_dialect._repeats_header(tmp_path / "f.csv", False) is repeats, data

def test_a_copys_lines_are_counted_back_to_the_original():
    copy = Normalized("copy.csv", dropped=[3, 6])  # the original's lines 1, 2, 4, 5, 7 are the copy's 1 to 5
    assert [copy.original_line(n) for n in (None, 1, 2, 3, 4, 5)] == [None, 1, 2, 4, 5, 7]
    assert csv_dialect.copy_note("f.csv", Normalized("c")) == []
    assert csv_dialect.copy_note("f.csv", copy) == ["f.csv: the header is repeated at line(s) 3, 6 (files "
                                                    "concatenated?); those lines are not read"]
    assert csv_dialect.copy_note("f.csv", Normalized("c", dropped=[2, 3, 4, 5, 6, 7]))[0].startswith(
        "f.csv: the header is repeated at line(s) 2, 3, 4, 5, 6, ... (files")
    assert csv_dialect.copy_note("f.csv", Normalized("c", dropped=[2, 3, 4, 5, 6]))[0].startswith(
        "f.csv: the header is repeated at line(s) 2, 3, 4, 5, 6 (files")
    # a header repeated, empty rows and a total row left out, in any order of the three
    mixed = Normalized("c", dropped=[5], blank=[9, 3], total=(11, ["Total", "3"]))
    assert [mixed.original_line(n) for n in (2, 3, 4, 5, 6, 7)] == [2, 4, 6, 7, 8, 10]
    assert csv_dialect.copy_note("f.csv", Normalized("c", blank=[4, 5])) == [
        "f.csv: 2 line(s) hold no value, only delimiters (a spreadsheet's empty rows) at line(s) 4, 5; not read"]


@pytest.mark.parametrize("container", ["parquet", "json", "csv"])
def test_names_told_apart_as_duckdb_tells_them(tmp_path, container):
    """Twins in case get `_1`, and `_1` again while that is taken (`t`, `t_1`, `T` are read `t`, `t_1`,
    `T_1_1`), exactly as DuckDB names a Parquet file's, a JSON file's and a CSV header's columns: every order of
    five names that take each other's suffixes, each file's names as DuckDB reads them. (A Parquet file written
    by pyarrow, which keeps the names as given: DuckDB's own COPY would rename them as it writes, another way.)"""
    import itertools

    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    con = duckdb.connect()
    # DuckDB folds the case of ASCII letters alone: `é` and `É` are two names, `É` and `É_1` none of its twins
    others = [("é", "É", "É_1", "é_1", "x"), ("straße", "STRASSE", "Straße", "x", "y")]
    for i, names in enumerate([*itertools.permutations(["t", "T", "t_1", "T_1", "t_1_1"]), *others]):
        path = tmp_path / f"{i}.{container}"
        if container == "parquet":
            pq.write_table(pa.table([pa.array([k]) for k in range(5)], names=list(names)), path)
        elif container == "json":
            path.write_text(json.dumps(dict(zip(names, range(5), strict=True))) + "\n")
        else:
            path.write_text(",".join(names) + "\n" + ",".join("1" * 5) + "\n")
        read = [c for c, *_ in con.execute(f"DESCRIBE SELECT * FROM '{path}'").fetchall()]
        assert csv_dialect.unique_names(list(names)) == read, names
    assert csv_dialect.unique_names(["a", "a_1", "A"]) == ["a", "a_1", "A_1_1"]
    assert csv_dialect.unique_names(["é", "É", "straße", "Straße"]) == ["é", "É", "straße", "Straße_1"]
    assert csv_dialect.read_names(("a", "A", "")) == ["a", "A_1", "x_trailing_delimiter"]


@pytest.mark.parametrize("data, found", [
    (b"a,b\n1,2\n,\n", True), (b"a,b\r\n1,2\r\n , \r\n", True), (b'a,b\n1,2\n"",""\n', True),
    (b"a,b\n1,2\nTotal,2\n\n", True), (b"a,b\n1,2\n grand total ,2\n,\n", True), (b'a,b\n1,2\n"SUM",2', True),
    (b"a,b\n1,2\n\n3,4\n", False), (b"a,b\nTotal,2\n1,2\n", False), (b"a,b\n1,Totally\n", False)])
def test_what_a_spreadsheet_leaves_is_looked_for(tmp_path, data, found):
    (tmp_path / "f.csv").write_bytes(data)
    (tmp_path / "f.csv.gz").write_bytes(gzip.compress(data))
    assert csv_dialect._spreadsheet_rows(tmp_path / "f.csv", False) is found
    assert csv_dialect._spreadsheet_rows(tmp_path / "f.csv.gz", True) is found


@pytest.mark.parametrize("row, total", [
    (["Total", "", "12.50"], True), ([" grand  TOTAL ", "", "12.5", "3"], True), (["", "sum", "1e3"], True),
    (["Totals", "", "12.5"], False), (["Total", "USD", "12.5"], False), (["Total", "Total", "1"], False),
    (["li-1", "", "12.5"], False), (["", "", "12.5"], False)])
def test_a_total_row_is_a_total_label_and_numbers(row, total):
    assert csv_dialect.is_total(row) is total


def test_the_normalized_copy(tmp_path):
    """Made only where needed: one line ending, the repeated headers left out (and counted), a BOM of a file
    concatenated in the middle dropped; a file Python's csv cannot read is refused naming its line."""
    plain = tmp_path / "plain.csv"
    plain.write_bytes(b"a,b\n1,2\n")
    assert csv_dialect.normalized(plain, "none", ("a", "b"), str(tmp_path)) is None
    src = tmp_path / "mixed.csv"
    src.write_bytes(b"\xef\xbb\xbfa,b\r\n1,2\r\n\xef\xbb\xbfa , b\n3,\"4\"\n")
    copy = csv_dialect.normalized(src, "none", (" a", "b"), str(tmp_path))
    assert copy is not None and copy.dropped == [3]
    assert Path(copy.path).read_bytes() == b"a,b\n1,2\n3,4\n"
    gz = tmp_path / "mixed.csv.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    copy = csv_dialect.normalized(gz, "gzip", ("a", "b"), str(tmp_path))
    assert copy is not None and copy.dropped == [3] and Path(copy.path).read_bytes() == b"a,b\n1,2\n3,4\n"
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"a,b\r\n1,2\n3,\"4\"x\n")
    with pytest.raises(InputError) as err:
        csv_dialect.normalized(bad, "none", ("a", "b"), str(tmp_path))
    assert (err.value.path, err.value.line) == (str(bad), 3)
    assert str(err.value).startswith(f"{bad}:3: cannot read the file: not comma-separated values (")
    # the refused file's copy is removed; the two made above are left to the caller
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("normalized-")]) == 2



def test_a_header_over_64_kib_is_not_looked_for_again(tmp_path):
    """The header is taken from the file's first 64 KiB (a CR-only file has no line to read up to): a header line
    of 64 KiB is found repeated; one byte longer, it is not, and the file is read as it is."""
    for size, repeats in ((65_536, True), (65_537, False)):
        header = b"a" * (size - 2) + b",b"
        (tmp_path / "f.csv").write_bytes(header + b"\n1,2\n" + header + b"\n3,4\n")
        assert csv_dialect._repeats_header(tmp_path / "f.csv", False) is repeats, size


def test_a_value_past_the_header_is_named_at_its_line_in_the_original():
    """The line of a value under the unnamed last column: its row counted from the first data line, and in a
    normalized copy counted back past the headers it left out."""
    import duckdb

    con = duckdb.connect()
    relation = "(SELECT * FROM (VALUES (NULL), (NULL), ('9')) t(x_trailing_delimiter))"
    for copy, line in ((None, 4), (Normalized("c", dropped=[3]), 5)):
        with pytest.raises(InputError) as err:
            csv_dialect.check_trailing(con, relation, 2, "f.csv", copy)
        assert (err.value.path, err.value.line) == ("f.csv", line)
        assert str(err.value) == (f"f.csv:{line}: a value past the header's last column, which has no name (the "
                                  "header ends in a delimiter)")
    csv_dialect.check_trailing(con, "(SELECT NULL AS x_trailing_delimiter)", 2, "f.csv", None)  # none held


def test_the_normalized_copy_keeps_a_quoted_line_break_and_reads_a_gzip_by_its_repeated_header(tmp_path):
    """A quoted value's CRLF is the value's own: the copy keeps it, compressed or not. A gzip file whose only
    fault is a repeated header is copied without it (the header is looked for in the decompressed lines)."""
    data = b'a,b\n1,"x\r\ny"\r\n2,3\n'
    (tmp_path / "q.csv").write_bytes(data)
    (tmp_path / "q.csv.gz").write_bytes(gzip.compress(data))
    for name, compression in (("q.csv", "none"), ("q.csv.gz", "gzip")):
        copy = csv_dialect.normalized(tmp_path / name, compression, ("a", "b"), str(tmp_path))
        assert copy is not None and copy.dropped == [], name
        assert Path(copy.path).read_bytes() == b'a,b\n1,"x\r\ny"\n2,3\n', name
    (tmp_path / "r.csv.gz").write_bytes(gzip.compress(b"a,b\n1,2\na,b\n3,4\n"))
    copy = csv_dialect.normalized(tmp_path / "r.csv.gz", "gzip", ("a", "b"), str(tmp_path))
    assert copy is not None and copy.dropped == [3] and Path(copy.path).read_bytes() == b"a,b\n1,2\n3,4\n"


def test_the_normalized_copy_is_utf8_whatever_the_machines_locale(tmp_path):
    """Read and written as UTF-8 (a BOM dropped), not in the locale's encoding: under an ASCII locale (C, with
    neither Python's coercion to C.UTF-8 nor its UTF-8 mode) a value "Zürich" is copied whole, compressed or not."""
    data = "a,b\r\nZürich,2\n".encode()
    (tmp_path / "z.csv").write_bytes(data)
    (tmp_path / "z.csv.gz").write_bytes(gzip.compress(data))
    for name, compression in (("z.csv", "none"), ("z.csv.gz", "gzip")):
        copy = csv_dialect.normalized(tmp_path / name, compression, ("a", "b"), str(tmp_path))  # here, then alone
        assert copy is not None and Path(copy.path).read_bytes() == "a,b\nZürich,2\n".encode(), name
        code = ("import sys; from pathlib import Path; from auditor.providers.billing import csv_dialect; "
                f"c = csv_dialect.normalized(Path(sys.argv[1]), {compression!r}, ('a', 'b'), sys.argv[2]); "
                "sys.stdout.buffer.write(Path(c.path).read_bytes() if c else b'none')")
        env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / name), str(tmp_path)], env=env,
                             capture_output=True)
        assert (out.stdout, out.stderr) == ("a,b\nZürich,2\n".encode(), b""), name


def test_a_header_repeated_on_the_second_line_is_left_out(tmp_path):
    (tmp_path / "h.csv").write_bytes(b"a,b\r\na,b\n1,2\n")
    copy = csv_dialect.normalized(tmp_path / "h.csv", "none", ("a", "b"), str(tmp_path))
    assert copy is not None and copy.dropped == [2] and Path(copy.path).read_bytes() == b"a,b\n1,2\n"



def test_a_file_to_copy_that_is_not_utf8_is_left_to_duckdb(tmp_path):
    """Mixed endings and a byte that is no UTF-8: no copy (DuckDB reads the original and names the byte), and the
    copy begun is removed."""
    (tmp_path / "x.csv").write_bytes(b"a,b\r\n\xff,2\n")
    assert csv_dialect.normalized(tmp_path / "x.csv", "none", ("a", "b"), str(tmp_path)) is None
    assert [p.name for p in tmp_path.iterdir()] == ["x.csv"]


# ---- each of a spreadsheet's rows judged as the cases above assume (mutation testing found these unstated) ----

@pytest.mark.parametrize("raw, total", [(b"a,b\n1,2\nTotal,2\n", True), (b"a,b\n1,2\nTotal,2\nX,,\n", False)])
def test_the_last_line_with_any_value_decides_whether_a_file_ends_in_a_total(raw, total, tmp_path):
    (tmp_path / "bill.csv").write_bytes(raw)
    assert csv_dialect._spreadsheet_rows(tmp_path / "bill.csv", False) is total


def test_a_gzip_csv_saved_by_a_spreadsheet_is_normalized_too(samples, originals, tmp_path):
    rows = _rows(samples, CUR)
    width = len(rows[0])
    text = _write(rows[:4] + [[""] * width] + rows[4:], tmp_path / "plain.csv").read_bytes()
    path = tmp_path / "bill.csv.gz"
    path.write_bytes(gzip.compress(text))
    store, sources = _read(path)
    assert _figures(store, sources)[1:] == originals[CUR][1:]  # every figure but the file's name
    assert store.warnings == [f"{path}: 1 line(s) hold no value, only delimiters (a spreadsheet's empty rows) at "
                              "line(s) 5; not read"]


def test_a_row_of_only_delimiters_right_below_the_header_is_left_out(samples, originals, tmp_path):
    rows = _rows(samples, CUR)
    path = _write(rows[:1] + [[""] * len(rows[0])] + rows[1:], tmp_path / "bill.csv")
    store, sources = _read(path)
    assert _figures(store, sources) == originals[CUR]
    assert store.warnings == [f"{path}: 1 line(s) hold no value, only delimiters (a spreadsheet's empty rows) at "
                              "line(s) 2; not read"]


def test_a_total_row_shorter_than_the_header_is_checked_and_left_out(samples, originals, tmp_path):
    """A total typed by hand may stop at its last value; the cells it lacks are empty."""
    rows = _rows(samples, CUR)
    total = _total_row(rows, COST["aws-cur"])
    short = total[:rows[0].index(COST["aws-cur"]) + 1]
    assert len(short) < len(rows[0])
    path = _write(rows + [short], tmp_path / "bill.csv")
    store, sources = _read(path)
    assert _figures(store, sources) == originals[CUR]
    assert store.warnings[-1].startswith(f"{path}: line {len(rows) + 1} is a total row")


def test_a_total_of_a_column_the_lines_leave_empty_is_zero(samples, originals, tmp_path):
    """Excel sums an empty column to 0: that total is right, as the cost's is."""
    rows = _rows(samples, CUR)
    empty = rows[0].index("reservation/EffectiveCost") if "reservation/EffectiveCost" in rows[0] else None
    assert empty is not None and not any(r[empty].strip() for r in rows[1:])
    total = _total_row(rows, COST["aws-cur"])
    total[empty] = "0"
    store, sources = _read(_write(rows + [total], tmp_path / "bill.csv"))
    assert _figures(store, sources) == originals[CUR]
    total[empty] = "1"
    with pytest.raises(InputError) as e:
        _read(_write(rows + [total], tmp_path / "off.csv"))
    assert e.value.column == "reservation/EffectiveCost"


def test_a_total_row_without_a_cost_is_refused_saying_so(samples, tmp_path):
    rows = _rows(samples, CUR)
    total = _total_row(rows, COST["aws-cur"])
    total[rows[0].index(COST["aws-cur"])] = ""
    path = _write(rows + [total], tmp_path / "cur.csv")
    with pytest.raises(InputError) as e:
        _read(path)
    assert e.value.message == ("a last line that names a total holds no cost (a total a spreadsheet added?); "
                               "remove it")
    assert (e.value.path, e.value.line) == (str(path), len(rows) + 1)


def test_a_file_of_only_a_total_row_is_never_read_as_a_billing_line(samples, tmp_path):
    rows = _rows(samples, CUR)
    total = _total_row(rows, COST["aws-cur"])
    total[rows[0].index(COST["aws-cur"])] = "0"
    with pytest.raises(InputError) as e:
        _read(_write([rows[0], total], tmp_path / "cur.csv"))
    assert e.value.message == "the file has a header but no billing lines"


def test_twin_names_get_the_suffix_duckdb_gives():
    assert csv_dialect.unique_names(["a", "A"]) == ["a", "A_1"]
    assert csv_dialect.unique_names(["a", "a_1", "A"]) == ["a", "a_1", "A_1_1"]
    assert csv_dialect.unique_names(["a", "A", "a_1", "A_1"]) == ["a", "A_1", "a_1_1", "A_1_2"]

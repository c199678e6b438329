"""Reliability: bad and odd input, tried on purpose, through the command line, and faults while writing.

Every case ends in one of two ways: one error line naming the file (and the line and column where there is one)
with exit code 2 and nothing written, or, where the input is legal but odd, a correct result with a warning.
Never a traceback, never a hang (the slow cases run in a subprocess with a timeout), never half a report.
docs/reliability.md lists every case and what the auditor does.

The corpus is fixtures/bad/ (small files, each a case here or in test_bad_input.py); what is too big to keep
(a 50 MB line, a million-line export to interrupt) is generated in tmp_path.
"""

from __future__ import annotations

import csv
import errno
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from unprivileged import open_folder, run_as_nobody

from auditor.cli import cli

REPO = Path(__file__).resolve().parents[1]
BAD = REPO / "fixtures" / "bad"
GPU_FIXTURE = REPO / "fixtures" / "billing" / "cur-gpu-spot.csv"
OUTPUTS = ("audit.json", "report.html", "report.md", "findings.csv", "jobs.csv", "actions.csv")
CUR_HEADER = ("identity/LineItemId,lineItem/LineItemType,lineItem/UsageStartDate,lineItem/UsageEndDate,"
              "lineItem/UsageType,lineItem/UsageAmount,lineItem/CurrencyCode,lineItem/UnblendedCost")

# file, line and column the one error line names (None: the file has none to name), words it says
ERRORS = [
    ("cur-latin1.csv", 1, None, "not UTF-8"),
    ("cur-semicolon.csv", 1, None, "separated by semicolons"),
    ("cur-short-row.csv", 3, None, "3 fields where the header has 8"),
    ("cur-open-quote.csv", 4, None, "never closed"),
    ("cur-nan-cost.csv", 3, "lineItem/UnblendedCost", "'NaN' is not a number"),
    ("cur-infinity-cost.csv", 4, "lineItem/UnblendedCost", "'-Infinity' is not a number"),
    ("cur-huge-cost.csv", 2, "lineItem/UnblendedCost", "is out of range"),
    ("focus-nan-cost.csv", 3, "BilledCost", "'nan' is not a number"),
    ("focus-truncated.parquet", None, None, "cut short or damaged"),
    # tried line by line in test_bad_input.py; here through `audit`, which must write nothing
    ("empty.csv", None, None, "empty"),
    ("cur-header-only.csv", None, None, "no billing lines"),
    ("cur-truncated.csv.gz", None, None, "cannot read"),
    ("garbage.csv", None, None, "binary"),
    ("cur-utf16.csv", 1, None, "UTF-16"),
    ("cur-latin1-row.csv", 3, "lineItem/UsageType", "byte 0xe9 is not UTF-8"),
    ("unknown-format.csv", 1, None, "not a billing export"),
    ("cur-bad-cost.csv", 4, "lineItem/UnblendedCost", "'abc' is not a number"),
    ("cur-ragged.csv", 3, None, "9 fields where the header has 8"),
    ("focus-bad-date.csv", 4, "ChargePeriodStart", "is not a UTC time"),
    ("focus-bad-tags.csv", 3, "Tags", "is not a JSON object"),
]
# legal but odd: read, totalled exactly, and (where odd) a warning that says so
LEGAL = [
    ("cur-bom.csv", []),
    ("cur-credits.csv", []),
    ("cur-odd-dates.csv", ["1 line(s) charged before 2000 (the first on 1999-12-31)",
                           "1 line(s) charged after today (the last on 2099-01-01)"]),
    ("cur-two-currencies.csv", ["lines in 3 currencies (EUR, JPY, USD); each is totalled on its own"]),
    # two AWS tags that differ only in case (AWS tag keys are case-sensitive): two tags (was refused)
    ("cur-tag-case.csv", []),
]


class Hung(BaseException):
    """Raised by `deadline`; a BaseException, so the CLI's last-resort handler cannot turn a hang into exit 2."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail, rather than hang, an in-process run that takes longer than `seconds`."""
    def expire(signum, frame):
        raise Hung(f"still running after {seconds}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("policy") / "policy.yml"
    path.write_text("policy: Reliability\nowner: finops@example.com\n", encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def ctrl_c_reaches_children():
    """The runs these tests interrupt get SIGINT as a terminal's Ctrl-C gives it: a suite started where SIGINT is
    ignored (a background job of a script, `cmd &`) would hand that on to every process it starts, which Python
    then leaves ignored, and a run it interrupts would finish instead. A handler of its own here is reset to the
    default in each child it starts."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def audit(policy: Path, out: Path, *billing: Path | str, extra: tuple[str, ...] = ()):
    with deadline(60):
        return CliRunner().invoke(cli, ["audit", "-q", "--policy", str(policy), "--out", str(out), *extra,
                                        *[str(b) for b in billing]])


def the_error(result) -> str:
    """The one line a failed run prints; no traceback, no other line."""
    assert "Traceback" not in result.output, result.output
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-auditor: error: "), result.stderr
    return lines[0]


def cli_subprocess(*args: str, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """The installed command in a fresh process (`python -m auditor`), killed if it outlives `timeout`."""
    return subprocess.run([sys.executable, "-m", "auditor", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=REPO)


def cent(amount: Decimal) -> str:
    return str(amount.quantize(Decimal("0.01"), ROUND_HALF_EVEN))


def csv_totals(path: Path) -> dict[str, str]:
    """The export's cost column summed per currency by Python's csv module and Decimal: an independent count."""
    totals: dict[str, Decimal] = {}
    with open(path, newline="", encoding="utf-8-sig") as f:
        for row in csv.DictReader(f):
            cur = row["lineItem/CurrencyCode"] or "USD"
            totals[cur] = totals.get(cur, Decimal(0)) + Decimal(row["lineItem/UnblendedCost"])
    return {c: cent(v) for c, v in totals.items()}


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ---- the corpus -------------------------------------------------------------------------------------------

def test_every_bad_fixture_is_tried():
    from test_bad_input import CASES as LINE_CASES
    from test_bad_input import OTHER_CASES

    tried = {c[0] for c in ERRORS} | {c[0] for c in LEGAL} | {c[0] for c in LINE_CASES} | set(OTHER_CASES)
    assert {p.name for p in BAD.iterdir()} == tried


@pytest.mark.parametrize(("name", "line", "column", "words"), ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_file_is_one_error_line_and_nothing_written(policy, tmp_path, name, line, column, words):
    out = tmp_path / "out"
    result = audit(policy, out, BAD / name)
    assert result.exit_code == 2, result.output
    error = the_error(result)
    where = f"{BAD / name}:{line}: " if line else f"{BAD / name}: "
    assert error.startswith(f"gpu-auditor: error: {where}"), error
    if column:
        assert f"column {column!r}: " in error, error
    assert words in error, error
    assert not out.exists(), "a failed audit created its output folder"


@pytest.mark.heavy
@pytest.mark.parametrize(("name", "warnings"), LEGAL, ids=[c[0] for c in LEGAL])
def test_odd_but_legal_file_is_read_exactly_with_a_warning(policy, tmp_path, name, warnings):
    out = tmp_path / "out"
    result = audit(policy, out, BAD / name)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)
    lines = sum(1 for _ in open(BAD / name, encoding="utf-8-sig")) - 1
    assert doc["inputs"]["billing"][0]["rows"] == lines  # every line kept: credits and odd dates too
    assert doc["summary"]["billed_cost"] == csv_totals(BAD / name)
    printed = [w.removeprefix("warning: ") for w in result.stderr.splitlines() if w.startswith("warning: ")]
    for words in warnings:
        assert any(words in w for w in printed), result.stderr
        assert any(words in w for w in doc["warnings"]), doc["warnings"]
    if not warnings:
        assert not any(str(BAD / name) in w for w in printed), result.stderr


def test_credits_and_refunds_are_kept_negative(policy, tmp_path):
    out = tmp_path / "out"
    assert audit(policy, out, BAD / "cur-credits.csv").exit_code == 0
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert doc["summary"]["billed_cost"] == {"USD": "6.85"}  # 10.00 - 2.50 - 0.75 + 0.10
    from auditor.tables.store import Store

    store = Store()
    store.load_billing([BAD / "cur-credits.csv"])
    rows = store.lines().execute("SELECT ChargeCategory, sum(BilledCost) FROM lines GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [("Credit", Decimal("-3.25")), ("Tax", Decimal("0.10")), ("Usage", Decimal("10.00"))]


def test_currencies_are_never_added(policy, tmp_path):
    out = tmp_path / "out"
    assert audit(policy, out, BAD / "cur-two-currencies.csv").exit_code == 0
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert doc["summary"]["billed_cost"] == {"EUR": "2.25", "JPY": "1000.00", "USD": "1.75"}
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "1,004" not in md and "1004" not in md  # 1.75 + 2.25 + 1000 appears nowhere


@pytest.mark.heavy
def test_the_same_export_given_twice_is_counted_once(policy, tmp_path):
    copy = tmp_path / "copy-of-cur.csv"
    shutil.copyfile(GPU_FIXTURE, copy)
    once, twice = tmp_path / "once", tmp_path / "twice"
    assert audit(policy, once, GPU_FIXTURE).exit_code == 0
    result = audit(policy, twice, GPU_FIXTURE, copy, GPU_FIXTURE)
    assert result.exit_code == 0, result.output
    assert f"{copy}: same content as {GPU_FIXTURE}; read once" in result.stderr
    a, b = (json.loads((d / "audit.json").read_text(encoding="utf-8")) for d in (once, twice))
    assert b["summary"]["billed_cost"] == a["summary"]["billed_cost"] == csv_totals(GPU_FIXTURE)
    assert b["summary"]["rows"] == a["summary"]["rows"] == 10
    assert [f["fingerprint"] for f in b["findings"]] == [f["fingerprint"] for f in a["findings"]]


# ---- what a spreadsheet leaves in a CSV it saves ----------------------------------------------------------

def _excel_saved(path: Path, total: str | None, label: str = "Total") -> Path:
    """The GPU fixture as Excel saves it after a user added a total row: CRLF, the total (label in the first column,
    the sum under the cost, the rest empty), then rows of only delimiters."""
    rows = list(csv.reader(open(GPU_FIXTURE, newline="", encoding="utf-8-sig")))
    width = len(rows[0])
    if total is not None:
        row = [""] * width
        row[0], row[rows[0].index("lineItem/UnblendedCost")] = label, total
        rows.append(row)
    rows += [[""] * width] * 4
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\r\n").writerows(rows)
    return path


def test_an_excel_saved_export_reconciles_to_its_real_lines(policy, tmp_path):
    """Rows of only delimiters and a matching total row are left out with a warning each, and the audit's total is
    the real lines' to the cent (the total row counted would double it); a total that is not the sum is refused."""
    want = csv_totals(GPU_FIXTURE)  # {"USD": ...}: the real lines, by Python's csv and Decimal
    path = _excel_saved(tmp_path / "cur.csv", want["USD"], label="Grand Total")
    out = tmp_path / "out"
    result = audit(policy, out, path)
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert doc["summary"]["billed_cost"] == want
    assert doc["inputs"]["billing"][0]["rows"] == 10
    assert f"{path}: line 12 is a total row ({want['USD']}, the sum of lineItem/UnblendedCost over the lines above " \
           "it, a spreadsheet's?); not read" in doc["warnings"]
    assert f"{path}: 4 line(s) hold no value, only delimiters (a spreadsheet's empty rows) at line(s) 13, 14, 15, " \
           "16; not read" in doc["warnings"]

    wrong = _excel_saved(tmp_path / "wrong.csv", str(Decimal(want["USD"]) + 1))
    out = tmp_path / "out-wrong"
    result = audit(policy, out, wrong)
    assert result.exit_code == 2
    assert the_error(result).startswith(f"gpu-auditor: error: {wrong}:12: column 'lineItem/UnblendedCost': a last "
                                        "line that names a total, whose ")
    assert not out.exists()


# ---- very long lines --------------------------------------------------------------------------------------

def _cur_with_long_line(path: Path, field_bytes: int, position: str, pad_lines: int = 0) -> int:
    """A CUR whose line at `position` (middle or last) has a usage type `field_bytes` long; its line number."""
    rows = [f"li-{i},Usage,2026-07-01T00:00:00Z,2026-07-01T01:00:00Z,BoxUsage:g5.xlarge,1,USD,1.006"
            for i in range(3 + pad_lines)]
    at = len(rows) // 2 if position == "middle" else len(rows) - 1
    data = (CUR_HEADER + "\n").encode()
    for i, row in enumerate(rows):
        if i == at:
            row = row.replace("BoxUsage:g5.xlarge", "x" * field_bytes)
        data += row.encode() + b"\n"
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(data)
    return at + 2


@pytest.mark.slow
@pytest.mark.parametrize(("name", "position"), [("middle.csv", "middle"), ("last.csv", "last"),
                                                 ("last.csv.gz", "last"), ("middle.csv.gz", "middle")])
def test_a_50_mb_line_is_an_error_naming_it(tmp_path, policy, name, position):
    """DuckDB 2.0's parallel CSV reader drops a last line over its 32 MB buffer without a word (a silent
    miscount): such files go to the single-threaded reader, which stops at the line (detect.has_long_line)."""
    path = tmp_path / name
    line = _cur_with_long_line(path, 50 << 20, position)
    out = tmp_path / "out"
    started = time.monotonic()
    proc = cli_subprocess("audit", "-q", "--policy", str(policy), "--out", str(out), str(path), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"gpu-auditor: error: {path}:{line}: cannot read the file: the line is longer than 2,000,000 bytes, "
        "the longest line gpu-auditor reads"]
    assert not out.exists()
    assert time.monotonic() - started < 90


@pytest.mark.slow
def test_a_100_mb_line_in_a_gzip_csv_is_named(tmp_path, policy):
    """It was reported as a line with the wrong number of fields: DuckDB holds a line whole before refusing it,
    and a gzip file cannot be checked before it is inflated; on DuckDB's error the file is inflated once more,
    only up to the long line (detect.gzip_line_over)."""
    path = tmp_path / "long.csv.gz"
    line = _cur_with_long_line(path, 100 << 20, "middle", pad_lines=6)
    proc = cli_subprocess("audit", "-q", "--policy", str(policy), "--out", str(tmp_path / "out"), str(path),
                          timeout=240)
    assert proc.stderr.strip().splitlines() == [
        f"gpu-auditor: error: {path}:{line}: cannot read the file: the line is longer than 2,000,000 bytes, "
        "the longest line gpu-auditor reads"], proc.stderr
    assert proc.returncode == 2 and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_gzip_bomb_is_named_with_its_file_and_line(tmp_path, policy):
    """4 GiB of one line in 4 MB of gzip: DuckDB's allocation error named no file; the file and the line now. The
    line runs on through 256 gzip members of 16 MiB each (one member, compressed once, written 256 times: what
    any gzip reader reads as one stream, and seconds to make where compressing 4 GiB took most of a minute)."""
    path = tmp_path / "bomb.csv.gz"
    member = gzip.compress(b"x" * (1 << 24), compresslevel=9)
    with open(path, "wb") as f:
        f.write(gzip.compress((CUR_HEADER + "\nli-1,Usage,2026-07-01T00:00:00Z,2026-07-01T01:00:00Z,"
                               "BoxUsage:g5.xlarge,1,USD,1.006\nli-2,Usage,2026-07-01T00:00:00Z,").encode()))
        for _ in range(256):
            f.write(member)
    proc = cli_subprocess("audit", "-q", "--policy", str(policy), "--out", str(tmp_path / "out"), str(path),
                          timeout=240)
    assert proc.stderr.strip().splitlines() == [
        f"gpu-auditor: error: {path}:3: cannot read the file: the line is longer than 2,000,000 bytes, "
        "the longest line gpu-auditor reads"], proc.stderr
    assert proc.returncode == 2 and not (tmp_path / "out").exists()


def test_gzip_line_over_counts_lines_across_slices_and_members(tmp_path):
    from auditor.providers.billing.detect import gzip_line_over

    path = tmp_path / "x.csv.gz"
    for data, limit, expected in [(b"a,b\n1,2\n" + b"x" * 50 + b"\n3,4\n", 20, 3), (b"a\n" * 10, 20, None),
                                  (b"a\n1\n" + b"y" * 30, 20, 3), (b"ab" * 5 + b"\n", 5, 1)]:
        path.write_bytes(gzip.compress(data))
        for block in (3, 7, 1 << 20):
            assert gzip_line_over(path, limit, block) == expected, (data[:12], block)
    path.write_bytes(gzip.compress(b"a\nb\n") + gzip.compress(b"c\n" + b"z" * 100 + b"\n"))
    assert gzip_line_over(path, 20, 3) == gzip_line_over(path, 20) == 4
    path.write_bytes(gzip.compress(b"a\n" * 10)[:-6])  # cut short: not this check's to name
    assert gzip_line_over(path, 20) is None


@pytest.mark.slow
def test_a_2_gb_line_is_refused_without_loading_it(tmp_path, policy):
    """A sparse file: after 1,000 ordinary lines, one runs 2 GiB (zero bytes, taking no disk). The line is found
    and named before DuckDB would hold it in memory (detect.first_line_over), within a bounded time."""
    path = tmp_path / "two-gb-line.csv"
    with open(path, "wb") as f:
        f.write((CUR_HEADER + "\n").encode())
        for i in range(1000):
            f.write(f"li-{i},Usage,2026-07-01T00:00:00Z,2026-07-01T01:00:00Z,BoxUsage:g5.xlarge,1,USD,1\n".encode())
        f.write(b"li-x,Usage,2026-07-01T00:00:00Z,2026-07-01T01:00:00Z,")
        f.seek(2 << 30, os.SEEK_CUR)
        f.write(b",1,USD,1\n")
    started = time.monotonic()
    proc = cli_subprocess("inspect", str(path), timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (f"gpu-auditor: error: {path}:1002: cannot read the file: the line is longer than "
                                   "2,000,000 bytes, the longest line gpu-auditor reads")
    assert time.monotonic() - started < 90


def test_a_long_line_under_the_limit_is_read(tmp_path, policy):
    """A 1.9 MB value in a 2.2 MB file takes the single-threaded path and is counted like any other line."""
    path = tmp_path / "long-but-legal.csv"
    _cur_with_long_line(path, 1_900_000, "last", pad_lines=3_000)
    assert path.stat().st_size > 2 << 20
    from auditor.providers.billing.detect import has_long_line

    assert has_long_line(path) and not has_long_line(GPU_FIXTURE)
    out = tmp_path / "out"
    result = audit(policy, out, path)
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert doc["inputs"]["billing"][0]["rows"] == 3_003
    assert doc["summary"]["billed_cost"] == {"USD": cent(Decimal("1.006") * 3_003)}


def test_a_header_without_a_line_break_is_named_briefly(tmp_path, policy):
    path = tmp_path / "one-line.csv"
    path.write_bytes(b"x" * (3 << 20))
    result = audit(policy, tmp_path / "out", path)
    error = the_error(result)
    assert f"{path}:1: not a billing export" in error and len(error) < 400, error[:500]


def test_a_damaged_parquet_body_is_named(tmp_path, policy):
    """Footer intact, data pages overwritten: the read fails at the data, and says so in one line."""
    path = tmp_path / "damaged.parquet"
    con = duckdb.connect()
    con.execute(f"""COPY (SELECT (i * 1.25)::DECIMAL(12, 2) AS BilledCost, 'USD' AS BillingCurrency,
        TIMESTAMP '2024-09-01' + INTERVAL (i) HOUR AS ChargePeriodStart,
        TIMESTAMP '2024-09-01' + INTERVAL (i + 1) HOUR AS ChargePeriodEnd, 'Usage' AS ChargeCategory,
        'AWS' AS ProviderName, 'i-0' || i AS ResourceId FROM range(5000) t(i))
        TO '{path}' (FORMAT parquet, COMPRESSION zstd)""")
    con.close()
    data = bytearray(path.read_bytes())
    data[8:len(data) // 2] = os.urandom(len(data) // 2 - 8)
    path.write_bytes(bytes(data))
    result = audit(policy, tmp_path / "out", path)
    assert result.exit_code == 2, result.output
    assert str(path) in the_error(result)
    assert not (tmp_path / "out").exists()


# ---- policy and inventory edge cases not covered in test_policy.py ----------------------------------------

def test_yaml_bomb_through_the_cli_fails_fast(tmp_path):
    lol = "policy: bomb\nowner: o@example.com\nx: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for i in range(1, 12):
        prev = "a" if i == 1 else f"a{i - 1}"
        lol += f"x{i}: &a{i} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
    path = tmp_path / "bomb.yml"
    path.write_text(lol, encoding="utf-8")
    started = time.monotonic()
    proc = cli_subprocess("policy", "validate", str(path), timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"gpu-auditor: error: {path}:4: YAML aliases (*name) are not allowed in a policy"]
    assert time.monotonic() - started < 30


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["binary", "folder", "deep"])
def test_strange_policy_files(tmp_path, kind):
    path = tmp_path / "policy.yml"
    if kind == "binary":
        path.write_bytes(b"policy: \x00\x01\xff\xfe" + os.urandom(64))
    elif kind == "folder":
        path.mkdir()
    else:  # nesting deeper than Python's recursion limit
        path.write_text("policy: deep\nowner: o@example.com\nclauses: " + "[" * 50_000 + "]" * 50_000 + "\n",
                        encoding="utf-8")
    with deadline(60):
        result = CliRunner().invoke(cli, ["policy", "validate", str(path)])
    assert result.exit_code == 2
    if kind == "deep":
        assert the_error(result) == f"gpu-auditor: error: {path}: nested too deeply to be a policy"
        return
    if kind == "binary":  # \x00 and \x01 are UTF-8; \xff is the 11th byte of line 1
        assert the_error(result) == (f"gpu-auditor: error: {path}:1: the policy is not UTF-8 text: byte 0xff, the "
                                     "line's byte 11 (Latin-1 or Windows-1252?); save it as UTF-8")
        return
    assert the_error(result).startswith(f"gpu-auditor: error: {path}: cannot read the policy")


@pytest.mark.parametrize(("change", "words"), [
    (lambda d: d["gpu_usage"][0].update(mean_util_pct=float("nan")), "mean_util_pct: expected a finite number"),
    (lambda d: d["assets"][0].update(gpu_memory_gb=float("inf")), "gpu_memory_gb: expected a finite number"),
    (lambda d: d["assets"][0].update(gpu_count=10**30), "assets[0].gpu_count: must be at most"),
    (lambda d: d["jobs"][0].update(training_s=2**64), "jobs[0].training_s: must be at most"),
    ("deep", "nested too deeply"),
    ("truncated", "not valid JSON"),
], ids=["nan", "infinity", "huge-int", "huge-bigint", "deep", "truncated"])
def test_strange_inventories(tmp_path, policy, change, words):
    inventory = tmp_path / "inventory.json"
    text = (REPO / "fixtures" / "demo" / "inventory.json").read_text(encoding="utf-8")
    if change == "deep":
        text = '{"version": 1, "assets": ' + "[" * 100_000 + "]" * 100_000 + "}"
    elif change == "truncated":
        text = text[: len(text) // 2]
    else:
        doc = json.loads(text)
        change(doc)
        text = json.dumps(doc)
    inventory.write_text(text, encoding="utf-8")
    result = audit(policy, tmp_path / "out", GPU_FIXTURE, extra=("--inventory", str(inventory)))
    assert result.exit_code == 2, result.output
    error = the_error(result)
    assert error.startswith(f"gpu-auditor: error: {inventory}"), error
    assert words in error, error
    assert not (tmp_path / "out").exists()


INVENTORY = (REPO / "fixtures" / "demo" / "inventory.json").read_text(encoding="utf-8")


@pytest.mark.parametrize(("data", "message"), [
    # another encoding: Python's codec words, with a byte offset into the file, named no line
    (INVENTORY.replace('"vision"', '"visi\u00f3n"', 1).encode("latin-1"),
     "{path}:22: the inventory is not UTF-8 text: byte 0xf3, the line's byte 22 (Latin-1 or Windows-1252?); save "
     "it as UTF-8"),
    (("\ufeff" + INVENTORY).encode("utf-16-le"), "{path}:1: the inventory is UTF-16 text; save it as UTF-8"),
    # a key twice: Python kept the last one without a word
    (INVENTORY.replace("{", '{"assets": [], ', 1).encode(), "{path}: not valid JSON: the key 'assets' twice in one "
                                                             "object"),
], ids=["latin-1", "utf-16", "key-twice"])
def test_an_inventory_in_another_encoding_or_with_a_key_twice_is_one_line(tmp_path, policy, data, message):
    inventory = tmp_path / "inventory.json"
    inventory.write_bytes(data)
    result = audit(policy, tmp_path / "out", GPU_FIXTURE, extra=("--inventory", str(inventory)))
    assert result.exit_code == 2, result.output
    assert the_error(result) == "gpu-auditor: error: " + message.format(path=inventory)
    assert not (tmp_path / "out").exists()


@pytest.mark.heavy
def test_an_inventory_saved_with_a_byte_order_mark_is_read(tmp_path, policy):
    """Notepad writes one: Python's json refused it ("Unexpected UTF-8 BOM (decode using utf-8-sig)")."""
    inventory = tmp_path / "inventory.json"
    inventory.write_bytes(("\ufeff" + INVENTORY).encode("utf-8"))
    result = audit(policy, tmp_path / "out", GPU_FIXTURE, extra=("--inventory", str(inventory)))
    assert result.exit_code in (0, 1), result.output
    assert (tmp_path / "out" / "audit.json").exists()


# ---- unreadable inputs: named, never skipped (run as an unprivileged user: root reads anything) ----------

@pytest.fixture
def reachable() -> Iterator[Path]:
    """A folder the unprivileged user can reach, with a policy and a billing folder of one good export."""
    folder = open_folder()
    (folder / "billing").mkdir()
    shutil.copy(GPU_FIXTURE, folder / "billing" / "2026-07.csv")
    (folder / "policy.yml").write_text("policy: Permissions\nowner: finops@example.com\n", encoding="utf-8")
    for p in [folder, *folder.rglob("*")]:
        p.chmod(0o777 if p.is_dir() else 0o644)
    yield folder
    for p in folder.rglob("*"):  # give everything back, so that it can be removed
        if not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(folder)


def audit_as_nobody(folder: Path, *billing: Path | str, extra: tuple[str, ...] = ()):
    return run_as_nobody("audit", "-q", "--policy", folder / "policy.yml", "--out", folder / "out", *extra, *billing)


def error_lines(result) -> list[str]:
    """The lines a refused run prints: each one error, no traceback, exit code 2."""
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines and all(line.startswith("gpu-auditor: error: ") for line in lines), result.stderr
    return lines


@pytest.mark.heavy
def test_the_unprivileged_run_reads_what_it_may(reachable):
    """The control: the same files, readable, give a report, so the refusals below are the auditor's."""
    result = audit_as_nobody(reachable, reachable / "billing")
    assert result.exit_code == 0, result.stderr
    assert (reachable / "out" / "audit.json").is_file()


@pytest.mark.heavy
def test_a_subfolder_without_read_permission_refuses_the_audit(reachable):
    """It was skipped: exit 0 and a report missing a month."""
    sub = reachable / "billing" / "2026-08"
    sub.mkdir()
    shutil.copy(GPU_FIXTURE, sub / "2026-08.csv")
    sub.chmod(0o300)  # may enter, may not list
    assert error_lines(audit_as_nobody(reachable, reachable / "billing")) == [
        f"gpu-auditor: error: {sub}: cannot read the folder: Permission denied"]
    assert not (reachable / "out").exists()
    sub.chmod(0o000)
    assert error_lines(audit_as_nobody(reachable, reachable / "billing")) == [
        f"gpu-auditor: error: {sub}: cannot read the folder: Permission denied"]


@pytest.mark.heavy
@pytest.mark.parametrize("named", [False, True], ids=["in-a-folder", "named"])
def test_an_unreadable_file_refuses_the_audit(reachable, named):
    """It was `internal error: PermissionError` in a folder, and Click's four-line usage message when named."""
    bad = reachable / "billing" / "2026-09.csv"
    shutil.copy(GPU_FIXTURE, bad)
    bad.chmod(0o200)
    result = audit_as_nobody(reachable, bad if named else reachable / "billing")
    assert error_lines(result) == [f"gpu-auditor: error: {bad}: cannot read the billing file: Permission denied"]
    assert not (reachable / "out").exists()


def test_a_file_in_a_folder_without_search_permission_is_named(reachable):
    locked = reachable / "locked"
    locked.mkdir()
    shutil.copy(GPU_FIXTURE, locked / "x.csv")
    locked.chmod(0o600)  # may not enter: the file cannot even be looked at
    assert error_lines(audit_as_nobody(reachable, locked / "x.csv")) == [
        f"gpu-auditor: error: {locked / 'x.csv'}: cannot read the billing file: Permission denied"]


@pytest.mark.heavy
@pytest.mark.parametrize("named", [False, True], ids=["in-a-folder", "named"])
def test_dangling_and_looping_links_refuse_the_audit(reachable, named):
    """Both were skipped without a word."""
    dangling, looping = reachable / "billing" / "2026-08.csv", reachable / "billing" / "2026-09.csv"
    dangling.symlink_to(reachable / "gone.csv")
    looping.symlink_to(looping)
    if named:
        for link, words in ((dangling, f"a symbolic link to {reachable / 'gone.csv'}, which does not exist"),
                            (looping, "a symbolic link that loops")):
            (line,) = error_lines(audit_as_nobody(reachable, link))
            assert line.startswith(f"gpu-auditor: error: {link}: cannot read the billing file: {words}"), line
        return
    lines = error_lines(audit_as_nobody(reachable, reachable / "billing"))
    assert len(lines) == 2, lines  # every path that cannot be read, one line each
    assert lines[0] == (f"gpu-auditor: error: {dangling}: cannot read the billing file: a symbolic link to "
                        f"{reachable / 'gone.csv'}, which does not exist")
    assert lines[1].startswith(f"gpu-auditor: error: {looping}: ") and "loops" in lines[1]
    assert not (reachable / "out").exists()


def test_a_link_back_to_a_folder_above_is_a_loop_not_a_second_read(reachable):
    (reachable / "billing" / "again").symlink_to(reachable)
    assert error_lines(audit_as_nobody(reachable, reachable / "billing")) == [
        f"gpu-auditor: error: {reachable / 'billing' / 'again'}: cannot read the folder: a symbolic link back to a "
        "folder above it (a loop)"]


def test_an_unreadable_snapshot_billing_folder_is_named(reachable):
    snap = reachable / "snap"
    (snap / "billing").mkdir(parents=True)
    shutil.copy(GPU_FIXTURE, snap / "billing" / "cur.csv")
    (snap / "inventory.json").write_text('{"version": 1, "assets": [], "gpu_usage": [], "jobs": []}\n')
    (snap / "inventory.json").chmod(0o644)
    (snap / "billing").chmod(0o000)
    (snap).chmod(0o755)
    assert error_lines(audit_as_nobody(reachable, snap)) == [
        f"gpu-auditor: error: {snap / 'billing'}: cannot read the folder: Permission denied"]


@pytest.mark.heavy
@pytest.mark.parametrize("what", ["policy", "inventory", "previous", "baseline"])
def test_unreadable_policy_inventory_and_saved_audits_are_one_line(reachable, what):
    target = reachable / f"unreadable-{what}"
    target.write_text("{}\n")
    target.chmod(0o200)
    option = {"policy": "--policy", "inventory": "--inventory", "previous": "--previous",
              "baseline": "--baseline"}[what]
    args = ["audit", "-q", "--out", reachable / "out", "--policy", reachable / "policy.yml", option, target,
            reachable / "billing"]
    if what == "policy":
        args = ["audit", "-q", "--out", reachable / "out", "--policy", target, reachable / "billing"]
    (line,) = error_lines(run_as_nobody(*args))
    assert line.startswith(f"gpu-auditor: error: {target}: cannot read") and line.endswith("Permission denied")


def test_gate_names_unreadable_manifests(reachable):
    manifests = reachable / "k8s"
    (manifests / "team").mkdir(parents=True)
    good = REPO / "fixtures" / "manifests" / "kubernetes"
    shutil.copy(next(good.glob("*.yaml")), manifests / "job.yaml")
    (manifests / "job.yaml").chmod(0o644)
    (manifests / "team").chmod(0o000)
    (manifests / "gone.yaml").symlink_to(reachable / "gone.yaml")
    policy = REPO / "fixtures" / "manifests" / "policy.yml"
    shutil.copy(policy, reachable / "gate-policy.yml")
    (reachable / "gate-policy.yml").chmod(0o644)
    result = run_as_nobody("gate", "--policy", reachable / "gate-policy.yml", manifests)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert [line for line in result.stdout.splitlines() if ": error: " in line] == [
        f"{manifests / 'gone.yaml'}: error: cannot read the manifest: a symbolic link to {reachable / 'gone.yaml'}, "
        "which does not exist",
        f"{manifests / 'team'}: error: cannot read the folder: Permission denied"], result.stdout
    (manifests / "team").chmod(0o755)
    (manifests / "gone.yaml").unlink()
    assert run_as_nobody("gate", "--policy", reachable / "gate-policy.yml", manifests).exit_code in (0, 1)


# ---- faults while writing: the previous report stays ------------------------------------------------------

@pytest.fixture()
def previous(policy, tmp_path) -> tuple[Path, dict[str, bytes]]:
    """An output folder holding a complete earlier report, and its bytes."""
    out = tmp_path / "out"
    assert audit(policy, out, GPU_FIXTURE).exit_code == 0
    (out / "notes.txt").write_text("kept by the user\n", encoding="utf-8")
    return out, files_under(out)


class _FullDisk:
    """A file whose write fails as a full disk does."""

    def __init__(self, real):
        self.real = real

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()

    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.heavy
def test_disk_full_keeps_the_previous_report(policy, previous, monkeypatch):
    out, before = previous
    real_fdopen = os.fdopen
    opened = []

    def fdopen(fd, *args, **kwargs):
        f = real_fdopen(fd, *args, **kwargs)
        opened.append(fd)
        return _FullDisk(f) if len(opened) == 3 else f  # the third output fills the disk

    monkeypatch.setattr(os, "fdopen", fdopen)
    result = audit(policy, out, BAD / "cur-credits.csv")
    monkeypatch.undo()
    assert result.exit_code == 2
    error = the_error(result)
    assert f"{out}: cannot write the report: No space left on device" in error, error
    assert "previous report is left as it was" in error
    assert files_under(out) == before  # same files, same bytes, no temporary file left


@pytest.mark.heavy
@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_unwritable_output_folder_keeps_the_previous_report(policy, previous, monkeypatch, code):
    """Tests run as root, where chmod blocks nothing: the refusal is made the system's, as a read-only mount or a
    folder without write permission gives it to every new file and folder (beside the folder and in it)."""
    out, before = previous
    from auditor import atomic

    def refusing(real):
        def make(*args, dir=None, **kwargs):
            if dir is not None and Path(dir) in (out, out.parent):
                raise OSError(code, os.strerror(code))
            return real(*args, dir=dir, **kwargs)
        return make

    monkeypatch.setattr(atomic.tempfile, "mkdtemp", refusing(atomic.tempfile.mkdtemp))
    monkeypatch.setattr(atomic.tempfile, "mkstemp", refusing(atomic.tempfile.mkstemp))
    result = audit(policy, out, BAD / "cur-credits.csv")
    monkeypatch.undo()
    assert result.exit_code == 2
    assert f"cannot write the report: {os.strerror(code)}" in the_error(result)
    assert files_under(out) == before


def test_output_folder_the_system_refuses(policy):
    """A real refusal, root or not: /proc takes no new folders."""
    out = Path("/proc/gpu-auditor-test/report")
    result = audit(policy, out, GPU_FIXTURE)
    assert result.exit_code == 2
    assert the_error(result).startswith(f"gpu-auditor: error: {out}: cannot create the output folder")


# ---- Ctrl-C -----------------------------------------------------------------------------------------------

@pytest.mark.heavy
@pytest.mark.parametrize("files", [1, 2])
def test_ctrl_c_while_reading_leaves_nothing_behind(tmp_path, policy, files):
    """SIGINT while DuckDB reads a million lines (or two files of them, read side by side): exit 130 at once,
    one line, the previous report untouched, no temporary file (report temp files, DuckDB's spill folder)
    left."""
    con = duckdb.connect()
    bigs = [tmp_path / f"big-{k}.csv" for k in range(files)]
    for k, big in enumerate(bigs):
        con.execute(f"""COPY (SELECT 'li-' || i AS "identity/LineItemId", 'Usage' AS "lineItem/LineItemType",
            '2026-07-01T00:00:00Z' AS "lineItem/UsageStartDate", '2026-07-01T01:00:00Z' AS "lineItem/UsageEndDate",
            'BoxUsage:g5.xlarge' AS "lineItem/UsageType", '1' AS "lineItem/UsageAmount",
            'USD' AS "lineItem/CurrencyCode", (i % 1000 + {k}) / 100.0 AS "lineItem/UnblendedCost",
            'i-' || (i % 5000) AS "lineItem/ResourceId" FROM range(1000000) t(i)) TO '{big}' (HEADER)""")
    con.close()
    out, before, scratch = _previous_report(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "auditor", "audit", "--policy", str(policy), "--out", str(out),
                             *map(str, bigs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "TMPDIR": str(scratch)})
    try:
        first = proc.stderr.readline()  # "[1/n] reading ...": the read has begun
        assert "reading" in first, first
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=60)
        stopped = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert [line for line in err.strip().splitlines() if "reading" not in line] == [
        "gpu-auditor: interrupted; nothing was written"]
    assert stopped < 5, f"took {stopped:.1f} s to stop"  # the reads are interrupted, not waited for
    assert files_under(out) == before
    assert list(scratch.iterdir()) == []


def _million_lines(path: Path) -> Path:
    con = duckdb.connect()
    con.execute(f"""COPY (SELECT 'li-' || i AS "identity/LineItemId", 'Usage' AS "lineItem/LineItemType",
        '2026-07-01T00:00:00Z' AS "lineItem/UsageStartDate", '2026-07-01T01:00:00Z' AS "lineItem/UsageEndDate",
        'BoxUsage:g5.xlarge' AS "lineItem/UsageType", '1' AS "lineItem/UsageAmount",
        'USD' AS "lineItem/CurrencyCode", (i % 1000) / 100.0 AS "lineItem/UnblendedCost",
        'i-' || (i % 5000) AS "lineItem/ResourceId" FROM range(1000000) t(i)) TO '{path}' (HEADER)""")
    con.close()
    return path


def _previous_report(tmp_path: Path) -> tuple[Path, dict[str, bytes], Path]:
    """An output folder holding last run's report (to prove it is left untouched), its files, and a temp folder."""
    out = tmp_path / "out"
    out.mkdir()
    for name in OUTPUTS:
        (out / name).write_text(f"previous {name}\n", encoding="utf-8")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    return out, files_under(out), scratch


def _start_audit(policy: Path, out: Path, scratch: Path, *billing: Path) -> subprocess.Popen:
    """The installed command on `billing`, its temp folder `scratch`; returned once it reads."""
    proc = subprocess.Popen([sys.executable, "-m", "auditor", "audit", "--policy", str(policy), "--out", str(out),
                             *map(str, billing)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO, env={**os.environ, "TMPDIR": str(scratch)})
    first = proc.stderr.readline()  # "[1/n] reading ...": the read has begun
    assert "reading" in first, first
    time.sleep(0.5)
    return proc


@pytest.mark.heavy
def test_sigterm_is_handled_as_ctrl_c(tmp_path, policy):
    """SIGTERM (a cancelled CI job, `timeout`) killed the run at once and left hundreds of MB of DuckDB spill
    files in the temp folder: now exit 143, one line, the previous report untouched, no temporary file left."""
    big = _million_lines(tmp_path / "big.csv")
    out, before, scratch = _previous_report(tmp_path)
    proc = _start_audit(policy, out, scratch, big)
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert [line for line in err.strip().splitlines() if "reading" not in line] == [
        "gpu-auditor: terminated (SIGTERM); nothing was written"]
    assert files_under(out) == before
    assert list(scratch.iterdir()) == []


@pytest.mark.heavy
def test_the_scratch_folder_of_a_killed_run_is_removed_by_the_next(tmp_path, policy):
    """SIGKILL leaves the scratch folder (nothing runs on SIGKILL); the next run removes it, and never the
    folder of a run still alive (its lock is held)."""
    big = _million_lines(tmp_path / "big.csv")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    killed = _start_audit(policy, tmp_path / "out1", scratch, big)
    killed.kill()
    killed.communicate(timeout=60)
    (left,) = list(scratch.iterdir())
    assert left.name.startswith("gpu-auditor-") and (left / ".lock").is_file()
    alive = _start_audit(policy, tmp_path / "out2", scratch, big)
    alive.send_signal(signal.SIGSTOP)  # alive (its lock held) however fast it would finish
    try:
        for folder in scratch.iterdir():  # as if both had started long ago (younger ones are left alone)
            os.utime(folder / ".lock", (time.time() - 3600, time.time() - 3600))
        (mine,) = [f for f in scratch.iterdir() if f != left]
        result = cli_subprocess("inspect", str(GPU_FIXTURE), timeout=60, env={"TMPDIR": str(scratch)})
        assert result.returncode == 0, result.stderr
        assert sorted(scratch.iterdir()) == [mine]  # the dead run's folder removed, the live run's kept
    finally:
        alive.kill()
        alive.send_signal(signal.SIGCONT)
        alive.communicate(timeout=60)


@pytest.mark.heavy
def test_an_interrupted_read_stops_as_an_interrupt_not_as_a_bad_file(tmp_path):
    """A read interrupted (Ctrl-C, or another file failing beside it) stops at once: no diagnosis of the file,
    which would read it all again and name a line that is fine."""
    import threading

    from auditor.files import sha256_of
    from auditor.providers.billing.detect import sniff
    from auditor.tables.store import Store

    big = tmp_path / "big.csv"
    con = duckdb.connect()
    con.execute(f"""COPY (SELECT 'Usage' AS "lineItem/LineItemType",
        '2026-07-01T00:00:00Z' AS "lineItem/UsageStartDate", '2026-07-01T01:00:00Z' AS "lineItem/UsageEndDate",
        'BoxUsage:g5.xlarge' AS "lineItem/UsageType", '1' AS "lineItem/UsageAmount", 'USD' AS "lineItem/CurrencyCode",
        (i % 1000) / 100.0 AS "lineItem/UnblendedCost", 'i-' || (i % 5000) AS "lineItem/ResourceId"
        FROM range(2000000) t(i)) TO '{big}' (HEADER)""")
    con.close()
    store = Store()
    cursor = store.con.cursor()
    raised: list[BaseException] = []
    batch = [(sniff(big, store.con), sha256_of(big))]

    def read() -> None:
        try:
            store._read(batch, cursor)
        except BaseException as e:  # noqa: BLE001 - the test inspects what was raised
            raised.append(e)

    thread = threading.Thread(target=read)
    thread.start()
    deadline = time.monotonic() + 60
    while thread.is_alive() and time.monotonic() < deadline:  # until the read is under way, on a busy machine too
        time.sleep(0.2)
        cursor.interrupt()
    thread.join(timeout=60)
    assert [type(e) for e in raised] == [KeyboardInterrupt]
    assert store.con.execute("SELECT count(*) FROM costs").fetchone()[0] == 0


# ---- the gate: a manifest of 10,000 documents -------------------------------------------------------------

def _pods(n: int, broken_at: int | None = None) -> str:
    pod = ("{apiVersion: v1, kind: Pod, metadata: {name: p-NAME, labels: {team: vision, owner: chen}}, spec: "
           "{containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]}}\n")
    docs = [pod.replace("NAME", str(i)) for i in range(n)]
    if broken_at is not None:
        docs[broken_at] = "{apiVersion: v1, kind: Pod, metadata: {name: [unclosed}\n"
    return "---\n".join(docs)


@pytest.mark.slow
def test_gate_reads_a_manifest_of_10000_documents(tmp_path):
    """Ten thousand GPU pods in one file: each is a job, the verdict is written whole (atomically), no hang."""
    manifest = tmp_path / "many.yaml"
    manifest.write_text(_pods(10_000), encoding="utf-8")
    output = tmp_path / "gate.json"
    with deadline(120):
        result = CliRunner().invoke(cli, ["gate", "--policy", str(REPO / "fixtures" / "manifests" / "policy.yml"),
                                          "--format", "json", "--output", str(output), str(manifest)])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    doc = json.loads(output.read_text(encoding="utf-8"))
    assert (doc["verdict"], len(doc["jobs"]), len(doc["findings"])) == ("pass", 10_000, 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gate.json", "many.yaml"]  # no temporary file left


@pytest.mark.slow
def test_gate_names_the_line_of_a_broken_document_among_10000(tmp_path):
    manifest = tmp_path / "many.yaml"
    manifest.write_text(_pods(10_000, broken_at=4_000), encoding="utf-8")
    output = tmp_path / "gate.json"
    with deadline(120):
        result = CliRunner().invoke(cli, ["gate", "--policy", str(REPO / "fixtures" / "manifests" / "policy.yml"),
                                          "--format", "json", "--output", str(output), str(manifest)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    # the file that could not be read is named on stderr and in the (whole) output, which says the run failed
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"gpu-auditor: error: {manifest}:{2 * 4_000 + 1}: not valid YAML")
    assert lines[-1].endswith("fail on high: ERROR") and len(lines) == 2
    doc = json.loads(output.read_text())
    assert doc["verdict"] == "error" and [(f["file"], f["line"]) for f in doc["failed_files"]] == \
        [(str(manifest), 2 * 4_000 + 1)]


# ---- all old or all new: a signal at any step of publishing the outputs ---------------------------------------

def _output_set(tag: str) -> dict[str, str]:
    return {name: f"{tag} {name}\n" * (1000 if name == "audit.json" else 1) for name in OUTPUTS}


OLD_SET, NEW_SET = _output_set("old"), _output_set("new")
USER_FILES = {"notes.txt": "kept by the user\n", "outbox/state.json": "{}\n"}  # carried into every new set
# what a fault may interrupt: each write and rename, and each step of making and removing the hidden folder
FAULT_AT = ("_write", "_exchange", "chmod", "link", "rename", "mkdir", "rmdir", "unlink")


# A writer in a fresh process (python -c): publish the set given into `out`, sending itself `sig` at the nth
# step (a write stops half way); exit 130/143 on the handled interrupt, 0 if the publish ended, 3 on any other
# exception, 99 if the nth step never came. A fresh process rather than a fork of the test's, which holds
# DuckDB's threads.
_FAULT_CHILD = """
import json, os, sys
from pathlib import Path
from auditor import atomic, scratch

out, nth, sig, files, steps = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4]), \\
    sys.argv[5].split(",")
scratch.handle_sigterm()
count = 0

def faulty(owner, name):
    real = getattr(owner, name)

    def step(*args, **kwargs):
        global count
        count += 1
        if count == nth:
            if name == "_write":  # half the file on disk, then the signal
                real(args[0], args[1][: len(args[1]) // 2], *args[2:])
            os.kill(os.getpid(), sig)
            if name == "_write":
                return None
        return real(*args, **kwargs)

    setattr(owner, name, step)

for name in steps:
    faulty(atomic if name.startswith("_") else os, name)
code = 0
try:
    atomic.write_files(out, files)
except KeyboardInterrupt:
    code = scratch.interrupted_exit_code()
except BaseException:
    code = 3
os._exit(code if count >= nth else 99)
"""


def _faulty_publish(out: Path, nth: int, sig: int, cwd: Path = REPO) -> int:
    """The exit code of the writer above (negative: the signal that killed it)."""
    proc = subprocess.run([sys.executable, "-c", _FAULT_CHILD, str(out), str(nth), str(sig), json.dumps(NEW_SET),
                           ",".join(FAULT_AT)], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode


def _with_user_files(files: dict[str, str]) -> dict[str, bytes]:
    return {k: v.encode() for k, v in sorted({**files, **USER_FILES}.items())}


@pytest.mark.heavy
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_signal_at_any_step_leaves_the_old_set_or_the_new(tmp_path, sig):
    """The previous complete set, or the new complete one, whatever step the signal lands on (every write,
    rename, link, mode change and removal of publishing a set); what a killed run left is removed by the next,
    and the user's file and folder in the output folder survive every case."""
    from auditor import atomic

    nth = 0
    seen = set()
    while True:
        nth += 1
        out = tmp_path / f"case-{nth}" / "out"
        atomic.write_files(out, OLD_SET)
        for name, text in USER_FILES.items():
            (out / name).parent.mkdir(exist_ok=True)
            (out / name).write_text(text)
        code = _faulty_publish(out, nth, sig)
        if code == 99:  # the publish has fewer steps than nth: every one was tried
            break
        after = files_under(out)
        if sig == signal.SIGKILL and "outbox/state.json" not in after:
            # killed in the instant the user's folder is moved into the new set: it lies in the hidden folder
            # beside `out` until the next run moves it back (asserted below); the set itself is whole
            after["outbox/state.json"] = USER_FILES["outbox/state.json"].encode()
        assert after in (_with_user_files(OLD_SET), _with_user_files(NEW_SET)), (nth, sorted(after))
        seen.add("old" if after == _with_user_files(OLD_SET) else "new")
        if sig == signal.SIGKILL:
            assert code == -signal.SIGKILL, (nth, code)
        else:  # handled: the run cleans up after itself
            assert code in (128 + sig, 0), (nth, code)
            assert sorted(p.name for p in out.parent.iterdir()) == ["out"], nth
        atomic.write_files(out, NEW_SET)  # the next run
        assert files_under(out) == _with_user_files(NEW_SET), nth
        assert sorted(p.name for p in out.parent.iterdir()) == ["out"], nth  # no hidden folder left beside it
    assert nth > 15 and seen == {"old", "new"}, (nth, seen)


@pytest.mark.heavy
def test_a_killed_first_publish_leaves_no_folder_or_a_whole_one(tmp_path):
    from auditor import atomic

    for nth in range(1, 100):
        out = tmp_path / f"case-{nth}" / "out"
        out.parent.mkdir()
        if _faulty_publish(out, nth, signal.SIGKILL) == 99:
            break
        assert not out.exists() or files_under(out) == {k: v.encode() for k, v in NEW_SET.items()}, nth
        atomic.write_files(out, OLD_SET)
        assert sorted(p.name for p in out.parent.iterdir()) == ["out"], nth
    assert nth > 5


@pytest.mark.heavy
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_handled_signal_at_any_step_of_writing_into_the_working_folder(tmp_path, sig):
    """`--out .` cannot be exchanged for a new folder (it is where the run is): its files are renamed in one by
    one, with SIGINT and SIGTERM held off until the last, so a handled signal still leaves one set or the other."""
    from auditor import atomic

    for nth in range(1, 100):
        out = tmp_path / f"case-{nth}"
        atomic.write_files(out, OLD_SET)
        (out / "notes.txt").write_text(USER_FILES["notes.txt"])
        code = _faulty_publish(Path("."), nth, sig, cwd=out)
        if code == 99:
            break
        assert code in (128 + sig, 0), (nth, code)
        sets = [{k: v.encode() for k, v in {**files, "notes.txt": USER_FILES["notes.txt"]}.items()}
                for files in (OLD_SET, NEW_SET)]
        assert files_under(out) in sets, (nth, sorted(files_under(out)))
    assert nth > 5


def _signal_at_publish(when: str, out: Path, audit_json: Path) -> subprocess.CompletedProcess:
    """`gpu-auditor report` in a fresh process that sends itself SIGTERM just before, or just after, the step
    that makes the new set visible (in it, signals are held until the set is in place)."""
    code = f"""
import os, signal, sys
from auditor import atomic
from auditor.cli import main
real = atomic.Staging.publish
def publish(self):
    if {when == "before"!r}:
        os.kill(os.getpid(), signal.SIGTERM)
    real(self)
    if {when == "after"!r}:
        os.kill(os.getpid(), signal.SIGTERM)
atomic.Staging.publish = publish
sys.argv = ["gpu-auditor", "report", {str(audit_json)!r}, "--out", {str(out)!r}]
main()
"""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.mark.heavy
@pytest.mark.parametrize("when", ["before", "after"])
def test_sigterm_at_the_publish_step_through_the_cli(policy, tmp_path, when):
    out = tmp_path / "out"
    assert audit(policy, out, GPU_FIXTURE).exit_code == 0
    (out / "report.html").write_text("the previous report\n")
    before = files_under(out)
    saved = tmp_path / "audit.json"
    shutil.copy(out / "audit.json", saved)
    proc = _signal_at_publish(when, out, saved)
    assert proc.returncode == 143, proc.stderr
    assert "Traceback" not in proc.stderr
    if when == "before":
        assert proc.stderr.strip().splitlines() == ["gpu-auditor: terminated (SIGTERM); nothing was written"]
        assert files_under(out) == before
    else:  # the signal came after the set was in place: it stays, and the message says so
        assert proc.stderr.strip().splitlines() == [
            f"gpu-auditor: terminated (SIGTERM) after the outputs were written in full ({out})"]
        assert (out / "report.html").read_text(encoding="utf-8") != "the previous report\n"
        assert set(files_under(out)) == set(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.json", "out"]


# ---- only regular files are written -------------------------------------------------------------------------

MANIFESTS = REPO / "fixtures" / "manifests"


def _special(kind: str, path: Path) -> None:
    """Make `path` a file system object that is not a regular file."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    elif kind == "device":  # a /dev/null of our own: the real one is not put at risk
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 3))
    else:
        path.mkdir()
        (path / "inside.txt").write_text("kept\n")


def _same(path: Path) -> tuple:
    st = os.lstat(path)
    return st.st_ino, st.st_mode, st.st_rdev


@pytest.mark.parametrize("kind", ["fifo", "socket", "device", "folder"])
def test_gate_output_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    out = tmp_path / "gate.txt"
    _special(kind, out)
    before = _same(out)
    with deadline(60):  # an open of a fifo would block: the refusal must come first
        result = CliRunner().invoke(cli, ["gate", "--policy", str(MANIFESTS / "policy.yml"), "--output", str(out),
                                          str(MANIFESTS / "kubernetes")])
    assert result.exit_code == 2
    word = {"fifo": "a named pipe", "socket": "a socket", "device": "a device", "folder": "a folder"}[kind]
    assert the_error(result) == (f"gpu-auditor: error: {out}: is {word}; gpu-auditor writes only regular files "
                                 "(give a file's path, or - for standard output)")
    assert _same(out) == before  # the very same node, not a regular file put in its place


def test_gate_output_dash_is_standard_output(tmp_path):
    result = CliRunner().invoke(cli, ["gate", "--policy", str(MANIFESTS / "policy.yml"), "--format", "json",
                                      "--output", "-", str(MANIFESTS / "kubernetes")], catch_exceptions=False)
    assert result.exit_code in (0, 1)
    assert json.loads(result.stdout)  # the whole verdict, on stdout
    assert not Path("-").exists() and not (REPO / "-").exists()


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_report_outputs_that_are_not_regular_files_are_refused(policy, tmp_path, kind):
    out = tmp_path / "out"
    assert audit(policy, out, GPU_FIXTURE).exit_code == 0
    (out / "report.md").unlink()
    _special(kind, out / "report.md")
    before = files_under(out)
    result = audit(policy, out, GPU_FIXTURE)
    assert result.exit_code == 2
    assert the_error(result).startswith(f"gpu-auditor: error: {out / 'report.md'}: is a ")
    assert files_under(out) == before and stat_kind(out / "report.md") == kind


def stat_kind(path: Path) -> str:
    import stat as st

    mode = os.lstat(path).st_mode
    return "fifo" if st.S_ISFIFO(mode) else "device" if st.S_ISCHR(mode) else "folder" if st.S_ISDIR(mode) \
        else "file"


@pytest.mark.parametrize("kind", ["fifo", "file"])
def test_an_out_folder_that_is_not_a_folder_is_refused(policy, tmp_path, kind):
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("a file\n")
    else:
        _special(kind, out)
    result = audit(policy, out, GPU_FIXTURE)
    assert result.exit_code == 2
    word = "a named pipe" if kind == "fifo" else "a file"
    assert the_error(result) == (f"gpu-auditor: error: {out}: is {word}, not a folder; the outputs are written "
                                 "into a folder")
    assert stat_kind(out) == kind


@pytest.mark.parametrize("command", ["policy-init", "outbox"])
def test_other_outputs_refuse_a_named_pipe(policy, tmp_path, command):
    target = tmp_path / "target"
    os.mkfifo(target)
    if command == "outbox":
        assert audit(policy, tmp_path / "audit", GPU_FIXTURE).exit_code == 0
    with deadline(60):
        if command == "policy-init":
            result = CliRunner().invoke(cli, ["policy", "init", "--force", str(target)])
        else:
            result = CliRunner().invoke(cli, ["email", "--dry-run", "--policy", str(REPO / "fixtures/demo/policy.yml"),
                                              "--outbox", str(target), str(tmp_path / "audit")])
    assert result.exit_code == 2
    assert f"{target}: is a named pipe" in the_error(result)
    assert stat_kind(target) == "fifo"


# ---- no raw line break from input in any output a log may print ---------------------------------------------

BREAKS = "\n::error title=forged::one\r\n::warning::two\r::notice::three\u2028::error::four\u0085::error::five"
HOSTILE_COLUMNS = ("identity/LineItemId", "bill/PayerAccountId", "lineItem/UsageAccountId", "lineItem/ResourceId",
                   "lineItem/AvailabilityZone", "lineItem/LineItemDescription", "product/ProductName",
                   "lineItem/Operation", "resourceTags/user:team")


def _forged_lines(text: str) -> list[str]:
    """Lines (split as Python splits them: LF, CR, U+2028, NEL, ...) that start, after white space, as a
    workflow command does."""
    return [line for line in text.splitlines() if line.lstrip().startswith("::")]


@pytest.fixture(scope="module")
def line_break_run(tmp_path_factory) -> dict[str, str]:
    """Every output of an audit whose text columns, file name, policy name and team names hold line breaks
    followed by workflow commands: the output files, the e-mails' text and HTML parts and headers, `report`'s
    re-rendering, and what each command printed."""
    import email
    import email.policy

    tmp = tmp_path_factory.mktemp("breaks")
    with open(GPU_FIXTURE, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    for row in rows[1:]:
        for i, name in enumerate(header):
            if name in HOSTILE_COLUMNS:
                row[i] += BREAKS
    billing = tmp / f"cur{BREAKS.replace(chr(0x2028), '').replace(chr(0x85), '')}.csv"
    with open(billing, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    policy = tmp / "policy.yml"
    policy.write_text(f"policy: {json.dumps('Breaks' + BREAKS)}\nowner: finops@example.com\n"
                      "attribution: {team_tags: [team]}\nteams:\n"
                      f"  {json.dumps('research' + BREAKS)}: {{lead: lead@example.com}}\n"
                      f"  vision: {{lead: vision@example.com}}\n", encoding="utf-8")
    out, again = tmp / "out", tmp / "again"
    seen: dict[str, str] = {}
    runs = {"audit": ["audit", "--policy", str(policy), "--out", str(out), str(billing)],
            "inspect": ["inspect", str(billing)],
            "report": ["report", str(out / "audit.json"), "--out", str(again)],
            "email": ["email", "--dry-run", "--policy", str(policy), str(out)]}
    for name, args in runs.items():
        result = CliRunner().invoke(cli, args)
        assert result.exit_code in (0, 1), (name, result.output)
        seen[f"{name} stdout"], seen[f"{name} stderr"] = result.stdout, result.stderr
    for folder in (out, again):
        for path in folder.rglob("*"):
            if path.is_file() and path.suffix != ".eml":
                seen[str(path.relative_to(tmp))] = path.read_text(encoding="utf-8")
    emails = sorted((out / "outbox").glob("*.eml"))
    assert len(emails) == 3  # the owner, research's lead (the team holding the line breaks), vision's lead
    for eml in emails:
        msg = email.message_from_bytes(eml.read_bytes(), policy=email.policy.default)
        seen[f"{eml.name} headers"] = "\n".join(f"{k}: {v}" for k, v in msg.items())
        for part in msg.walk():
            if part.get_content_maintype() == "text":
                seen[f"{eml.name} {part.get_content_type()}"] = part.get_content()
    return seen


@pytest.mark.heavy
def test_no_output_starts_a_line_with_input(line_break_run):
    forged = {name: _forged_lines(text)[:2] for name, text in line_break_run.items() if _forged_lines(text)}
    assert forged == {}
    assert {"out/report.html", "out/report.md", "out/findings.csv", "out/jobs.csv", "out/audit.json",
            "again/report.html", "audit stdout", "inspect stdout"} <= set(line_break_run)
    # the values are there, escaped: the reader still sees what the input held
    assert "research\\n::error title=forged::one\\r\\n" in line_break_run["out/report.html"]
    assert "Breaks\\n::error" in line_break_run["audit stdout"]
    html = [text for name, text in line_break_run.items() if name.endswith("text/html")]
    assert html and all("\\n::error title=forged::one" in text for text in html)


# ---- every input limit is a clear refusal -------------------------------------------------------------------

def _cur(path: Path, *lines: tuple[str, str, str]) -> Path:
    """A small CUR: (usage type, start time, cost) per line."""
    rows = [f"li-{i},Usage,{start},{start.replace('T00:', 'T01:')},{usage},1,USD,{cost}"
            for i, (usage, start, cost) in enumerate(lines)]
    path.write_text("\n".join([CUR_HEADER, *rows]) + "\n", encoding="utf-8")
    return path


TWENTY_NINES = "9" * 20  # the largest whole amount DECIMAL(38,18) holds


@pytest.mark.parametrize(("files", "named", "words"), [
    # two lines of one file, each within the limit, whose sum is not
    ([[("BoxUsage:g5.xlarge", "2026-07-01T00:00:00Z", TWENTY_NINES),
       ("BoxUsage:g5.xlarge", "2026-07-01T00:00:00Z", TWENTY_NINES)]], 0, "the costs add up to more than"),
    # two lines of one file on two days, each summed alone: their sizes add up past the limit, short of the
    # engine's own (the exact sum, not the DOUBLE one, finds it)
    ([[("BoxUsage:g5.xlarge", "2026-07-01T00:00:00Z", "6" + "0" * 19),
       ("BoxUsage:g5.xlarge", "2026-07-02T00:00:00Z", "6" + "0" * 19)]], 0, "the costs add up to more than"),
    # one line in each of two files: the second is named, with the files before it
    ([[("BoxUsage:g5.xlarge", "2026-07-01T00:00:00Z", "6" + "0" * 19)],
      [("BoxUsage:g5.2xlarge", "2026-07-02T00:00:00Z", "6" + "0" * 19)]], 1,
     "the costs add up with the files read before it to more than"),
    # costs of both signs: their absolute values add up
    ([[("BoxUsage:g5.xlarge", "2026-07-01T00:00:00Z", TWENTY_NINES),
       ("Credit", "2026-07-01T00:00:00Z", "-" + TWENTY_NINES)]], 0, "the costs add up to more than"),
    ([[("BoxUsage:g5.xlarge", "10000-07-01T00:00:00Z", "1")]], 0, "a line is charged on 10000-07-01, outside the days"),
    ([[("BoxUsage:g5.xlarge", "1899-12-31T00:00:00Z", "1")]], 0, "a line is charged on 1899-12-31, outside the days"),
])
def test_sums_and_dates_beyond_what_the_engine_holds_are_refused(policy, tmp_path, files, named, words):
    paths = [_cur(tmp_path / f"cur-{i}.csv", *lines) for i, lines in enumerate(files)]
    result = audit(policy, tmp_path / "out", *paths)
    assert result.exit_code == 2
    assert the_error(result).startswith(f"gpu-auditor: error: {paths[named]}: ")
    assert words in the_error(result)
    assert not (tmp_path / "out").exists()


def test_a_sum_just_under_the_limit_is_read_exactly(policy, tmp_path):
    """Two costs adding up to 97,999,999,999,999,999,999.75: under the limit (0.99 x 10^20), kept to the cent."""
    billing = _cur(tmp_path / "cur.csv", ("BoxUsage:g5.xlarge", "2026-07-01T00:00:00Z", "49000000000000000000.25"),
                   ("BoxUsage:g5.xlarge", "2026-07-01T00:00:00Z", "48999999999999999999.50"))
    result = audit(policy, tmp_path / "out", billing)
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "out" / "audit.json").read_text(encoding="utf-8"))
    assert doc["summary"]["billed_cost"] == {"USD": "97999999999999999999.75"}


@pytest.mark.parametrize(("option", "words"), [
    (("--quarter", "9999-Q4"), "--quarter '9999-Q4': a quarter from 1900-Q1 to 9998-Q4"),
    (("--quarter", "1899-Q4"), "--quarter '1899-Q4': a quarter from 1900-Q1 to 9998-Q4"),
    (("--since", "2026-07-01", "--until", "9999-12-31"), "--until '9999-12-31': a day from 1900-01-01 to 9998-12-31"),
    (("--as-of", "0001-01-01"), "--as-of '0001-01-01': a day from 1900-01-01 to 9998-12-31"),
])
def test_dates_and_quarters_out_of_range_are_refused(policy, tmp_path, option, words):
    result = audit(policy, tmp_path / "out", GPU_FIXTURE, extra=option)
    assert result.exit_code == 2
    assert the_error(result) == f"gpu-auditor: error: {words}"


def test_an_out_name_too_long_is_one_line(policy, tmp_path):
    out = tmp_path / ("a" * 300)
    result = audit(policy, out, GPU_FIXTURE)
    assert result.exit_code == 2
    assert the_error(result) == f"gpu-auditor: error: {out}: File name too long"


@pytest.mark.heavy
def test_a_full_disk_under_the_outbox_is_one_line(policy, tmp_path, monkeypatch):
    from auditor import atomic

    assert audit(policy, tmp_path / "audit", GPU_FIXTURE).exit_code == 0
    real = atomic._write

    def full(path, data, fd=None):
        if "outbox" in str(path):
            if fd is not None:
                os.close(fd)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, data, fd)

    monkeypatch.setattr(atomic, "_write", full)
    outbox = tmp_path / "outbox"
    result = CliRunner().invoke(cli, ["email", "--dry-run", "--policy", str(REPO / "fixtures/demo/policy.yml"),
                                      "--outbox", str(outbox), str(tmp_path / "audit")])
    assert result.exit_code == 2
    assert the_error(result).startswith(f"gpu-auditor: error: {outbox}/")
    assert the_error(result).endswith(": cannot write the file: No space left on device")
    assert [p.name for p in outbox.iterdir() if p.name.startswith(".")] == [".lock"]  # no temporary file left


def test_duplicate_asset_and_job_ids_in_an_inventory_are_refused(policy, tmp_path):
    doc = json.loads((REPO / "fixtures" / "demo" / "inventory.json").read_text(encoding="utf-8"))
    for key in ("assets", "jobs"):
        bad = {**doc, key: [*doc[key], dict(doc[key][0])]}
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(bad), encoding="utf-8")
        result = audit(policy, tmp_path / "out", GPU_FIXTURE, extra=("--inventory", str(path)))
        assert result.exit_code == 2
        n = len(doc[key])
        assert the_error(result) == (f"gpu-auditor: error: {path}: {key}[{n}].id: {doc[key][0]['id']!r} is the id "
                                     f"of {key}[0] too; each id once")


@pytest.mark.parametrize(("text", "line", "words"), [
    ("policy: P\x00\nowner: finops@example.com\n", 1,
     "not valid YAML: the character U+0000 is not allowed in YAML text"),
    ("policy: P\nowner: finops@example.com\nteams:\n  [a, b]: {lead: l@example.com}\n", 4,
     "a key is a list; every key of a policy is a name (text)"),
    ("policy: P\nowner: finops@example.com\nteams:\n  ? {a: 1}\n  : {lead: l@example.com}\n", 4,
     "a key is a mapping; every key of a policy is a name (text)"),
])
def test_policy_nul_bytes_and_list_keys_are_one_line(tmp_path, text, line, words):
    path = tmp_path / "policy.yml"
    path.write_bytes(text.encode("utf-8"))
    for args in (["policy", "validate", str(path)], ["audit", "-q", "--policy", str(path), "--out",
                                                     str(tmp_path / "out"), str(GPU_FIXTURE)]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2
        assert the_error(result) == f"gpu-auditor: error: {path}:{line}: {words}"


@pytest.mark.heavy
@pytest.mark.parametrize("command", [
    ["inspect", str(GPU_FIXTURE)], ["gate", "--policy", str(MANIFESTS / "policy.yml"), str(MANIFESTS / "kubernetes")]])
def test_standard_output_full_or_closed_is_exit_2(command):
    if os.path.exists("/dev/full"):  # a device that is always full
        with open("/dev/full", "w") as device:
            full = subprocess.run([sys.executable, "-m", "auditor", *command], stdout=device, stderr=subprocess.PIPE,
                                  text=True, timeout=120, cwd=REPO)
        assert full.returncode == 2, full.stderr
        assert full.stderr.strip().splitlines()[-1] == \
            "gpu-auditor: error: cannot write to standard output: No space left on device"
        assert "Exception ignored" not in full.stderr
    closed = subprocess.run([sys.executable, "-m", "auditor", *command], stderr=subprocess.PIPE, text=True,
                            timeout=120, cwd=REPO, preexec_fn=lambda: os.close(1))
    assert closed.returncode == 2
    assert closed.stderr == "gpu-auditor: error: standard output is closed; redirect it (> FILE or > /dev/null)\n"


# ---- ambiguity refused, legality read -----------------------------------------------------------------------

FOCUS_DEMO = REPO / "fixtures" / "demo" / "billing" / "focus-azure-2026-q3.csv"


def _focus_as(tmp_path: Path, encoding: str) -> Path:
    """The demo FOCUS export with its Tags in another encoding the specification or a provider uses."""
    con = duckdb.connect()
    src = f"read_csv('{FOCUS_DEMO}', all_varchar = true)"
    tags = {"parquet-text": "Tags",
            "parquet-map": "CAST(CAST(Tags AS JSON) AS MAP(VARCHAR, VARCHAR))",
            "parquet-struct": "json_transform(Tags, '{\"team\": \"VARCHAR\", \"owner\": \"VARCHAR\", "
                              "\"project\": \"VARCHAR\"}')"}
    if encoding == "json-object":  # newline-delimited JSON, Tags an object in each line
        path = tmp_path / "focus.json"
        con.execute(f"COPY (SELECT * REPLACE (CAST(Tags AS JSON) AS Tags) FROM {src}) TO '{path}' (FORMAT JSON)")
    else:
        path = tmp_path / f"focus-{encoding}.parquet"
        con.execute(f"COPY (SELECT * REPLACE ({tags[encoding]} AS Tags) FROM {src}) TO '{path}' (FORMAT PARQUET)")
    con.close()
    return path


def _team_spend(policy: Path, out: Path, billing: Path) -> dict:
    result = audit(policy, out, billing, extra=("--quarter", "2026-Q3"))
    assert result.exit_code in (0, 1), result.output
    return json.loads((out / "audit.json").read_text(encoding="utf-8"))["summary"]["by_team"]


@pytest.fixture(scope="module")
def team_policy(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("teams") / "policy.yml"
    path.write_text("policy: Tags\nowner: finops@example.com\nattribution: {team_tags: [team]}\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def csv_team_spend(team_policy, tmp_path_factory) -> dict:
    spend = _team_spend(team_policy, tmp_path_factory.mktemp("csv") / "out", FOCUS_DEMO)
    assert {"nlp", "platform"} <= set(spend)  # the tags are what the figures hang on
    return spend


@pytest.mark.heavy
@pytest.mark.parametrize("encoding", ["parquet-text", "parquet-map", "parquet-struct", "json-object"])
def test_focus_tags_are_read_in_every_encoding(team_policy, csv_team_spend, tmp_path, encoding):
    """The spend per team (read from the `team` tag) is the CSV's, to the cent, whatever holds the tags."""
    assert _team_spend(team_policy, tmp_path / "out", _focus_as(tmp_path, encoding)) == csv_team_spend


def test_two_spellings_of_a_money_column_are_refused(policy, tmp_path):
    billing = tmp_path / "cur.csv"
    billing.write_text(f"{CUR_HEADER},line_item_unblended_cost\n"
                       "li-1,Usage,2026-07-01T00:00:00Z,2026-07-01T01:00:00Z,BoxUsage:g5.xlarge,1,USD,1.5,2.5\n",
                       encoding="utf-8")
    result = audit(policy, tmp_path / "out", billing)
    assert result.exit_code == 2
    assert the_error(result) == (
        f"gpu-auditor: error: {billing}: column 'lineItem/UnblendedCost': the file has 'lineItem/UnblendedCost' and "
        "'line_item_unblended_cost', two spellings of one column; gpu-auditor cannot tell which to read (remove one)")


def test_two_parquet_columns_of_one_name_are_refused(policy, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "focus.parquet"
    columns = {"ChargePeriodStart": ["2026-07-01T00:00:00Z"], "ChargePeriodEnd": ["2026-07-01T01:00:00Z"],
               "BilledCost": [1.5], "BilledCost ": [2.5], "BillingCurrency": ["USD"], "ServiceName": ["Compute"]}
    table = pa.table(list(map(pa.array, columns.values())), names=[n.strip() for n in columns])
    pq.write_table(table, path)
    result = audit(policy, tmp_path / "out", path)
    assert result.exit_code == 2
    assert the_error(result) == (f"gpu-auditor: error: {path}: columns 3 and 4 are both named 'BilledCost'; "
                                 "gpu-auditor cannot tell which to read (remove or rename one)")


@pytest.mark.heavy
def test_an_out_folder_in_a_parent_the_user_cannot_write_is_written_file_by_file(reachable):
    """As `nobody`: `--out` is writable but its parent is not, so no folder can be made beside it; the files
    are renamed in one by one instead (the user's file kept), and a folder that is not writable either is one
    line, the previous set left as it was."""
    parent = reachable / "locked"
    out = parent / "out"
    out.mkdir(parents=True)
    (out / "notes.txt").write_text("kept by the user\n")
    for p in (out, out / "notes.txt"):
        p.chmod(0o777 if p.is_dir() else 0o666)
    parent.chmod(0o755)  # root's: nobody may enter it, not add to it
    result = run_as_nobody("audit", "-q", "--policy", reachable / "policy.yml", "--out", out, reachable / "billing")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted([*OUTPUTS, "notes.txt"])
    assert sorted(p.name for p in parent.iterdir()) == ["out"]
    before = files_under(out)
    out.chmod(0o755)
    result = run_as_nobody("audit", "-q", "--policy", reachable / "policy.yml", "--out", out, reachable / "billing")
    assert error_lines(result) == [f"gpu-auditor: error: {out}: cannot write the report: Permission denied; the "
                                   "previous report is left as it was"]
    assert files_under(out) == before


@pytest.mark.parametrize("carry", [True, False])
def test_a_dead_runs_hidden_folder_is_removed_and_only_carried_folders_go_back(tmp_path, carry):
    """A report's hidden folder holds no folder of its own: one in it was carried from `--out` and goes back.
    A snapshot's holds its own (billing/): they are removed with it, never moved into the previous snapshot."""
    from auditor import atomic

    out = tmp_path / "out"
    out.mkdir()
    (out / "kept.txt").write_text("previous\n")
    staging = atomic.Staging(out, carry=carry)
    (staging.path / "inner").mkdir()
    (staging.path / "inner" / "file").write_text("x\n")
    alive = atomic.remove_leftovers(out)
    assert alive == [] and staging.path.exists()  # its run holds the lock: left alone
    os.close(staging._fd)  # the run dies: its lock goes with it
    assert atomic.remove_leftovers(out) == [staging.path]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(files_under(out)) == (["inner/file", "kept.txt"] if carry else ["kept.txt"])


@pytest.mark.heavy
def test_a_closed_standard_error_takes_no_file_and_ends_no_run(policy, tmp_path):
    """`2>&-`: the run goes on (its messages to /dev/null), the exit code still says how it ended, and no file
    it opens takes descriptor 2 (whatever writes there would land in a report)."""
    out = tmp_path / "out"
    ok = subprocess.run([sys.executable, "-m", "auditor", "audit", "--policy", str(policy), "--out", str(out),
                         str(GPU_FIXTURE)], capture_output=True, text=True, timeout=120, cwd=REPO,
                        preexec_fn=lambda: os.close(2))
    assert ok.returncode == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)
    json.loads((out / "audit.json").read_text(encoding="utf-8"))  # nothing but the audit in it
    bad = subprocess.run([sys.executable, "-m", "auditor", "audit", "--policy", str(tmp_path / "missing.yml"),
                          "--out", str(out), str(GPU_FIXTURE)], capture_output=True, text=True, timeout=120,
                         cwd=REPO, preexec_fn=lambda: os.close(2))
    assert bad.returncode == 2

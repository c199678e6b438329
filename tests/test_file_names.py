"""Billing files whose names are not UTF-8 (issue 30): a latin-1 `coût.csv` on Linux is the bytes b'co\\xfbts.csv',
which Python reads with a surrogate escape and DuckDB refused ("cannot encode str as UTF-8"). Such a file is read
(DuckDB opens it through a link, auditor/files.py), and every message, output and report names it the one way,
its undecodable byte escaped (`co\\xfbts.csv`): one line, UTF-8 throughout, no raw byte. Real files of such names
in tmp_path, through the command line (the arguments as bytes, as a shell passes them)."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from auditor.files import readable, shown
from auditor.text import md_escape, one_line

REPO = Path(__file__).resolve().parents[1]
SPLIT = REPO / "fixtures" / "billing" / "gpu" / "cur2-eks-split.csv"
NAME = b"co\xfbts.csv"  # "coût.csv" in latin-1
POLICY = """policy: test
version: "1"
owner: finops@example.com
currency: USD
attribution: {team_tags: [team], owner_tags: [owner]}
"""


def folder_with(tmp_path: Path, name: bytes, text: str) -> bytes:
    folder = os.fsencode(tmp_path / "billing")
    os.makedirs(folder, exist_ok=True)
    with open(folder + b"/" + name, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return folder


def audit(tmp_path: Path, *billing: bytes) -> subprocess.CompletedProcess:
    (tmp_path / "policy.yml").write_text(POLICY)
    args = [os.fsencode(sys.executable), b"-m", b"auditor", b"audit", b"--policy", os.fsencode(tmp_path / "policy.yml"),
            b"--quarter", b"2026-Q3", b"--out", os.fsencode(tmp_path / "out"), *billing]
    return subprocess.run(args, capture_output=True, cwd=REPO, timeout=300)


def test_the_name_is_shown_with_its_byte_escaped_everywhere_alike():
    name = os.fsdecode(b"/data/" + NAME)
    assert shown(name) == one_line(name) == "/data/co\\xfbts.csv"
    assert shown("/data/coût.csv") == "/data/coût.csv"  # a UTF-8 name is its own
    assert readable("/data/coût.csv") == "/data/coût.csv"


@pytest.mark.heavy
@pytest.mark.parametrize("given", ["folder", "file"])
def test_a_billing_file_named_in_latin1_is_read_and_named_safely_in_every_output(tmp_path, given):
    folder = folder_with(tmp_path, NAME, SPLIT.read_text(encoding="utf-8"))
    run = audit(tmp_path, folder if given == "folder" else folder + b"/" + NAME)
    assert run.returncode == 0, run.stderr
    expected = f"{tmp_path}/billing/co\\xfbts.csv"  # the byte 0xFB written \xfb, a backslash and three letters
    out = tmp_path / "out"
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    [source] = doc["inputs"]["billing"]
    # Read in full: the file's own total (3 days of an 8x A100 node, 786.5424 a day, and its reservation's)
    assert (source["path"], source["billed_cost"], source["rows"]) == (expected, {"USD": "4719.25"}, 24)
    assert doc["summary"]["billed_cost"] == {"USD": "4719.25"}
    # Every output is UTF-8 and names the file the one way, on one line; no surrogate, no raw byte
    for f in out.iterdir():
        raw = f.read_bytes()
        text = raw.decode("utf-8")  # strict: a raw 0xFB or an encoded surrogate fails here
        assert "\udcfb" not in text and b"\\udcfb" not in raw, f.name
    assert md_escape(expected) in (out / "report.md").read_text(encoding="utf-8")  # \\xfb: Markdown shows \xfb
    assert "co\\xfbts.csv" in (out / "report.html").read_text(encoding="utf-8")
    assert "co\\xfbts.csv" in run.stderr.decode("utf-8")  # the progress line: [1/1] reading ...


@pytest.mark.heavy
def test_a_bad_latin1_named_file_is_one_line_naming_it_and_exit_2(tmp_path):
    rows = list(csv.reader(io.StringIO(SPLIT.read_text(encoding="utf-8"))))
    rows[2][rows[0].index("line_item_unblended_cost")] = "n/a"  # the second billing line, line 3 of the file
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    folder = folder_with(tmp_path, NAME, text.getvalue())
    run = audit(tmp_path, folder)
    assert run.returncode == 2
    errors = [line for line in run.stderr.decode("utf-8").splitlines() if "error" in line]
    assert errors == [f"gpu-auditor: error: {tmp_path}/billing/co\\xfbts.csv:3: column 'line_item_unblended_cost': "
                      "'n/a' is not a number"]
    assert "Traceback" not in run.stderr.decode("utf-8") and not (tmp_path / "out").exists()


@pytest.mark.heavy
def test_a_latin1_named_parquet_and_gzip_file_are_read_too(tmp_path):
    """DuckDB opens Parquet and gzip files itself (their columns are read by DuckDB, not Python): through the
    link too; the two hold the same lines, so the second is a re-delivery of the first, named as such."""
    folder = folder_with(tmp_path, b"co\xfbts-a.csv", SPLIT.read_text(encoding="utf-8"))
    os.remove(folder + b"/co\xfbts-a.csv")
    plain = tmp_path / "plain.parquet"
    duckdb.connect().execute(f"COPY (SELECT * FROM read_csv('{SPLIT}', all_varchar = true)) TO '{plain}' "
                             "(FORMAT parquet)")
    shutil.copy(plain, folder + b"/co\xfbts.parquet")
    run = audit(tmp_path, folder)
    assert run.returncode == 0, run.stderr
    doc = json.loads((tmp_path / "out" / "audit.json").read_text(encoding="utf-8"))
    assert [s["path"] for s in doc["inputs"]["billing"]] == [f"{tmp_path}/billing/co\\xfbts.parquet"]
    assert doc["summary"]["billed_cost"] == {"USD": "4719.25"}

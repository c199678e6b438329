"""A finding's evidence and a policy clause's options as the reports show them (auditor/outputs/evidence_text.py):
money as the report's money, unit prices to the hundredth of a cent, percentages with their sign, other numbers
rounded with thousands separators; and a clause whose rules had nothing to look at says "not checked", never
"met". The right answers are written here from the module's rules, not read back from it."""

from __future__ import annotations

import json
import re

import pytest

from auditor.outputs.evidence_text import evidence_items, value_text


@pytest.mark.parametrize("key, value, currency, shown", [
    ("mean_util_pct", 2.4000000000000004, "USD", "2.4%"),   # a float sum's last bit
    ("elapsed_pct", "100.0", "USD", "100%"),
    ("growth_pct_per_month", "34.25", "USD", "34.2%"),  # half to even, as the report rounds
    ("budget", "250000.00", "USD", "$250,000.00"),
    ("budget", 250000, "EUR", "250,000.00 EUR"),
    ("spent", "147754.35", "USD", "$147,754.35"),
    ("full_day_cost_max", "1320.960000000000000000", "USD", "$1,320.96"),  # DuckDB's DECIMAL(38, 18)
    ("gpu_hours_overrun_cost", "12043.764", "USD", "$12,043.76"),
    ("on_demand", "-5.005", "USD", "-$5.00"),  # the cent rounded half to even, as all money is
    ("current_price_per_hour", "16.288", "USD", "$16.288"),
    ("price_per_gb_month", "0.023000", "USD", "$0.023"),
    ("floor_per_hour", "14.9600", "USD", "$14.96"),
    ("recommended_price_per_hour", "13.35049", "GBP", "13.3505 GBP"),
    ("gpu_hours_budget", "30000", "USD", "30,000"),   # hours, though it names a budget
    ("gpu_hours", "32820.9", "USD", "32,820.9"),
    ("billed_hours", "2208.000000", "USD", "2,208"),
    ("gb", "14835.884", "USD", "14,835.88"),
    ("needed_tflops", 748.8, "USD", "748.8"),
    ("training_s", 151200, "USD", "151,200"),
    ("line", 12345, "USD", "12345"),               # a line number keeps its digits
    ("account", "123456789012", "USD", "123456789012"),
    ("in_inventory", True, "USD", "yes"),
    ("checkpoint_uri", None, "USD", "none"),
    ("missing_tags", [], "USD", "none"),
    ("allowed", {}, "USD", "none"),
    ("discount_pct", {"aws": 30, "gcp": 28.5}, "USD", "aws 30%, gcp 28.5%"),  # a map's values: what its key names
    ("matched_cost", {"EUR": "12.5", "USD": "3"}, "USD", "EUR 12.50 EUR, USD $3.00"),  # money by currency
    ("tags", {"team": "vision", "cost_center": "42"}, "USD", "team vision, cost_center 42"),
    ("instance_types", ["g5.48xlarge", "ml.g5.12xlarge"], "USD", "g5.48xlarge, ml.g5.12xlarge"),
    ("state", "over", "USD", "over"),
    ("quarter", "2026-Q3", "USD", "2026-Q3"),
])
def test_value_text(key, value, currency, shown):
    assert value_text(key, value, currency) == shown


def test_evidence_items_keep_their_order_and_name_the_key_in_words():
    assert evidence_items({"gpu_spent": "96521.76", "unused_pct": 100.0, "gpu_count": 8}, "USD") == [
        ("gpu spent", "$96,521.76"), ("unused pct", "100%"), ("gpu count", "8")]
    assert evidence_items(None, "USD") == []


RAW_FLOAT = re.compile(r"\d\.\d{5,}")  # 2.4000000000000004, 1320.960000000000000000


def test_the_demo_reports_show_no_raw_number(demo_folder):
    """Every finding's evidence in the demo's HTML and Markdown: no float's long tail, no unseparated money."""
    doc = json.loads((demo_folder / "audit.json").read_text(encoding="utf-8"))
    assert any(RAW_FLOAT.search(json.dumps(f["evidence"])) for f in doc["findings"])  # the data has them
    for name in ("report.md", "report.html"):
        text = (demo_folder / name).read_text(encoding="utf-8")
        assert not RAW_FLOAT.search(text), (name, RAW_FLOAT.search(text))
        assert "budget: 250000" not in text and "budget: $250,000.00" in text
        assert "mean util pct: 2.4%" in text


def test_clauses_nothing_checked_say_so(demo_folder):
    """The demo has no Kubernetes GPU nodes, no capacity reservation and no notebook or dev machine with GPUs: those
    clauses were not checked, and say so in audit.json and both reports; a clause whose rule had something to judge
    and found nothing is met."""
    doc = json.loads((demo_folder / "audit.json").read_text(encoding="utf-8"))
    status = {c["rule"]: c["status"] for c in doc["clauses"]}
    assert {r for r, s in status.items() if s == "not checked"} == {
        "KUBE001", "KUBE002", "KUBE003", "COM002", "OFF001"}
    assert status["TAG002"] == "met" and status["COM003"] == "met (defaults)"
    md = (demo_folder / "report.md").read_text(encoding="utf-8")
    assert re.search(r"\| shared\\_gpu\\_idle \(KUBE001\) \|[^\n]*\| not checked \|", md)
    assert re.search(r"\| capacity\\_reservations \(COM002\) \|[^\n]*\| not checked \|", md)
    met = sum(1 for ln in md.splitlines() if ln.startswith("| ") and ln.rstrip().endswith(("| met |",
              "| met (defaults) |")) and "(" in ln.split("|")[1])
    assert f"| {met} met, " in md and ", 5 not checked |" in md

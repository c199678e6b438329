"""Text for the terminal: the audit's summary, what `inspect` found in each billing file, what `pull` wrote,
and the progress line. Every line is made safe to print here (one line, control characters escaped, secrets
masked), so the CLI only prints what it gets."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.figures import TOP_ACTIONS, action_totals, counts
from auditor.model import fmt_money
from auditor.outputs.change import change_sentence
from auditor.secret_patterns import mask
from auditor.text import one_line

if TYPE_CHECKING:
    from auditor.audit import Audit
    from auditor.rule import Rule
    from auditor.tables.store import SourceFile
    from auditor.window import Window


def safe(text: object, masking: bool = True) -> str:
    """Text for the terminal: on one line, control characters escaped, secrets masked (text.py,
    secret_patterns.py)."""
    return one_line(mask(str(text)) if masking else text)


def progress_line(msg: str, width: int) -> tuple[str, bool]:
    """A progress message redrawn in place on a terminal, with a bar over the billing files read so far;
    and whether it ends its line (the rules' step stays on screen)."""
    msg = safe(msg)
    m = re.match(r"\[(\d+)/(\d+)\] (.*)$", msg)
    if m:
        done, total = int(m.group(1)) - 1, int(m.group(2))
        bar = "#" * (20 * done // total) + "-" * (20 - 20 * done // total)
        msg = f"[{bar}] {done}/{total} files · {m.group(3)}"
    return "\r\033[K" + msg[:width], msg.startswith("running the rules")


FILES_SHOWN = 20  # files of one scan listed by `inspect`; --json lists every one


def inspect_lines(sources: list[SourceFile], parts: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """What was detected in each billing file: format, lines, period and totals. Files read as one scan (the
    parts of an export) are shown together, with their totals, then a line each."""
    out: list[str] = []
    shown: set[str] = set()
    for s in sources:
        if s.part_of is None:
            out += _figure_lines(safe(s.path), s.format, s.rows, s.cost_column, s.stats)
            continue
        if s.part_of in shown:
            continue
        shown.add(s.part_of)
        members = [m for m in sources if m.part_of == s.part_of]
        together = (parts or {})[s.part_of]["stats"]
        out += _figure_lines(f"{safe(s.part_of)} (read as one scan)", s.format, together["rows"], s.cost_column,
                             together)
        for m in members[:FILES_SHOWN]:
            st = m.stats
            out.append(f"    {safe(Path(m.path).name)}  {m.rows:,} lines  {_period(st, '%Y-%m-%d')}  "
                       f"{fmt_money(st['billed_cost'])}")
        if len(members) > FILES_SHOWN:
            out.append(f"    and {len(members) - FILES_SHOWN:,} more files (inspect --json lists each)")
    return out


def _period(st: dict[str, Any], fmt: str, zone: str = "") -> str:
    """From the first line's start to the last line's end; an export whose lines state no end (FOCUS without
    ChargePeriodEnd, GCP without usage_end_time) from its first start on."""
    if st["period_end"] is None:
        return f"from {st['period_start']:{fmt}}{zone} (no line states its end)"
    return f"{st['period_start']:{fmt}} to {st['period_end']:{fmt}}{zone}"


def _figure_lines(title: str, fmt: str, rows: int, cost_column: str | None, st: dict[str, Any]) -> list[str]:
    from auditor.outputs.view import fmt_num  # the view loads jinja2: not for every command

    out = [title,
           f"  format      {fmt}",
           f"  lines       {rows:,}",
           f"  period      {_period(st, '%Y-%m-%d %H:%M', ' UTC')}",
           f"  billed      {fmt_money(st['billed_cost'])}  (sum of {cost_column}, per currency)",
           f"  effective   {fmt_money(st['effective_cost'])}",
           f"  GPU         {fmt_money(st['gpu_cost'])} ({fmt_num(st['gpu_hours'])} GPU-hours)",
           f"  spot        {fmt_money(st['spot_cost'])}"]
    for cat, amounts in st["by_category"].items():
        n = st["lines_by_category"].get(cat or "other", 0)
        note = "  (not classified as compute, storage or transfer)" if cat == "other" else ""
        out.append(f"    {cat or 'other':<14}{fmt_money(amounts):>18}  {n:>9,} lines{note}")
    for kind, gb in st["transfer_gb_out"].items():
        out.append(f"    transfer out {kind}: {fmt_num(gb, 3)} GB")
    return out


def inspect_json(sources: list[SourceFile], warnings: list[str],
                 parts: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """`inspect --json`: each file's format, digest, cost column and statistics, the figures of each set of files
    read as one scan (whose files then have their lines, period and billed and effective cost), and the
    warnings."""
    from auditor.audit import _jsonable

    files = [{"path": s.path, "format": s.format, "sha256": s.sha256, "cost_column": s.cost_column,
              **({"part_of": s.part_of} if s.part_of else {}), **_jsonable(s.stats)} for s in sources]
    scans = [{"label": label, "files": len(p["files"]), **_jsonable(p["stats"])} for label, p in (parts or {}).items()]
    return {"files": files, **({"read_as_one": scans} if scans else {}), "warnings": warnings}


def summary_lines(result: Audit) -> list[str]:
    """The audit's summary: totals, rates, money left out of the thresholds, the baseline, and one row per rule
    with its open findings and their monthly savings."""
    s = result.summary
    policy = result.policy
    masking = getattr(policy, "mask_secrets", True)
    out = [safe(f"GPU spend audit {result.window.label} · {policy.name}", masking),
           f"  total spend       {fmt_money(s['billed_cost'])}",
           f"  GPU compute       {fmt_money(s['gpu_cost'])}",
           f"  savings / month   {fmt_money(s['monthly_savings'])}"]
    if s.get("savings_to_check"):
        out.append(f"  to check / month  {fmt_money(s['savings_to_check'])} (confidence below high)")
    if s.get("wasted"):
        out.append(f"  wasted in window  {fmt_money(s['wasted'])}")
    out.append(f"  open findings     {s['findings']['total']} ({s['findings']['waived']} waived)")
    changed = change_sentence({"trend": result.trend}) if result.trend else None
    if changed is not None:  # last quarter's audit given (--previous): what changed, at the top
        out.insert(1, "  " + changed)
    if policy.rates:
        out.append(f"  rates             {policy.rates.describe(policy.currency)}")
    for src in result.sources:  # thresholds and budgets are in the policy's currency
        other = {c: v for c, v in (src.stats.get("billed_cost") or {}).items() if policy.convert(v, c) is None}
        if other:
            out.append(f"  left out          {src.path}: {fmt_money(other)} left out of the thresholds and budgets "
                       f"(in {policy.currency}; the policy gives no rate)")
    if result.baseline is not None:
        out.append(safe(f"  baseline          {len(result.known)} known finding(s) in {result.baseline['path']}, "
                        "not reported"))
    if result.findings:
        out += [""] + _rule_rows(result)
    if s.get("actions"):
        out += [""] + _action_rows(s["actions"], masking)
    return out


def _action_rows(acts: list[dict[str, Any]], masking: bool) -> list[str]:
    """The top actions (figures.actions: one per resource, ranked), then the rest: their savings add up to the
    savings above."""
    rest = acts[TOP_ACTIONS:]
    out = [f"  top actions ({len(acts)} in all, one per resource)"]
    for i, a in enumerate(acts[:TOP_ACTIONS], 1):
        amount = (fmt_money(a["saving"], a["currency"]) if a["saving"] is not None
                  else fmt_money(a["to_check"], a["currency"]) + "?" if a["to_check"] is not None else "–")
        also = "".join(f" +{r['rule']}" for r in a["reasons"] if r["rule"] != a["rule"])
        out.append(safe(f"  {i}. {amount:>12}  {a['severity']:<7}{a['rule']}{also} {a['resource']}"
                        f" · {a['team'] or '(unattributed)'}", masking))
    if rest:
        saving = action_totals(rest, "saving")
        out.append(f"  {len(rest)} more action{'s' if len(rest) > 1 else ''}: "
                   f"{fmt_money(saving) if saving else '$0.00'} a month")
    return out


def _rule_rows(result: Audit) -> list[str]:
    rows: dict[str, dict[str, Any]] = {}
    for f in result.active():
        r = rows.setdefault(f.rule, {"name": f.name, "n": 0, "sev": f.severity, "save": {}, "elsewhere": {},
                                     "check": {}})
        r["n"] += 1
        if f.monthly_savings is not None:  # a saving another rule counts on the same resource is shown apart
            into = r["elsewhere"] if f.counted_under else r["save"] if counts(f) else r["check"]
            into[f.currency] = into.get(f.currency, 0) + f.monthly_savings
    out = [f"  {'rule':<8}{'name':<26}{'severity':<10}{'findings':>9}  {'saving / month':>16}"]
    for rid, r in sorted(rows.items()):
        save = fmt_money(r["save"]) if r["save"] or not (r["elsewhere"] or r["check"]) else ""
        if r["check"]:
            save = (save + " (+" if save else "") + fmt_money(r["check"]) + ("?)" if save else "?")
        if r["elsewhere"]:
            save = (save + " (+" if save else "") + fmt_money(r["elsewhere"]) + ("*)" if save else "*")
        out.append(f"  {rid:<8}{r['name']:<26}{r['sev'].label:<10}{r['n']:>9}  {save:>16}")
    if any(r["elsewhere"] for r in rows.values()):
        out.append("  * already counted under another rule's finding on the same resource; the total counts it once")
    if any(r["check"] for r in rows.values()):
        out.append("  ? to check: confidence below high, not in the total")
    return out


def rules_lines(rules: list[type[Rule]], keys: list[list[str]], width: int) -> list[str]:
    """`rules list`: each rule's ID, name, severity and clause on its first line; what it checks, then its clause's
    options (and the policy's other keys it reads), wrapped to the terminal's width under them."""
    id_w, name_w, sev_w = (max(len(x) for x in col) + 2 for col in zip(
        *((r.id, r.name, r.severity.label) for r in rules), strict=True))
    indent = " " * id_w
    wrap = textwrap.TextWrapper(width=max(width, 60), initial_indent=indent, subsequent_indent=indent,
                                break_long_words=False, break_on_hyphens=False)
    out = []
    for r, rule_keys in zip(rules, keys, strict=True):
        opts = ", ".join(f"{k}={_option(f.default)}" for k, f in r.options.items()) or "no options"
        extra = [k for k in rule_keys if not k.startswith("clauses.")]
        also = f"; also {', '.join(extra)}" if extra else ""
        out.append(f"{r.id:<{id_w}}{r.name:<{name_w}}{r.severity.label:<{sev_w}}clause: {r.clause}")
        out += wrap.wrap(r.summary()) + wrap.wrap(f"[clauses.{r.clause}: {opts}{also}]")
    return out


def _option(value: object) -> str:
    return json.dumps(value) if isinstance(value, list | bool) or value is None else str(value)


def pull_lines(manifest: dict[str, Any], out_dir: Path, window: Window) -> list[str]:
    """What a pull wrote: the counts, then each source's status."""
    from auditor.providers.live.pull import source_line

    c = manifest["counts"]
    out = [f"wrote snapshot {safe(out_dir)} ({window.label}): {c['assets']} GPU assets, "
           f"{c['gpu_usage']} utilisation series, {c['jobs']} jobs, {c['billing_files']} billing files"]
    out += [safe(f"  {s['status']:<7}{s['name']}: {source_line(s)}") for s in manifest["sources"]]
    return out

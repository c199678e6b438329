"""Writing the four outputs of an audit with 100,000 findings (issue 15: "a 100,000-finding audit writes its
four outputs in seconds, in bounded memory").

Generates the high-churn shape (benchmarks/generate.py, cached; three in five of its short-lived nodes are
untagged, so TAG001 finds most of them: about 109,000 findings at 7M lines), runs the audit in this process
(not measured), then measures `write_outputs` alone: audit.json, report.html, report.md, findings.csv (and
jobs.csv). Measured: its CPU and wall time, the process's resident memory as it starts, and the most it grows
while writing (VmHWM, reset first through /proc/self/clear_refs), against the size of audit.json: memory that
grows by less than the text written holds no whole file.

    python benchmarks/outputs.py [--lines 7000000] [--data /tmp/gpu-auditor-bench] [--json outputs.json]

Exit status 1 when the audit has fewer than MIN_FINDINGS findings or a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import generate  # noqa: E402

LINES = 7_000_000
MIN_FINDINGS = 100_000
TARGET_CPU_S = 10.0  # CPU seconds to write the outputs of MIN_FINDINGS findings or more


def _status(field: str) -> int:
    """This process's VmRSS or VmHWM, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> bool:
    """Start VmHWM again from the current resident size (Linux 4.0+), so the peak read after is the writing's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def measure(lines: int, data: Path) -> dict:
    from auditor.core import run_audit
    from auditor.outputs.report import write_outputs
    from auditor.policy import load_policy

    info = generate(lines, data / str(lines), ("churn-parquet",))
    t = time.perf_counter()
    audit = run_audit(load_policy(Path(info["policy"])), info["formats"]["churn-parquet"],
                      Path(info["inventories"]["churn-parquet"]), None, date(2026, 10, 15))
    audit_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory(prefix="gpu-auditor-outputs-") as out:
        rss, reset = _status("VmRSS"), _reset_peak()
        t, cpu = time.perf_counter(), time.process_time()
        written = write_outputs(audit, Path(out))
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        peak = _status("VmHWM")
        sizes = {p.name: p.stat().st_size for p in written}
    return {"lines": lines, "findings": len(audit.findings), "audit_s": round(audit_s, 2),
            "write_wall_s": round(wall, 2), "write_cpu_s": round(cpu, 2), "rss_before": rss,
            "peak_rss": peak if reset else None, "grew": peak - rss if reset else None, "sizes": sizes,
            "load": round(os.getloadavg()[0], 1)}


def checks(r: dict) -> list[dict]:
    out = [{"target": f"outputs: an audit with at least {MIN_FINDINGS:,} findings", "value": r["findings"],
            "limit": MIN_FINDINGS, "met": r["findings"] >= MIN_FINDINGS},
           {"target": f"outputs: CPU seconds to write the four outputs of {r['findings']:,} findings",
            "value": r["write_cpu_s"], "limit": TARGET_CPU_S, "met": r["write_cpu_s"] <= TARGET_CPU_S}]
    if r["grew"] is not None:
        out.append({"target": "outputs: memory grown while writing / audit.json's size (no whole text held)",
                    "value": round(r["grew"] / r["sizes"]["audit.json"], 2), "limit": 1.0,
                    "met": r["grew"] < r["sizes"]["audit.json"]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=LINES, help="lines of the high-churn shape to generate")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "gpu-auditor-bench",
                    help="where the generated exports are kept between runs")
    ap.add_argument("--json", type=Path, help="write the measurement and its checks here")
    args = ap.parse_args()
    r = measure(args.lines, args.data)
    r["checks"] = checks(r)
    mib = 2**20
    print(f"{r['findings']:,} findings from {r['lines']:,} lines (audit {r['audit_s']} s, not measured): outputs "
          f"written in {r['write_wall_s']} s ({r['write_cpu_s']} s CPU); resident {r['rss_before'] / mib:,.0f} MiB "
          f"before, grew {(r['grew'] or 0) / mib:,.0f} MiB while writing; audit.json "
          f"{r['sizes']['audit.json'] / mib:,.0f} MiB, findings.csv {r['sizes']['findings.csv'] / mib:,.0f} MiB")
    for c in r["checks"]:
        print(f"{'ok  ' if c['met'] else 'MISS'} {c['target']}: {c['value']} (limit {c['limit']})")
    if args.json:
        args.json.write_text(json.dumps(r, indent=2))
    sys.exit(0 if all(c["met"] for c in r["checks"]) else 1)


if __name__ == "__main__":
    main()

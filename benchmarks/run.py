"""The benchmark: generate billing exports of each size, then measure, side by side on the same files,
the end-to-end `gpu-auditor audit`, `gpu-auditor inspect`, the floor (benchmarks/floor.py: a bare DuckDB scan
computing the same aggregates) and the pandas way (benchmarks/pandas_way.py). Each runs as its own process;
wall time is the process's, CPU time its user + system time, peak memory its maximum resident set size.
Writes results.json and BENCHMARKS.md.

    python benchmarks/run.py --lines 1000000 10000000
    python benchmarks/run.py --lines 1000000 10000000 --formats churn-parquet parts-csv-gz tiny-files
    python benchmarks/run.py --lines 1000000 --formats churn-parquet --outputs   # + benchmarks/outputs.py
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import FORMATS, SHAPES, generate, lines_of  # noqa: E402
from outputs import LINES as OUTPUT_LINES  # noqa: E402

TOOLS = ("audit", "inspect", "floor", "pandas")
OPTIONAL = ("spark",)  # `gpu-auditor audit --engine spark` in local mode: run only when --tools names it
TARGET_FLOOR_RATIO = 1.5  # audit time / floor time, 10M CUR Parquet
TARGET_PANDAS_SPEEDUP = 4.0  # pandas time / audit time
TARGET_PANDAS_MEMORY = 0.25  # audit peak RSS / pandas peak RSS
TARGET_RSS = 1 << 30  # audit peak RSS at 10M lines, Parquet and gzip CSV
TARGET_GROWTH = 11.0  # time(10M) / time(1M)
# Issue 15's targets, on every shape at the largest size.
TARGET_SHAPE_FLOOR = 3.0  # audit wall / floor wall (aim: 1.5)
TARGET_SHAPE_GROWTH = 10.0  # audit time at 10x the lines
TARGET_INSPECT_FLOOR = 2.0  # inspect wall / floor wall
TARGET_PARTS_GLOB = 3.0  # inspect of a folder of parts / DuckDB reading the same glob (the floor)
# Issue 28's, on every format and shape at the largest size, in CPU seconds (the machine is shared: wall time
# measures the other work on it as much as the tool's).
TARGET_CPU_FLOOR = 10.0  # audit CPU / floor CPU
TARGET_CPU_PANDAS = 1.0  # audit CPU / pandas CPU: no slower than pandas
TIMEOUT = 600.0  # seconds a run may take before it is stopped and recorded as such


def _hwm(pid: int) -> int:
    """The process's peak resident set so far (VmHWM), in bytes; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """pid and its descendants, from /proc's children lists (threads' too)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        with contextlib.suppress(OSError, ValueError):  # the process has just ended
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children", encoding="ascii") as f:
                    todo += [int(c) for c in f.read().split()]
    return found


def _rss_and_cpu(pid: int) -> tuple[int, float] | None:
    """A live process's resident set (bytes) and CPU time so far (user + system, seconds, with the children it
    has waited for: the JVM that Spark's launcher script runs first to build the command)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[21]) * os.sysconf("SC_PAGE_SIZE"), sum(int(v) for v in fields[11:15]) / CLOCK_TICKS
    except (OSError, ValueError, IndexError):
        return None


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def measure(cmd: list[str], env: dict[str, str] | None = None, timeout: float | None = None,
            tree: bool = False) -> dict:
    """Run cmd as a child: its wall time, CPU time, peak RSS (bytes) and output. Peak RSS is polled from
    /proc (VmHWM never decreases, so the last reading before exit is the peak up to then): wait4's ru_maxrss
    would not do, as Linux carries the parent's peak over into a child across fork and exec. A run past
    `timeout` seconds is killed: rc is then 'timeout', and the figures are those up to then.

    `tree`: the child and every process it starts (Spark's JVM, which the Python process does not wait for, so
    its CPU time is not in the child's rusage): peak RSS is the largest sum of the tree's resident sets seen at
    one poll (every 0.1 s), CPU time the child's rusage plus each other process's last CPU reading; the
    Python process's and the rest's peaks are kept apart too."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        peak, killed = 0, False
        others: dict[int, tuple[int, float]] = {}  # pid: (peak RSS, last CPU reading), the child's descendants
        tree_peak = 0
        while True:
            peak = max(peak, _hwm(proc.pid))
            if tree:
                total = 0
                for p in _tree(proc.pid):
                    got = _rss_and_cpu(p)
                    if got is None:
                        continue
                    total += got[0]
                    if p != proc.pid:
                        others[p] = (max(got[0], others.get(p, (0, 0.0))[0]), got[1])
                tree_peak = max(tree_peak, total)
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if timeout and time.perf_counter() - t > timeout:
                proc.kill()
                killed = True
            time.sleep(0.1 if tree else 0.01)
        wall = time.perf_counter() - t
        proc.returncode = "timeout" if killed else os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    cpu = usage.ru_utime + usage.ru_stime
    result = {"wall_s": round(wall, 3), "peak_rss": peak, "cpu_s": round(cpu, 2),
              "rc": proc.returncode, "stdout": stdout, "stderr": stderr[-2000:]}
    if tree:
        result.update(python_peak_rss=peak, python_cpu_s=round(cpu, 2),
                      others_peak_rss=max((r for r, _ in others.values()), default=0),
                      others_cpu_s=round(sum(c for _, c in others.values()), 2))
        result["peak_rss"] = max(tree_peak, peak)
        result["cpu_s"] = round(cpu + result["others_cpu_s"], 2)
    return result


def commands(tool: str, fmt: str, files: list[str], data: dict, out: Path) -> list[str]:
    py = sys.executable
    exe = Path(py).with_name("gpu-auditor")
    head = [str(exe)] if exe.exists() else [py, "-m", "auditor"]
    if tool in ("audit", "spark"):
        inventory = data.get("inventories", {}).get(fmt, data["inventory"])
        engine = ["--engine", "spark"] if tool == "spark" else []
        return head + ["audit", *engine, "--policy", data["policy"], "--inventory", inventory, "--out",
                       str(report_dir(out, tool, fmt)), "--quiet", *files]
    if tool == "inspect":
        return head + ["inspect", "--json", *files]
    script = "floor.py" if tool == "floor" else "pandas_way.py"
    return [py, str(HERE / script), fmt, *files]


def report_dir(out: Path, tool: str, fmt: str) -> Path:
    return out / (f"report-{fmt}" if tool == "audit" else f"report-{fmt}-{tool}")


def differences(a, b, path: str = "") -> list[str]:
    """Where two audit.json documents differ (paths, each with both values), ignoring generated_at."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for k in sorted(set(a) | set(b), key=str):
            if k == "generated_at":
                continue
            found += differences(a[k], b[k], f"{path}/{k}") if k in a and k in b else [f"{path}/{k}: in one only"]
        return found
    if isinstance(a, list) and isinstance(b, list):
        head = [f"{path}: {len(a)} items, {len(b)}"] if len(a) != len(b) else []
        return head + [d for i, (x, y) in enumerate(zip(a, b, strict=False)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {str(a)[:80]!r} != {str(b)[:80]!r}"]


def total_of(tool: str, result: dict, out: Path, fmt: str) -> float | None:
    """The billed total in USD each tool found: they must agree, or the timings compare different work."""
    try:
        if tool in ("audit", "spark"):
            doc = json.loads((report_dir(out, tool, fmt) / "audit.json").read_text())
            return float(doc["summary"]["billed_cost"]["USD"])
        if tool == "inspect":
            return float(sum(Decimal(str(f["billed_cost"]["USD"])) for f in json.loads(result["stdout"])["files"]))
        return float(json.loads(result["stdout"].strip().splitlines()[-1])["total"]["USD"])
    except (OSError, ValueError, KeyError, IndexError):
        return None


def run(sizes: list[int], data_root: Path, formats: tuple[str, ...], tools: tuple[str, ...],
        log=print, timeout: float | None = TIMEOUT) -> dict:
    results: dict = {"sizes": sizes, "formats": list(formats), "runs": [], "generate": {}}
    for n in sizes:
        # The tiny-files folder is one size whatever --lines says: measured once, at the first size.
        wanted = tuple(f for f in formats if f != "tiny-files" or n == sizes[0])
        log(f"generating {n:,} lines per format in {data_root / str(n)}")
        data = generate(n, data_root / str(n), wanted)
        results["generate"][str(n)] = data.get("seconds", {})
        with tempfile.TemporaryDirectory(prefix="gpu-auditor-bench-") as tmp:
            for fmt in wanted:
                files, lines = data["formats"][fmt], lines_of(data, fmt)
                for tool in tools:
                    load = os.getloadavg()[0]  # other work on the machine, for reading the numbers
                    # Spark's JVM is a process of its own: measured with the Python process that starts it
                    r = measure(commands(tool, fmt, files, data, Path(tmp)), timeout=timeout, tree=tool == "spark")
                    total = total_of(tool, r, Path(tmp), fmt) if r["rc"] in (0, 1) else None
                    row = {"size": n, "lines": lines, "format": fmt, "tool": tool, "wall_s": r["wall_s"],
                           "cpu_s": r["cpu_s"], "peak_rss": r["peak_rss"], "rc": r["rc"], "total_usd": total,
                           "lines_per_s": round(lines / r["wall_s"]) if r["wall_s"] else None,
                           "load": round(load, 1)}
                    if tool == "inspect" and total is not None:  # it rounds each file's total to the cent
                        row["files"] = len(json.loads(r["stdout"])["files"])
                    if r["rc"] != 0:
                        row["stderr"] = r["stderr"]
                    if tool == "spark":
                        row |= {k: r[k] for k in ("python_peak_rss", "python_cpu_s", "others_peak_rss",
                                                  "others_cpu_s")}
                        docs = [report_dir(Path(tmp), t, fmt) / "audit.json" for t in ("audit", "spark")]
                        if r["rc"] in (0, 1) and all(d.exists() for d in docs):  # every figure, DuckDB's and Spark's
                            diff = differences(*(json.loads(d.read_text()) for d in docs))
                            row["differences_from_audit"] = {"count": len(diff), "first": diff[:20]}
                    results["runs"].append(row)
                    log(f"  {lines:>11,} {fmt:<14} {tool:<7} {r['wall_s']:>8.2f}s {r['cpu_s']:>8.1f}s CPU "
                        f"{r['peak_rss'] / 2**20:>8.0f} MiB rc={r['rc']} total={total} load={load:.1f}")
    results["gate"] = gate_cold_start()
    results["checks"] = checks(results)
    return results


def measure_outputs(lines: int, data: Path) -> dict:
    """benchmarks/outputs.py as its own process: the time and memory to write an audit's four outputs."""
    with tempfile.TemporaryDirectory(prefix="gpu-auditor-bench-") as tmp:
        path = Path(tmp) / "outputs.json"
        subprocess.run([sys.executable, str(HERE / "outputs.py"), "--lines", str(lines), "--data", str(data),
                        "--json", str(path)], check=False)
        return json.loads(path.read_text())


def gate_cold_start(repeat: int = 5) -> dict | None:
    """`gpu-auditor gate` on one manifest, a fresh process each time: the median wall and CPU time."""
    manifest = HERE.parent / "fixtures" / "manifests" / "kubernetes" / "deployment-bad.yaml"
    if not manifest.exists():
        return None
    exe = Path(sys.executable).with_name("gpu-auditor")
    head = [str(exe)] if exe.exists() else [sys.executable, "-m", "auditor"]
    runs = [measure(head + ["gate", "--policy", str(manifest.parent.parent / "policy.yml"), str(manifest)])
            for _ in range(repeat)]
    runs.sort(key=lambda r: r["wall_s"])
    mid = runs[len(runs) // 2]
    return {"manifest": str(manifest.relative_to(HERE.parent)), "wall_s": mid["wall_s"], "cpu_s": mid["cpu_s"],
            "peak_rss": mid["peak_rss"], "rc": mid["rc"]}


def _get(results: dict, n: int, fmt: str, tool: str) -> dict | None:
    """The run of a tool on a format at size n that finished (a run stopped at the timeout or failed is no
    figure; the checks list it as not completed)."""
    return next((r for r in results["runs"] if (r.get("size", r["lines"]), r["format"], r["tool"]) == (n, fmt, tool)
                 and r["rc"] in (0, 1)), None)


def checks(results: dict) -> list[dict]:
    """The targets, each with the measured value and whether it is met."""
    out = []
    sizes = sorted(results["sizes"])
    big, small = sizes[-1], sizes[0]

    def add(name, value, target, met):
        out.append({"target": name, "value": value, "limit": target, "met": bool(met)})

    for n in sizes:
        for fmt in results["formats"]:
            runs = [r for r in results["runs"] if r.get("size", r["lines"]) == n and r["format"] == fmt
                    and r["rc"] != "timeout"]
            totals = [r["total_usd"] for r in runs if r["tool"] != "inspect"]
            if len(totals) > 1 and None not in totals:
                add(f"{n:,} {fmt}: every tool finds the same billed total (to the cent)",
                    round(max(totals) - min(totals), 4), 0.01, max(totals) - min(totals) < 0.01)
            inspect = next((r for r in runs if r["tool"] == "inspect"), None)
            if totals and inspect and inspect["total_usd"] is not None:  # each file's total is rounded
                off, limit = abs(inspect["total_usd"] - totals[0]), 0.005 * inspect["files"] + 0.01
                add(f"{n:,} {fmt}: inspect's file totals (each to the cent) add up to the same billed total",
                    round(off, 4), round(limit, 3), off <= limit)
    audit, floor = (_get(results, big, "cur-parquet", t) for t in ("audit", "floor"))
    if audit and floor:
        ratio = audit["wall_s"] / floor["wall_s"]
        add(f"{big:,} CUR Parquet: audit time / floor time", round(ratio, 2), TARGET_FLOOR_RATIO,
            ratio <= TARGET_FLOOR_RATIO)
    for fmt in results["formats"]:
        audit, pandas = _get(results, big, fmt, "audit"), _get(results, big, fmt, "pandas")
        if audit and pandas and pandas["rc"] == 0:
            speed = pandas["wall_s"] / audit["wall_s"]
            add(f"{big:,} {fmt}: pandas time / audit time", round(speed, 2), TARGET_PANDAS_SPEEDUP,
                speed >= TARGET_PANDAS_SPEEDUP)
            mem = audit["peak_rss"] / pandas["peak_rss"]
            add(f"{big:,} {fmt}: audit peak RSS / pandas peak RSS", round(mem, 2), TARGET_PANDAS_MEMORY,
                mem <= TARGET_PANDAS_MEMORY)
        if audit and fmt in ("cur-parquet", "cur-csv-gz"):
            add(f"{big:,} {fmt}: audit peak RSS (MiB)", round(audit["peak_rss"] / 2**20), TARGET_RSS // 2**20,
                audit["peak_rss"] < TARGET_RSS)
        if big != small:
            a_small, a_big = _get(results, small, fmt, "audit"), _get(results, big, fmt, "audit")
            if a_small and a_big:
                growth = a_big["wall_s"] / a_small["wall_s"]
                limit = TARGET_GROWTH * big / small / 10
                add(f"{fmt}: audit time {big:,} / {small:,} lines", round(growth, 2), round(limit, 2),
                    growth <= limit)
    for fmt in (f for f in results["formats"] if f in SHAPES):
        n = small if fmt == "tiny-files" else big
        audit, inspect, floor = (_get(results, n, fmt, t) for t in ("audit", "inspect", "floor"))
        for r in results["runs"]:
            if r.get("size") in (small, big) and r["format"] == fmt and r["rc"] not in (0, 1):
                what = "stopped" if r["rc"] == "timeout" else f"failed (exit {r['rc']})"
                add(f"{r['size']:,} {fmt}: {r['tool']} completes (ran {r['wall_s']:.0f} s, {r['cpu_s']} s CPU)", what,
                    "completes", False)
        if audit and floor:
            ratio = audit["wall_s"] / floor["wall_s"]
            add(f"{n:,} {fmt}: audit time / floor time (CPU: {audit['cpu_s'] / max(floor['cpu_s'], 0.01):.1f})",
                round(ratio, 2), TARGET_SHAPE_FLOOR, ratio <= TARGET_SHAPE_FLOOR)
        if audit:
            add(f"{n:,} {fmt}: audit peak RSS (MiB)", round(audit["peak_rss"] / 2**20), TARGET_RSS // 2**20,
                audit["peak_rss"] < TARGET_RSS)
        if inspect and floor:
            ratio = inspect["wall_s"] / floor["wall_s"]
            limit = TARGET_PARTS_GLOB if fmt != "churn-parquet" else TARGET_INSPECT_FLOOR
            add(f"{n:,} {fmt}: inspect time / floor time (CPU: "
                f"{inspect['cpu_s'] / max(floor['cpu_s'], 0.01):.1f})", round(ratio, 2), limit, ratio <= limit)
        if fmt != "tiny-files" and big != small:
            a_small, a_big = _get(results, small, fmt, "audit"), _get(results, big, fmt, "audit")
            if a_small and a_big:
                growth = a_big["wall_s"] / a_small["wall_s"]
                limit = TARGET_SHAPE_GROWTH * big / small / 10
                add(f"{fmt}: audit time {big:,} / {small:,} lines", round(growth, 2), limit, growth <= limit)
    for fmt in results["formats"]:
        n = small if fmt == "tiny-files" else big
        audit, floor, pandas = (_get(results, n, fmt, t) for t in ("audit", "floor", "pandas"))
        if audit and floor:
            ratio = audit["cpu_s"] / max(floor["cpu_s"], 0.01)
            add(f"{n:,} {fmt}: audit CPU / floor CPU", round(ratio, 1), TARGET_CPU_FLOOR, ratio <= TARGET_CPU_FLOOR)
        if audit and pandas and pandas["rc"] == 0:
            ratio = audit["cpu_s"] / max(pandas["cpu_s"], 0.01)
            add(f"{n:,} {fmt}: audit CPU / pandas CPU", round(ratio, 2), TARGET_CPU_PANDAS,
                ratio <= TARGET_CPU_PANDAS)
    for r in results["runs"]:
        if r["tool"] == "spark" and "differences_from_audit" in r:
            n = r["differences_from_audit"]["count"]
            add(f"{r['size']:,} {r['format']}: --engine spark's audit.json equals DuckDB's (figures that differ)", n,
                0, n == 0)
    out += (results.get("outputs") or {}).get("checks", [])
    gate = results.get("gate")
    if gate and gate["rc"] in (0, 1):
        add(f"gpu-auditor gate cold start, one manifest (s, median of 5; CPU {gate['cpu_s']} s)", gate["wall_s"],
            0.5, gate["wall_s"] < 0.5)
    return out


def merge(results: dict, other: dict) -> None:
    """Another command's runs into `results`: its rows replace those of the same size, format and tool."""
    key = lambda r: (r.get("size", r["lines"]), r["format"], r["tool"])  # noqa: E731
    new = {key(r) for r in other["runs"]}
    results["runs"] = [r for r in results["runs"] if key(r) not in new] + other["runs"]
    results["sizes"] = sorted(set(results["sizes"]) | set(other["sizes"]))
    results["formats"] += [f for f in other["formats"] if f not in results["formats"]]
    results.setdefault("also", []).append({k: other.get(k) for k in ("command", "date", "formats")}
                                          | {"load_before": other.get("machine", {}).get("load_before")})


def machine() -> dict:
    import duckdb

    info = {"python": platform.python_version(), "duckdb": duckdb.__version__, "os": platform.platform(),
            "cores": os.cpu_count()}
    try:
        from auditor import __version__

        info["gpu_auditor"] = __version__
    except ImportError:
        pass
    for mod in ("pandas", "pyarrow"):
        try:
            info[mod] = __import__(mod).__version__
        except ImportError:
            info[mod] = None
    try:
        meminfo = Path("/proc/meminfo").read_text().split("\n")[0].split()
        info["memory_gib"] = round(int(meminfo[1]) / 2**20, 1)
        cpu = [line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")]
        info["cpu"] = cpu[0].split(":", 1)[1].strip() if cpu else platform.processor()
        info["load_before"] = os.getloadavg()[0]
    except OSError:
        pass
    return info


def render(results: dict, command: str) -> str:
    m = results["machine"]
    lines = [
        "# Benchmarks",
        "",
        f"Measured by `{command}` on {results['date']}. Every number below is from that run; rerun the "
        "command to measure your machine (the generated data is cached in the data folder, deterministic).",
        "",
        f"Machine: {m.get('cpu', '?')}, {m['cores']} cores, {m.get('memory_gib', '?')} GiB memory, {m['os']}. "
        f"Python {m['python']}, DuckDB {m['duckdb']}, pandas {m.get('pandas')}, pyarrow {m.get('pyarrow')}, "
        f"gpu-auditor {m.get('gpu_auditor')}.",
        "",
        *[line for a in results.get("also", []) for line in (
            f"Also measured by `{a['command']}` on {a['date']} ({', '.join(a['formats'])}; 1-minute load average "
            f"{a['load_before']:.1f} as it started), on the same machine.", "")],
        "What is measured, each as its own process on the same files (three monthly files per format):",
        "",
        "- **audit**: `gpu-auditor audit --policy P --inventory I --out DIR FILES...`, end to end: detection, "
        "normalization into the `costs` table, the rules, all four report files.",
        "- **floor**: `benchmarks/floor.py`, one bare DuckDB query that scans the same files and computes the "
        "aggregates the rules read (spend per resource, transfer per usage type, spend per team, totals) "
        "from the raw columns, with no normalization.",
        "- **pandas**: `benchmarks/pandas_way.py`, pandas reading only the columns it needs and grouping them "
        "the same way.",
        "",
        "Wall time is the process's; CPU time is its user + system time; peak memory is its maximum resident "
        "set size (VmHWM, polled); 'load before' is the machine's 1-minute load average as the run started (the "
        "machine is shared: other work on it shows there, and stretches wall time more than CPU time).",
        "",
    ]
    for n in results["sizes"]:
        lines += [f"## {n:,} lines", "",
                  "| format | tool | wall s | lines/s | peak RSS MiB | CPU s | billed total USD | load before |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in results["runs"]:
            if r.get("size", r["lines"]) != n:
                continue
            name = r["format"] if r["lines"] == n else f"{r['format']} ({r['lines']:,} lines)"
            if r["rc"] == "timeout":
                total = f"stopped after {r['wall_s']:.0f} s"
            else:
                total = f"{r['total_usd']:,.2f}" if r["total_usd"] is not None else f"failed (rc {r['rc']})"
            lines.append(f"| {name} | {r['tool']} | {r['wall_s']:.2f} | {r['lines_per_s'] or 0:,} | "
                         f"{r['peak_rss'] / 2**20:,.0f} | {r['cpu_s']:.1f} | {total} | {r.get('load', '')} |")
        lines.append("")
    lines += ["## Ratios", "", "Time is wall time; CPU is the same ratio of CPU time (steadier on a shared machine).",
              "", "| format | audit / floor time | audit / floor CPU | inspect / floor time | pandas / audit time "
              "| audit / pandas memory |", "|---|---:|---:|---:|---:|---:|"]
    for n in results["sizes"]:
        for fmt in results["formats"]:
            a, i, f, p = (_get(results, n, fmt, t) for t in TOOLS)
            if not (a or i or f or p):
                continue
            cell = lambda x: f"{x:.2f}" if x is not None else "–"  # noqa: E731
            lines.append(f"| {n:,} {fmt} | {cell(a['wall_s'] / f['wall_s'] if a and f else None)} | "
                         f"{cell(a['cpu_s'] / f['cpu_s'] if a and f and f['cpu_s'] else None)} | "
                         f"{cell(i['wall_s'] / f['wall_s'] if i and f else None)} | "
                         f"{cell(p['wall_s'] / a['wall_s'] if a and p else None)} | "
                         f"{cell(a['peak_rss'] / p['peak_rss'] if a and p else None)} |")
    if len(results["sizes"]) > 1:
        small, big = min(results["sizes"]), max(results["sizes"])
        lines += ["", f"Growth from {small:,} to {big:,} lines (time ratio; {big // small}x the lines):", "",
                  "| format | audit | inspect | floor | pandas |", "|---|---:|---:|---:|---:|"]
        for fmt in (f for f in results["formats"] if f != "tiny-files"):
            cells = []
            for tool in TOOLS:
                a, b = _get(results, small, fmt, tool), _get(results, big, fmt, tool)
                cells.append(f"{b['wall_s'] / a['wall_s']:.2f}" if a and b else "–")
            lines.append(f"| {fmt} | {' | '.join(cells)} |")
    o = results.get("outputs")
    if o:
        mib = 2**20
        lines += ["", f"## Writing the outputs of {o['findings']:,} findings", "",
                  f"`benchmarks/outputs.py --lines {o['lines']}`: the high-churn shape at {o['lines']:,} lines, "
                  "audited in one process, then `write_outputs` alone (audit.json, report.html, report.md, "
                  "findings.csv, jobs.csv) measured.", "",
                  "| findings | write wall s | write CPU s | resident before MiB | grew while writing MiB "
                  "| audit.json MiB | findings.csv MiB | load |", "|---:|---:|---:|---:|---:|---:|---:|---:|",
                  f"| {o['findings']:,} | {o['write_wall_s']:.2f} | {o['write_cpu_s']:.2f} | "
                  f"{o['rss_before'] / mib:,.0f} | {(o['grew'] or 0) / mib:,.0f} | "
                  f"{o['sizes']['audit.json'] / mib:,.0f} | {o['sizes']['findings.csv'] / mib:,.0f} | {o['load']} |"]
    lines += ["", "## Targets", "", "| target | measured | limit | met |", "|---|---:|---:|---|"]
    for c in results["checks"]:
        lines.append(f"| {c['target']} | {c['value']} | {c['limit']} | {'yes' if c['met'] else '**no**'} |")
    notes = HERE / "NOTES.md"  # the analysis: where the time goes, the limits; kept by hand
    if notes.exists():
        lines += ["", notes.read_text().strip()]
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description="Benchmark gpu-auditor against the DuckDB floor and pandas.")
    ap.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--formats", nargs="+", choices=FORMATS + SHAPES, default=list(FORMATS),
                    help="today's formats, and the shapes of issues 15 and 28 (churn-parquet, parts-csv-gz, "
                         "tiny-files, tagchurn-parquet)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds a run may take before it is stopped")
    ap.add_argument("--tools", nargs="+", choices=TOOLS + OPTIONAL, default=list(TOOLS),
                    help="what to measure; `spark` (gpu-auditor audit --engine spark, local mode, the Python "
                         "process and its JVM measured together; put it after `audit` to compare their audit.json) "
                         "runs only when named")
    ap.add_argument("--outputs", type=int, nargs="?", const=OUTPUT_LINES, metavar="LINES",
                    help="also measure writing the outputs of an audit with 100,000 findings (benchmarks/outputs.py, "
                         f"on the high-churn shape at LINES lines; default {OUTPUT_LINES:,})")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "gpu-auditor-bench",
                    help="where the generated exports are kept between runs")
    ap.add_argument("--out", type=Path, default=HERE / "results.json", help="results as JSON")
    ap.add_argument("--markdown", type=Path, default=HERE.parent / "BENCHMARKS.md",
                    help="the report; '-' to skip")
    ap.add_argument("--render", action="store_true",
                    help="only write the report again from --out's results (after editing NOTES.md)")
    ap.add_argument("--merge", type=Path, nargs="+", metavar="RESULTS",
                    help="add these runs' results (other formats or tools, measured by separate commands) to "
                         "--out's, replacing the same size, format and tool, and write the report again")
    args = ap.parse_args()
    if args.render or args.merge:
        results = json.loads(args.out.read_text())
        for other in (json.loads(p.read_text()) for p in args.merge or []):
            merge(results, other)
        if args.merge:
            results["checks"] = checks(results)
            args.out.write_text(json.dumps(results, indent=2))
        args.markdown.write_text(render(results, results.get("command", "python benchmarks/run.py")))
        return
    before = machine()
    results = run(sorted(args.lines), args.data, tuple(args.formats), tuple(args.tools), timeout=args.timeout)
    if args.outputs:
        results["outputs"] = measure_outputs(args.outputs, args.data)
        results["checks"] = checks(results)
    results["machine"] = before
    results["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = "python benchmarks/run.py " + " ".join(sys.argv[1:])
    results["command"] = command.strip()
    args.out.write_text(json.dumps(results, indent=2))
    if str(args.markdown) != "-":
        args.markdown.write_text(render(results, command.strip()))
    for c in results["checks"]:
        print(f"{'ok  ' if c['met'] else 'MISS'} {c['target']}: {c['value']} (limit {c['limit']})")


if __name__ == "__main__":
    main()

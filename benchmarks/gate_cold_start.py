"""Cold start of `gpu-auditor gate` on one manifest, against a bare `python -c pass`.

A pre-commit hook runs on every commit, so the gate must start in well under half a second. This runs each
command N times as a fresh process (alternating, so both see the same machine load), and reports the median
and best wall times, the ratio of the gate to bare Python, and the gate's own cost (the difference). Rerun it
whenever the gate's imports change:

    python benchmarks/gate_cold_start.py [--runs 15] [--json results.json]

The gate runs as `python -m auditor gate` (the console script adds only its own small start-up), judged
under the fixtures' policy, on one Kubernetes Job. Exit status 1 when the median exceeds the target.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POLICY = REPO / "fixtures" / "manifests" / "policy.yml"
MANIFEST = REPO / "fixtures" / "manifests" / "kubernetes" / "job-good.yaml"
TARGET_S = 0.5  # median wall time of the gate on one manifest


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    elapsed = time.perf_counter() - start
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args()
    bare = [sys.executable, "-c", "pass"]
    gate = [sys.executable, "-m", "auditor", "gate", "--policy", str(POLICY), str(MANIFEST)]
    # A cold start is a new process, not a fresh checkout: the bytecode caches are written first, as `pip install`
    # writes them (explicitly, since with PYTHONDONTWRITEBYTECODE set the gate's own run would write none).
    subprocess.run([sys.executable, "-m", "compileall", "-q", "auditor", "rules"], cwd=REPO, check=True,
                   capture_output=True)
    timed(gate)
    times: dict[str, list[float]] = {"bare": [], "gate": []}
    for _ in range(args.runs):
        times["bare"].append(timed(bare))
        times["gate"].append(timed(gate))
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    result = {
        "python": platform.python_version(), "machine": platform.machine(), "runs": args.runs,
        "median_s": med, "best_s": best,
        "ratio_median": med["gate"] / med["bare"], "ratio_best": best["gate"] / best["bare"],
        "gate_own_median_s": med["gate"] - med["bare"], "target_s": TARGET_S,
    }
    print(f"python -c pass      median {med['bare'] * 1000:7.1f} ms   best {best['bare'] * 1000:7.1f} ms")
    print(f"gpu-auditor gate    median {med['gate'] * 1000:7.1f} ms   best {best['gate'] * 1000:7.1f} ms")
    print(f"ratio gate / bare   median {result['ratio_median']:7.1f} x    best {result['ratio_best']:7.1f} x")
    print(f"the gate's own cost median {result['gate_own_median_s'] * 1000:7.1f} ms; target: under "
          f"{TARGET_S * 1000:.0f} ms in all")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if med["gate"] < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())

"""The way people do it today: a pandas script that reads the export and groups it. It reads only the
columns it needs (as a careful analyst would) and computes the same aggregates as benchmarks/floor.py.

    python benchmarks/pandas_way.py cur-parquet FILE...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
from floor import columns  # noqa: I001 - run as a script from benchmarks/


def main() -> None:
    fmt, files = sys.argv[1], sys.argv[2:]
    c = columns(fmt)
    wanted = list(dict.fromkeys(c.values()))
    # A folder's files, as a script would find them.
    files = [str(f) for a in files for f in (sorted(Path(a).rglob("*.*")) if Path(a).is_dir() else [Path(a)])]
    if fmt.endswith("parquet"):
        df = pd.concat([pd.read_parquet(f, columns=wanted) for f in files], ignore_index=True)
    else:
        df = pd.concat([pd.read_csv(f, usecols=wanted) for f in files], ignore_index=True)
    df = df.rename(columns={v: k for k, v in c.items()})
    if fmt.startswith("focus"):
        df["team"] = df["team"].str.extract(r'"team":\s*"([^"]*)"', expand=False)  # Tags is JSON text
    df["usage_type"] = df["usage_type"].where(df["usage_type"].str.endswith("Bytes", na=False))
    groups = 0
    per_resource = df.groupby(["resource", "currency"]).agg(cost=("cost", "sum"), amount=("amount", "sum"),
                                                            lines=("cost", "size"), last=("start", "max"))
    groups += len(per_resource)
    for key in ("usage_type", "team", "category"):
        groups += len(df.groupby([key, "currency"]).agg(cost=("cost", "sum"), amount=("amount", "sum")))
    total = df.groupby("currency")["cost"].sum()
    groups += len(total)
    print(json.dumps({"total": {k: float(v) for k, v in total.items()}, "lines": len(df),
                      "resources": len(per_resource), "groups": groups}))


if __name__ == "__main__":
    main()

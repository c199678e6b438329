"""The one SELECT that turns a billing file into rows of the `costs` table, built from a reader's column
expressions (auditor/providers/). DuckDB runs it (Store.load_file); Spark runs the same text, translated
(auditor/engines/spark.py).

Most of a reader's work is classification: regular expressions over usage types and descriptions, tag maps
built from tag columns, CASEs over region names. Its inputs repeat from line to line (an export of ten million
lines has a few thousand distinct resources, usage types and tag sets), so those expressions are computed once
per distinct combination of the columns they read, and joined back to the lines. Only the amounts and times,
which differ on every line, are computed line by line.
"""

from __future__ import annotations

import re

from auditor.providers.columns import Columns, lit, q

# Amounts differ on nearly every line: computed per line, and the source columns they read are never part of
# a distinct key. Times repeat (hourly or daily lines), so they get distinct keys of their own.
PER_LINE = ("BilledCost", "EffectiveCost", "ListCost", "ConsumedQuantity")
TIMES = ("ChargePeriodStart", "ChargePeriodEnd")
# Work worth doing once per distinct value rather than once per line.
COSTLY = re.compile(r"(?i)regexp|\blike\b|\bilike\b|similar|lambda|json|map|list_|strptime|\bcase\b|split_part|"
                    r"timezone|timestamptz")
ENRICHED = ("x_GpuModel", "x_GpuCount", "x_CostCategory", "x_SourceFile", "x_SourceRow", "x_SourceFormat")
EXTRA = ("_kind", "_gpu", "_gpu_count")
DEFAULTS = {"_gpu": "CAST(NULL AS VARCHAR)", "_gpu_count": "CAST(NULL AS INTEGER)"}


def referenced(expr: str, top: list[str]) -> set[str]:
    """The source columns an expression reads: quoted (`"lineItem/UsageType"`, `"product"."region"`) or bare
    (`resource_tags`). A bare match may be a false positive (a word in a literal), which only costs speed."""
    found = set()
    for name in top:
        if q(name) in expr or (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
                               and re.search(rf"(?<![\w.\"']){re.escape(name)}(?![\w\"'])", expr, re.IGNORECASE)):
            found.add(name)
    return found


def split(exprs: dict[str, str], cols: Columns) -> list[tuple[list[str], list[str]]]:
    """Groups of (outputs computed once per distinct key, the source columns that make the key): one for the
    times, one for everything else worth it; the rest is computed per line."""
    top = [n for n in cols.names if n not in cols.fields]
    refs = {c: referenced(e, top) for c, e in exprs.items()}
    per_line = set().union(*(refs[c] for c in PER_LINE if c in refs))

    def worth(c: str) -> bool:
        return c not in PER_LINE and bool(refs[c]) and not refs[c] & per_line and bool(COSTLY.search(exprs[c]))

    times = [c for c in TIMES if c in exprs and worth(c)]
    time_cols = set().union(*(refs[c] for c in times)) if times else set()
    rest = [c for c in exprs if c not in TIMES and worth(c) and not refs[c] & time_cols]
    groups = []
    for outputs in (times, rest):
        if outputs:
            groups.append((outputs, sorted(set().union(*(refs[c] for c in outputs)))))
    return groups


def select_sql(exprs: dict[str, str], cols: Columns, relation: str, first_row: int, path: str, fmt: str,
               costs: list[str], row_number: str = "row_number() OVER ()") -> str:
    """The SELECT of one file's `costs` rows (the columns in `costs` order). `exprs` are the reader's
    expressions by output column; the catalog tables `catalog_instance_types` and `catalog_gpu_families` add
    the GPU model and count."""
    outputs_all = [c for c in costs if c not in ENRICHED] + list(EXTRA)
    exprs = {c: exprs.get(c) or DEFAULTS.get(c, "NULL") for c in outputs_all}
    groups = split(exprs, cols)
    it_key = "lower(regexp_replace(n.x_InstanceType, '^ml\\.', ''))"
    # The family of an instance type, as the `gpu_family` macro in store.py has it (inlined: Spark has no macros).
    fam_key = ("lower(CASE n.x_Provider WHEN 'aws' THEN split_part(regexp_replace(n.x_InstanceType, '^ml\\.', ''), "
               "'.', 1) WHEN 'gcp' THEN regexp_replace(n.x_InstanceType, '-[^-]+$', '') ELSE n.x_InstanceType END)")
    keyed = {c: f"d{i}" for i, (outputs, _) in enumerate(groups) for c in outputs}
    source = f"(SELECT *, {row_number} + {first_row - 1} AS __row FROM {relation}) s"
    for i, (outputs, key) in enumerate(groups):
        names = {k: f"__k{j}" for j, k in enumerate(key)}
        dims = (f"SELECT {', '.join(f'{q(k)} AS {names[k]}' for k in key)}, * FROM "
                f"(SELECT DISTINCT {', '.join(q(k) for k in key)} FROM {relation})")
        computed = ", ".join(f"{exprs[c]} AS {q('__' + c)}" for c in outputs)
        dims = f"SELECT {', '.join(names.values())}, {computed} FROM ({dims})"
        on = " AND ".join(f"s.{q(k)} IS NOT DISTINCT FROM d{i}.{names[k]}" for k in key)
        source += f" JOIN ({dims}) d{i} ON {on}"
    inner = ", ".join(f"{keyed[c]}.{q('__' + c)} AS {q(c)}" if c in keyed else f"{exprs[c]} AS {q(c)}"
                      for c in outputs_all)
    return f"""
        SELECT {', '.join(f'n.{q(c)}' for c in outputs_all if c not in EXTRA)}, n.x_SourceRow,
            COALESCE(n._gpu, t.gpu_model, f.gpu_model) AS x_GpuModel,
            COALESCE(n._gpu_count, t.gpu_count) AS x_GpuCount,
            CASE WHEN n._kind = 'compute' AND COALESCE(n._gpu, t.gpu_model, f.gpu_model) IS NOT NULL
                 THEN 'gpu_compute'
                 WHEN n._kind = 'compute' THEN 'other_compute' ELSE n._kind END AS x_CostCategory,
            {lit(path)} AS x_SourceFile,
            {lit(fmt)} AS x_SourceFormat
        FROM (SELECT {inner}, __row AS x_SourceRow FROM {source}) n
        LEFT JOIN catalog_instance_types t
            ON t.provider = n.x_Provider AND t.instance_type = {it_key}
        LEFT JOIN catalog_gpu_families f
            ON f.provider = n.x_Provider AND f.family = {fam_key}"""

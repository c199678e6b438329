"""The normalized tables in an embedded DuckDB database, and the SQL that reduces them to entities.

Billing lines are never looped over in Python: each file is read and normalized by one INSERT ... SELECT,
and every summary is a GROUP BY.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from auditor.catalog import Catalog, load_catalog
from auditor.errors import InputError
from auditor.model import GpuAsset, Job, ResourceSpend, TransferFlow
from auditor.providers import aws, azure, focus, gcp
from auditor.providers.columns import MONEY, Columns, lit, q
from auditor.providers.detect import Sniffed, expand, sniff

COSTS = {
    "BilledCost": MONEY, "EffectiveCost": MONEY, "ListCost": MONEY, "BillingCurrency": "VARCHAR",
    "ChargePeriodStart": "TIMESTAMP", "ChargePeriodEnd": "TIMESTAMP", "ChargeCategory": "VARCHAR",
    "ChargeDescription": "VARCHAR", "ServiceName": "VARCHAR", "ServiceCategory": "VARCHAR",
    "ProviderName": "VARCHAR", "BillingAccountId": "VARCHAR", "SubAccountId": "VARCHAR",
    "ResourceId": "VARCHAR", "RegionId": "VARCHAR", "AvailabilityZone": "VARCHAR", "SkuId": "VARCHAR",
    "PricingCategory": "VARCHAR", "ConsumedQuantity": MONEY, "ConsumedUnit": "VARCHAR",
    "Tags": "MAP(VARCHAR, VARCHAR)", "x_Provider": "VARCHAR", "x_UsageType": "VARCHAR",
    "x_InstanceType": "VARCHAR", "x_GpuModel": "VARCHAR", "x_GpuCount": "INTEGER", "x_CostCategory": "VARCHAR",
    "x_TransferKind": "VARCHAR", "x_TransferDirection": "VARCHAR", "x_TransferFrom": "VARCHAR",
    "x_TransferTo": "VARCHAR", "x_SourceFile": "VARCHAR", "x_SourceRow": "BIGINT", "x_SourceFormat": "VARCHAR",
}
ENRICHED = ("x_GpuModel", "x_GpuCount", "x_CostCategory", "x_SourceFile", "x_SourceRow", "x_SourceFormat")

TABLES = f"""
CREATE TABLE costs ({', '.join(f'{q(k)} {v}' for k, v in COSTS.items())});
CREATE TABLE assets (id VARCHAR PRIMARY KEY, provider VARCHAR, account VARCHAR, region VARCHAR, zone VARCHAR,
    name VARCHAR, kind VARCHAR, instance_type VARCHAR, gpu_model VARCHAR, gpu_count INTEGER,
    gpu_memory_gb DOUBLE, lifecycle VARCHAR, state VARCHAR, launch_time TIMESTAMP, tags MAP(VARCHAR, VARCHAR));
CREATE TABLE gpu_usage (asset_id VARCHAR, window_start TIMESTAMP, window_end TIMESTAMP, samples BIGINT,
    mean_util_pct DOUBLE, p95_util_pct DOUBLE, peak_mem_gb DOUBLE, source VARCHAR);
CREATE TABLE jobs (id VARCHAR PRIMARY KEY, platform VARCHAR, provider VARCHAR, account VARCHAR, region VARCHAR,
    name VARCHAR, state VARCHAR, instance_type VARCHAR, instance_count INTEGER, gpu_model VARCHAR,
    gpu_count INTEGER, spot BOOLEAN, checkpoint_uri VARCHAR, checkpoint_interval_min DOUBLE,
    max_runtime_s BIGINT, max_wait_s BIGINT, training_s BIGINT, billable_s BIGINT, interruptions INTEGER,
    start_time TIMESTAMP, end_time TIMESTAMP, tags MAP(VARCHAR, VARCHAR), source_file VARCHAR,
    source_line INTEGER);
CREATE MACRO gpu_family(p, t) AS CASE p
    WHEN 'aws' THEN split_part(regexp_replace(t, '^ml\\.', ''), '.', 1)
    WHEN 'gcp' THEN regexp_replace(t, '-[^-]+$', '')
    ELSE t END;
"""

READERS = {"aws-cur": aws.select, "aws-cur2": aws.select, "focus-1.0": focus.select, "focus-1.1": focus.select,
           "focus-1.2": focus.select, "gcp-billing": gcp.select, "azure-cost": azure.select}
NULL_STRINGS = {"focus-1.0": ["", "NULL"], "focus-1.1": ["", "NULL"], "focus-1.2": ["", "NULL"]}


@dataclass(frozen=True)
class Window:
    """A half-open UTC interval [start, end)."""

    start: datetime
    end: datetime
    label: str = ""

    @property
    def hours(self) -> Decimal:
        return Decimal((self.end - self.start).total_seconds()) / 3600

    def where(self, column: str = "ChargePeriodStart") -> str:
        return f"{q(column)} >= TIMESTAMP {lit(self.start.isoformat(' '))} " \
               f"AND {q(column)} < TIMESTAMP {lit(self.end.isoformat(' '))}"


@dataclass
class SourceFile:
    path: str
    format: str
    sha256: str
    rows: int = 0
    cost_column: str | None = None  # the export's own column the billed cost is summed from
    duplicate_of: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Store:
    def __init__(self, catalog: Catalog | None = None, database: str = ":memory:"):
        self.con = duckdb.connect(database)
        self.con.execute("SET TimeZone = 'UTC'")
        # Large exports spill to a private temporary folder instead of growing without bound.
        self._spill = tempfile.TemporaryDirectory(prefix="gpu-auditor-")
        self.con.execute(f"SET temp_directory = {lit(self._spill.name)}")
        self.con.execute(f"SET memory_limit = {lit(os.environ.get('GPU_AUDITOR_MEMORY_LIMIT', '2GB'))}")
        self.catalog = catalog or load_catalog()
        self.catalog.register(self.con)
        self.con.execute(TABLES)
        self.sources: list[SourceFile] = []
        self.warnings: list[str] = []

    # ---- billing -------------------------------------------------------------------------------------
    def load_billing(self, paths: list[Path], progress: Callable[[str], None] | None = None) -> list[SourceFile]:
        files = expand([Path(p) for p in paths], self.warnings)
        seen: dict[str, str] = {}
        loaded = []
        for i, path in enumerate(files, 1):
            digest = sha256_of(path)
            if digest in seen:
                self.warnings.append(f"{path}: same content as {seen[digest]}; read once")
                self.sources.append(SourceFile(str(path), "duplicate", digest, duplicate_of=seen[digest]))
                continue
            seen[digest] = str(path)
            if progress:
                progress(f"[{i}/{len(files)}] reading {path}")
            loaded.append(self.load_file(path, digest))
        if len(loaded) > 1:
            self._drop_redeliveries(loaded)
        return [s for s in loaded if s.duplicate_of is None]

    def _drop_redeliveries(self, loaded: list[SourceFile]) -> None:
        """A month exported twice (a re-delivered CUR, a second download) shares most of its lines with the
        first copy. Of two files that share over half their lines, keep the one that reaches later (then the
        larger) and drop the other, so no line is counted twice."""
        pairs = self.con.execute(f"""
            WITH k AS (SELECT DISTINCT x_SourceFile AS f, hash({LINE_KEY}) AS h FROM costs)
            SELECT a.f, b.f, count(*) FROM k a JOIN k b ON a.h = b.h AND a.f < b.f GROUP BY ALL""").fetchall()
        by_path = {s.path: s for s in loaded}
        for a, b, shared in pairs:
            sa, sb = by_path[a], by_path[b]
            if sa.duplicate_of or sb.duplicate_of or shared * 2 <= min(sa.rows, sb.rows):
                continue
            rank = lambda s: (s.stats["period_end"], s.rows, s.path)  # noqa: E731
            keep, drop = (sa, sb) if rank(sa) >= rank(sb) else (sb, sa)
            self.con.execute("DELETE FROM costs WHERE x_SourceFile = ?", [drop.path])
            drop.duplicate_of = keep.path
            self.warnings.append(f"{drop.path}: {shared:,} of its {drop.rows:,} lines are also in {keep.path} "
                                 "(a re-delivered export?); counted once, from the latter")

    def load_file(self, path: Path, digest: str | None = None) -> SourceFile:
        sniffed = sniff(path, self.con)
        source = SourceFile(str(path), sniffed.format, digest or sha256_of(path))
        cols = Columns(sniffed.columns, sniffed.fields, sniffed.types)
        exprs, checks = READERS[sniffed.format](cols, self.catalog)
        source.cost_column = next((c for c, kind in checks if kind == "money"), None)
        relation = self._relation(sniffed)
        first_row = 2 if sniffed.container == "csv" else 1  # CSV rows are counted as lines, after the header
        exprs["Tags"] = f"COALESCE({exprs['Tags']}, CAST(MAP() AS MAP(VARCHAR, VARCHAR)))"  # no tags: an empty map
        inner = ", ".join(f"{exprs.get(c, 'NULL')} AS {q(c)}" for c in COSTS if c not in ENRICHED)
        sql = f"""
            INSERT INTO costs BY NAME
            SELECT n.* EXCLUDE (_kind, _gpu, _gpu_count),
                COALESCE(n._gpu, t.gpu_model, f.gpu_model) AS x_GpuModel,
                COALESCE(n._gpu_count, t.gpu_count) AS x_GpuCount,
                CASE WHEN n._kind = 'compute' AND COALESCE(n._gpu, t.gpu_model, f.gpu_model) IS NOT NULL
                     THEN 'gpu_compute'
                     WHEN n._kind = 'compute' THEN 'other_compute' ELSE n._kind END AS x_CostCategory,
                {lit(str(path))} AS x_SourceFile,
                {lit(sniffed.format)} AS x_SourceFormat
            FROM (
                SELECT {inner}, {exprs['_kind']} AS _kind, {exprs.get('_gpu', 'CAST(NULL AS VARCHAR)')} AS _gpu,
                       {exprs.get('_gpu_count', 'CAST(NULL AS INTEGER)')} AS _gpu_count,
                       __row AS x_SourceRow
                FROM (SELECT *, row_number() OVER () + {first_row - 1} AS __row FROM {relation})
            ) n
            LEFT JOIN catalog_instance_types t
                ON t.provider = n.x_Provider AND t.instance_type = lower(regexp_replace(n.x_InstanceType, '^ml\\.', ''))
            LEFT JOIN catalog_gpu_families f
                ON f.provider = n.x_Provider AND f.family = lower(gpu_family(n.x_Provider, n.x_InstanceType))
        """
        try:
            self.con.execute("BEGIN")
            self.con.execute(sql)
            source.rows = self.con.execute("SELECT count(*) FROM costs WHERE x_SourceFile = ?",
                                           [str(path)]).fetchone()[0]
            self._check_values(path, source.rows)
            self.con.execute("COMMIT")
        except duckdb.Error as e:
            self.con.execute("ROLLBACK")
            raise self._diagnose(sniffed, cols, relation, checks, first_row, e) from None
        except InputError:
            self.con.execute("ROLLBACK")
            raise
        if source.rows == 0:
            raise InputError("the file has a header but no billing lines", path=str(path))
        source.stats = self.file_stats(str(path))
        self.sources.append(source)
        return source

    def _relation(self, s: Sniffed) -> str:
        p = lit(str(s.path))
        if s.container == "parquet":
            return f"read_parquet({p})"
        if s.container == "json":
            return f"read_ndjson({p})"
        nulls = "[" + ", ".join(lit(n) for n in NULL_STRINGS.get(s.format, [""])) + "]"
        # The header was read already; naming the columns turns DuckDB's sniffer off, so a ragged or
        # unquoted row is an error with its line rather than a guess.
        columns = "{" + ", ".join(f"{lit(c)}: 'VARCHAR'" for c in s.columns) + "}"
        return (f"read_csv({p}, header = true, auto_detect = false, columns = {columns}, delim = ',', "
                f"quote = '\"', escape = '\"', nullstr = {nulls}, compression = {lit(s.compression)}, "
                f"strict_mode = true, encoding = 'utf-8')")

    def _check_values(self, path: Path, rows: int) -> None:
        """Lines whose cost or time is missing cannot be counted: say which, rather than drop them."""
        bad = self.con.execute(
            "SELECT x_SourceRow, BilledCost IS NULL, ChargePeriodStart IS NULL FROM costs "
            "WHERE x_SourceFile = ? AND (BilledCost IS NULL OR ChargePeriodStart IS NULL) "
            "ORDER BY x_SourceRow LIMIT 1", [str(path)]).fetchone()
        if bad:
            what = "the cost is empty" if bad[1] else "the charge period start is empty"
            raise InputError(f"{what}; every billing line needs a cost and a start time",
                             path=str(path), line=bad[0])

    def _diagnose(self, s: Sniffed, cols: Columns, relation: str, checks: list[tuple[str, str]],
                  first_row: int, error: duckdb.Error) -> InputError:
        """Turn a DuckDB error into one line that names the file, the line and the column."""
        tests = {"money": f"TRY_CAST(v AS {MONEY}) IS NULL", "time": "TRY_CAST(v AS TIMESTAMPTZ) IS NULL",
                 "date": f"({azure.parse_date('trim(CAST(v AS VARCHAR))', try_=True)}) IS NULL",
                 "tags": "NOT json_valid(CASE WHEN starts_with(trim(v), '{') THEN trim(v) ELSE '{' || v || '}' END)",
                 "json": "NOT json_valid(CAST(v AS VARCHAR)) OR json_type(CAST(v AS VARCHAR)) <> 'OBJECT'"}
        want = {"money": "a number", "time": "a UTC time like 2026-07-01T00:00:00Z", "json": "a JSON object",
                "date": "a date like 09/21/2023 or 2023-09-21", "tags": "a JSON object of tags"}
        try:
            for column, kind in checks:
                row = self.con.execute(
                    f"SELECT rn, v FROM (SELECT row_number() OVER () + {first_row - 1} AS rn, {cols.ref(column)} AS v "
                    f"FROM {relation}) WHERE v IS NOT NULL AND ({tests[kind]}) ORDER BY rn LIMIT 1").fetchone()
                if row:
                    return InputError(f"{str(row[1])[:60]!r} is not {want[kind]}", path=str(s.path),
                                      line=row[0], column=column)
        except duckdb.Error as e:
            error = e
        message = str(error).strip().splitlines()[0]
        message = re.sub(r"^[A-Za-z ]*Error: ", "", message)
        line = re.search(r"[Ll]ine:? (\d+)", str(error))
        return InputError(f"cannot read the file: {message}", path=str(s.path),
                          line=int(line.group(1)) if line else None)

    # ---- inventory -----------------------------------------------------------------------------------
    def load_snapshot(self, doc: dict[str, Any]) -> None:
        tags = "MAP(VARCHAR, VARCHAR)"
        self.con.executemany(
            f"INSERT INTO assets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS {tags}))",
            [[a["id"], a["provider"], a["account"], a["region"], a["zone"], a["name"], a["kind"],
              a["instance_type"], a["gpu_model"], a["gpu_count"], a["gpu_memory_gb"], a["lifecycle"],
              a["state"], a["launch_time"], a["tags"]] for a in doc["assets"]])
        self.con.executemany(
            "INSERT INTO gpu_usage VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [[u["asset_id"], u["window_start"], u["window_end"], u["samples"], u["mean_util_pct"],
              u["p95_util_pct"], u["peak_mem_gb"], u["source"]] for u in doc["gpu_usage"]])
        self.con.executemany(
            f"INSERT INTO jobs VALUES ({', '.join(['?'] * 21)}, CAST(? AS {tags}), ?, ?)",
            [[j["id"], j["platform"], j["provider"], j["account"], j["region"], j["name"], j["state"],
              j["instance_type"], j["instance_count"], j["gpu_model"], j["gpu_count"], j["spot"],
              j["checkpoint_uri"], j["checkpoint_interval_min"], j["max_runtime_s"], j["max_wait_s"],
              j["training_s"], j["billable_s"], j["interruptions"], j["start_time"], j["end_time"], j["tags"],
              j.get("source_file"), j.get("source_line")] for j in doc["jobs"]])

    # ---- summaries -----------------------------------------------------------------------------------
    def data_window(self) -> Window | None:
        start, end = self.con.execute("SELECT min(ChargePeriodStart), max(ChargePeriodEnd) FROM costs").fetchone()
        if start is None:
            return None
        return Window(start, end or start, "")

    def _per_currency(self, sql: str, params: list | None = None) -> dict[str, dict[str, Decimal]]:
        """Rows of (key, currency, amount) into {key: {currency: amount}}."""
        out: dict[str, dict[str, Decimal]] = {}
        for key, currency, amount in self.con.execute(sql, params or []).fetchall():
            out.setdefault(key, {})[currency] = amount
        return out

    def file_stats(self, path: str) -> dict[str, Any]:
        where = f"x_SourceFile = {lit(path)}"
        return self._stats(where)

    def window_stats(self, window: Window) -> dict[str, Any]:
        return self._stats(window.where())

    def _stats(self, where: str) -> dict[str, Any]:
        start, end, rows = self.con.execute(
            f"SELECT min(ChargePeriodStart), max(ChargePeriodEnd), count(*) FROM costs WHERE {where}").fetchone()
        totals = self._per_currency(
            f"SELECT 'billed', BillingCurrency, sum(BilledCost) FROM costs WHERE {where} GROUP BY ALL "
            f"UNION ALL SELECT 'effective', BillingCurrency, sum(EffectiveCost) FROM costs WHERE {where} "
            f"GROUP BY ALL UNION ALL SELECT 'list', BillingCurrency, sum(ListCost) FROM costs WHERE {where} "
            "GROUP BY ALL")
        gpu = self._per_currency(
            f"SELECT 'gpu', BillingCurrency, sum(BilledCost) FROM costs WHERE {where} AND "
            "x_CostCategory = 'gpu_compute' GROUP BY ALL UNION ALL "
            f"SELECT 'spot', BillingCurrency, sum(BilledCost) FROM costs WHERE {where} AND "
            "PricingCategory = 'Dynamic' GROUP BY ALL UNION ALL "
            f"SELECT 'gpu_spot', BillingCurrency, sum(BilledCost) FROM costs WHERE {where} AND "
            "PricingCategory = 'Dynamic' AND x_CostCategory = 'gpu_compute' GROUP BY ALL")
        by_category = self._per_currency(
            f"SELECT x_CostCategory, BillingCurrency, sum(BilledCost) FROM costs WHERE {where} GROUP BY ALL "
            "ORDER BY 1")
        lines = dict(self.con.execute(
            f"SELECT COALESCE(x_CostCategory, 'other'), count(*) FROM costs WHERE {where} GROUP BY ALL ORDER BY 1"
        ).fetchall())
        by_provider = self._per_currency(
            f"SELECT x_Provider, BillingCurrency, sum(BilledCost) FROM costs WHERE {where} GROUP BY ALL ORDER BY 1")
        transfer = {kind: str(gb.quantize(Decimal("0.001"))) for kind, gb in self.con.execute(
            f"SELECT x_TransferKind, sum({GB}) FROM costs WHERE {where} AND x_TransferKind IS NOT NULL "
            "AND x_TransferDirection = 'out' GROUP BY ALL ORDER BY 1").fetchall()}
        gpu_hours = self.con.execute(
            f"SELECT sum(ConsumedQuantity * x_GpuCount) FROM costs WHERE {where} AND x_GpuCount IS NOT NULL "
            f"AND ChargeCategory = 'Usage' AND x_CostCategory = 'gpu_compute' AND {HOURS}"
        ).fetchone()[0]
        return {
            "rows": rows, "period_start": start, "period_end": end,
            "billed_cost": totals.get("billed", {}), "effective_cost": totals.get("effective", {}),
            "list_cost": totals.get("list", {}), "gpu_cost": gpu.get("gpu", {}), "spot_cost": gpu.get("spot", {}),
            "gpu_spot_cost": gpu.get("gpu_spot", {}), "by_category": by_category, "by_provider": by_provider,
            "transfer_gb_out": transfer, "lines_by_category": lines,
            "gpu_hours": str(gpu_hours.quantize(Decimal("0.1"))) if gpu_hours is not None else None,
        }

    def spend_by(self, window: Window, key_sql: str) -> dict[str, dict[str, Decimal]]:
        return self._per_currency(
            f"SELECT COALESCE({key_sql}, '(unattributed)'), BillingCurrency, sum(BilledCost) FROM costs "
            f"WHERE {window.where()} GROUP BY ALL ORDER BY 1")

    # ---- entities ------------------------------------------------------------------------------------
    def _costs_by_resource(self, window: Window) -> dict[str, dict[str, Decimal]]:
        return self._per_currency(
            f"SELECT lower(ResourceId), BillingCurrency, sum(BilledCost) FROM costs WHERE {window.where()} "
            "AND ResourceId IS NOT NULL GROUP BY ALL")

    @staticmethod
    def _cost_for(costs: dict[str, dict[str, Decimal]], rid: str) -> dict[str, Decimal]:
        """Billing names a resource by its id or by an ARN or path that ends with it."""
        rid = rid.lower()
        if rid in costs:
            return costs[rid]
        merged: dict[str, Decimal] = {}
        for key, per in costs.items():
            if key.endswith("/" + rid) or key.endswith(":" + rid):
                for cur, amount in per.items():
                    merged[cur] = merged.get(cur, Decimal(0)) + amount
        return merged

    def gpu_assets(self, window: Window) -> list[GpuAsset]:
        ws, we = lit(window.start.isoformat(" ")), lit(window.end.isoformat(" "))
        rows = self.con.execute(f"""
            WITH u AS (
                SELECT asset_id,
                    greatest(epoch(least(window_end, TIMESTAMP {we})) - epoch(greatest(window_start,
                             TIMESTAMP {ws})), 0) / 3600.0 AS hours, *
                FROM gpu_usage
                WHERE window_start < TIMESTAMP {we} AND window_end > TIMESTAMP {ws})
            SELECT a.*, sum(u.hours), sum(u.samples), sum(u.mean_util_pct * u.hours) / nullif(sum(u.hours), 0),
                   max(u.p95_util_pct), max(u.peak_mem_gb), string_agg(DISTINCT u.source, ',')
            FROM assets a LEFT JOIN u ON u.asset_id = a.id
            GROUP BY ALL ORDER BY a.id""").fetchall()
        costs = self._costs_by_resource(window)
        hours = self._per_currency(  # keyed 'h', so that _cost_for matches ids the same way
            f"SELECT lower(ResourceId), 'h', sum(ConsumedQuantity) FROM costs WHERE {window.where()} "
            f"AND ResourceId IS NOT NULL AND ChargeCategory = 'Usage' AND {HOURS} "
            "AND x_CostCategory IN ('gpu_compute', 'other_compute') GROUP BY ALL")
        out = []
        for r in rows:
            a = GpuAsset(id=r[0], provider=r[1], account=r[2], region=r[3], zone=r[4], name=r[5], kind=r[6],
                         instance_type=r[7], gpu_model=r[8], gpu_count=r[9], gpu_memory_gb=r[10],
                         lifecycle=r[11], state=r[12], launch_time=r[13], tags=dict(r[14] or {}),
                         usage_hours=r[15], usage_samples=r[16], mean_util_pct=r[17], p95_util_pct=r[18],
                         peak_mem_gb=r[19], usage_source=r[20])
            self._complete_gpu(a)
            if not a.gpu_count:
                continue
            a.cost = self._cost_for(costs, a.id)
            a.billed_hours = self._cost_for(hours, a.id).get("h")
            out.append(a)
        return out

    def _complete_gpu(self, item: GpuAsset | Job) -> None:
        """Fill GPU model, count and memory from the catalog where the inventory left them out."""
        t = self.catalog.instance(item.provider, item.instance_type)
        if item.gpu_model is None:
            item.gpu_model = t.gpu_model if t else self.catalog.gpu_model_for(item.provider, item.instance_type)
        if item.gpu_count is None and t:
            item.gpu_count = t.gpu_count
        if isinstance(item, GpuAsset) and item.gpu_memory_gb is None:
            g = self.catalog.gpu(item.gpu_model)
            item.gpu_memory_gb = g.memory_gb if g else None

    def jobs(self, window: Window) -> list[Job]:
        ws, we = lit(window.start.isoformat(" ")), lit(window.end.isoformat(" "))
        costs = self._costs_by_resource(window)  # before the next query: DuckDB has one result at a time
        cur = self.con.execute(f"""
            SELECT * FROM jobs
            WHERE (start_time IS NULL OR start_time < TIMESTAMP {we})
              AND (end_time IS NULL OR end_time >= TIMESTAMP {ws})
            ORDER BY id""")
        names = [d[0] for d in cur.description]
        out = []
        for r in cur.fetchall():
            d = dict(zip(names, r, strict=True))
            d["tags"] = dict(d["tags"] or {})
            job = Job(**d)
            self._complete_gpu(job)
            job.cost = self._cost_for(costs, job.id)
            out.append(job)
        return out

    def resource_spend(self, window: Window) -> list[ResourceSpend]:
        rows = self.con.execute(f"""
            SELECT COALESCE(ResourceId, x_Provider || ':' || COALESCE(SubAccountId, BillingAccountId, '-') || ':'
                            || COALESCE(ServiceName, '-') || ':' || COALESCE(RegionId, 'global')) AS id,
                   ResourceId IS NOT NULL, x_Provider, COALESCE(SubAccountId, BillingAccountId), Tags,
                   BillingCurrency, any_value(RegionId), any_value(ServiceName),
                   arg_max(x_CostCategory, BilledCost), any_value(x_InstanceType), sum(BilledCost), count(*),
                   max(ChargePeriodStart)
            FROM costs WHERE {window.where()} AND ChargeCategory = 'Usage'
            GROUP BY ALL ORDER BY 1""").fetchall()
        by_id: dict[str, ResourceSpend] = {}
        latest: dict[str, datetime] = {}
        for (rid, has_rid, provider, account, tags, currency, region, service, category, itype, cost, n,
             last) in rows:
            tags = dict(tags or {})
            spend = by_id.get(rid)
            if spend is None:
                spend = by_id[rid] = ResourceSpend(rid, provider, account, region, service, category, itype,
                                                   has_resource_id=has_rid)
            spend.cost[currency] = spend.cost.get(currency, Decimal(0)) + cost
            spend.lines += n
            spend.tag_sets.append((tags, currency, cost))
            if rid not in latest or last > latest[rid]:
                latest[rid] = last
                spend.tags = tags
        return list(by_id.values())

    def transfer_flows(self, window: Window) -> list[TransferFlow]:
        rows = self.con.execute(f"""
            SELECT x_Provider, x_TransferKind, x_TransferFrom, x_TransferTo, COALESCE(SubAccountId, BillingAccountId),
                   BillingCurrency, sum({GB}), sum(BilledCost), count(*),
                   (list(ResourceId ORDER BY BilledCost DESC) FILTER (WHERE ResourceId IS NOT NULL))[1:5],
                   arg_max(Tags, BilledCost)
            FROM costs WHERE {window.where()} AND x_TransferKind IS NOT NULL AND x_TransferDirection = 'out'
            GROUP BY x_Provider, x_TransferKind, x_TransferFrom, x_TransferTo, 5, BillingCurrency
            ORDER BY 1, 2, 3, 4""").fetchall()
        out: dict[tuple, TransferFlow] = {}
        for provider, kind, src, dst, account, currency, gb, cost, n, top, tags in rows:
            key = (provider, kind, src, dst, account)
            flow = out.get(key)
            if flow is None:
                fid = f"{provider}:{account or '-'}:{kind}:{src or '?'}->{dst or '?'}"
                flow = out[key] = TransferFlow(fid, provider, kind, src, dst, account,
                                               top_resources=list(dict.fromkeys(top or [])),
                                               tags=dict(tags or {}))
            flow.gb += gb or Decimal(0)
            flow.cost[currency] = flow.cost.get(currency, Decimal(0)) + cost
            flow.lines += n
        return list(out.values())


# What makes two billing lines the same line, for finding a month exported twice.
LINE_KEY = ("x_Provider, BillingAccountId, SubAccountId, ChargePeriodStart, ChargePeriodEnd, ResourceId, "
            "x_UsageType, SkuId, ChargeDescription, BilledCost, ConsumedQuantity, ChargeCategory")

HOURS = "ConsumedUnit IN ('Hrs', 'Hours', 'Hour', 'h', 'hour', 'hours')"

# Transfer volume in GB, whatever unit the export counts it in.
GB = """CAST(CASE WHEN ConsumedUnit IN ('Bytes', 'bytes', 'byte') THEN ConsumedQuantity / 1000000000
              WHEN ConsumedUnit IN ('TB', 'TiB', 'tebibyte') THEN ConsumedQuantity * 1000
              WHEN ConsumedUnit = 'bytes' THEN ConsumedQuantity / 1000000000
              WHEN ConsumedUnit IN ('MB', 'MiB', 'mebibyte') THEN ConsumedQuantity / 1000
              WHEN ConsumedUnit IN ('gibibyte', 'GiB') THEN ConsumedQuantity * 1.073741824
              ELSE ConsumedQuantity END AS DECIMAL(38, 9))"""

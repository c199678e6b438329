"""The `azure:<sub>:cost` source: daily actual cost from the Cost Management Query API grouped by resource and
meter (the API allows two groupings), every `nextLink` page followed.

The answer's columns are read by name: the cost under any name the API gives it (the aggregation's alias or name,
PreTaxCost, CostUSD, ...), the date as a number (20260701) or text; an answer without a cost or currency column,
or a row without a cost, fails the source naming what it got, so no line is written with its money missing.
`204 No Content` is asked again after its `Retry-After` (at most a minute, three asks), then taken as no cost,
said in the source's line. The raw pages are kept under `raw/azure/` as the API sent them, and DuckDB turns them
into a cost-details CSV under `billing/` (no Python loop over the rows); the VM and scale set inventory fills in
each machine's tags and location, which the grouped query does not carry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

from azure.core.rest import HttpRequest

from auditor.providers.live.azure_rest import ARM, answer, throttled
from auditor.providers.live.pull import Pull, UnreadableAnswer, http_link
from auditor.sql import lit

# The query's aggregations: the answer names its columns after them (the alias or the name, by API version).
AGGREGATION = {"totalCost": "Cost", "totalQuantity": "UsageQuantity"}
# Each part of a cost line, and the names the Query API gives its column, in order of preference: the
# billing-currency cost before the USD one (whose currency is then USD).
COST_NAMES = ("totalCost", "Cost", "PreTaxCost", "CostInBillingCurrency", "CostUSD", "PreTaxCostUSD", "CostInUSD")
QUERY_COLUMNS = {
    "date": ("UsageDate", "BillingMonth", "UsageStart", "Date"),
    "currency": ("Currency", "BillingCurrency", "BillingCurrencyCode"),
    "resource": ("ResourceId",),
    "group": ("ResourceGroup", "ResourceGroupName"),
    "meter": ("Meter", "MeterName"),
    "category": ("MeterCategory", "ServiceName"),
    "quantity": ("totalQuantity", "UsageQuantity", "Quantity"),
}
EMPTY_TRIES = 3  # asks of a query that answers 204 No Content with a Retry-After, before its answer is taken as empty
MAX_RETRY_AFTER = 60.0  # seconds: the longest Retry-After waited


def daily_cost(p: Pull, credential, sub: str, kw: dict, call: dict) -> dict[str, int]:
    from azure.mgmt.costmanagement import CostManagementClient
    from azure.mgmt.costmanagement.models import (
        QueryAggregation,
        QueryDataset,
        QueryDefinition,
        QueryGrouping,
        QueryTimePeriod,
    )

    w = p.options.window
    client = CostManagementClient(credential, **kw)
    base = kw.get("base_url") or ARM
    scope = f"/subscriptions/{sub}"
    query = QueryDefinition(
        type="ActualCost", timeframe="Custom",
        time_period=QueryTimePeriod(from_property=w.start, to=w.end - timedelta(seconds=1)),  # `to` is inclusive
        dataset=QueryDataset(granularity="Daily", aggregation={
            alias: QueryAggregation(name=name, function="Sum") for alias, name in AGGREGATION.items()},
            grouping=[QueryGrouping(type="Dimension", name="ResourceId"),
                      QueryGrouping(type="Dimension", name="Meter")]))
    pages: list[dict] = []
    page = _query_page(p, lambda: client.query.usage(scope, query, cls=_http_response, **call))
    while page:
        pages.append(page)
        link = (page.get("properties") or {}).get("nextLink")
        if not link:
            break
        request = HttpRequest("POST", http_link(link, "nextLink", base), json=query.as_dict())
        # nextLink: the SDK has no pager for the query API
        page = _query_page(p, partial(client._client.send_request, request, **call))
    rows = sum(len((page.get("properties") or {}).get("rows") or []) for page in pages)
    if not rows:
        p.note(f"no cost in {w.label}: the query answered without rows")
        return {"pages": len(pages), "rows": 0}
    raw_dir = p.root / "raw" / "azure" / sub
    raw_dir.mkdir(parents=True, exist_ok=True)
    for i, page in enumerate(pages, 1):
        (raw_dir / f"query-{i:04d}.json").write_text(page["text"], encoding="utf-8")  # as the API sent it
    where = query_columns(pages)
    p.note("columns read by name: " + ", ".join(f"{k} {v[0]}" for k, v in where.items() if v))
    _to_csv(p, raw_dir, where, f"azure/{sub}/cost-{w.start:%Y%m%d}-{w.end:%Y%m%d}.csv", sub)
    return {"pages": len(pages), "rows": rows}


def _http_response(response: Any, deserialized: Any, headers: Any) -> Any:
    """The SDK's `cls` hook: the raw HTTP response, so the page is kept as the API sent it."""
    return response.http_response


def _query_page(p: Pull, send: Callable[[], Any]) -> dict | None:
    """One page of the Query API, throttling retried. `204 No Content` is an answer the API documents: asked again
    after the `Retry-After` it gives (at most a minute, `EMPTY_TRIES` asks), then taken as no rows (None)."""
    def checked():  # raised inside the retried call, so a throttled nextLink page is retried too
        response = send()
        response.raise_for_status()
        return response

    for tries in range(1, EMPTY_TRIES + 1):
        response = p.retry.call(checked, throttled=throttled)
        if response.status_code != 204:
            page = answer(response)
            page["text"] = response.text()
            return page
        wait = retry_after(response.headers)
        if wait is None or tries == EMPTY_TRIES:
            p.note(f"the Query API answered 204 No Content ({tries} ask{'s' if tries > 1 else ''}): no rows")
            return None
        p.retry.retried += 1
        p.retry.sleep(wait)
    return None


def retry_after(headers) -> float | None:
    """Seconds to wait from a `Retry-After` (seconds or an HTTP date) or `x-ms-retry-after-ms`, at most a minute."""
    from email.utils import parsedate_to_datetime

    value = headers.get("Retry-After")
    try:
        if headers.get("x-ms-retry-after-ms"):
            seconds = float(headers["x-ms-retry-after-ms"]) / 1000
        elif value and value.strip().replace(".", "", 1).isdigit():
            seconds = float(value)
        elif value:
            seconds = (parsedate_to_datetime(value) - utc_now()).total_seconds()
        else:
            return None
    except (TypeError, ValueError):
        return None
    return min(MAX_RETRY_AFTER, max(0.0, seconds))


def utc_now():
    from datetime import UTC, datetime

    return datetime.now(UTC)


def query_columns(pages: list[dict]) -> dict[str, tuple[str, int] | None]:
    """Where each part of a cost line is in the Query API's positional rows, by the columns' names: {part: (name,
    index) or None}. Every page must have the first page's columns. Without a cost column, or without a currency
    where the cost is not in USD, the answer is refused, naming the columns it has and the ones it needs."""
    columns = [str(c.get("name")) for c in (pages[0].get("properties") or {}).get("columns") or []
               if isinstance(c, dict)]
    for i, page in enumerate(pages[1:], 2):
        got = [str(c.get("name")) for c in (page.get("properties") or {}).get("columns") or [] if isinstance(c, dict)]
        if got != columns:
            raise UnreadableAnswer(f"the Cost Management query's page {i} has columns {', '.join(got) or 'none'}, "
                                   f"page 1 {', '.join(columns) or 'none'}")
    lower = {c.lower(): i for i, c in reversed(list(enumerate(columns)))}

    def find(names: tuple[str, ...]) -> tuple[str, int] | None:
        return next(((columns[lower[n.lower()]], lower[n.lower()]) for n in names if n.lower() in lower), None)

    where = {"cost": find(COST_NAMES), **{part: find(names) for part, names in QUERY_COLUMNS.items()}}
    usd = where["cost"] is not None and where["cost"][0].lower().endswith("usd")
    missing = [what for what, ok in (("a cost (" + ", ".join(COST_NAMES) + ")", where["cost"]),
                                     ("a currency (" + ", ".join(QUERY_COLUMNS["currency"]) + ")",
                                      where["currency"] or usd)) if not ok]
    if missing:
        raise UnreadableAnswer(f"the Cost Management answer has columns {', '.join(columns) or 'none'}; it needs "
                               f"{' and '.join(missing)}: no cost was written")
    if usd:
        where["currency"] = None
    return where


def _to_csv(p: Pull, raw_dir, where: dict[str, tuple[str, int] | None], target: str, sub: str) -> None:
    """The query's positional rows as a cost-details CSV, in DuckDB, each part found by its column's name; VM tags
    and location from the inventory. Every row is checked first: a row without a cost that is a number, a date or
    a currency fails the source, so no line is written with money missing."""
    import duckdb

    def col(part: str, default: str = "NULL") -> str:
        found = where.get(part)
        return f"nullif(trim(json_extract_string(r, '$[{found[1]}]')), '')" if found else default

    w = p.options.window
    cost = f"TRY_CAST({col('cost')} AS DECIMAL(38, 18))"
    currency = col("currency", "'USD'")
    # UsageDate as a number (20260701) or text; BillingMonth and others as ISO text. Without a date column (a
    # query without granularity), the cost is the window's, dated its first day.
    date = (f"COALESCE(try_strptime({col('date')}, '%Y%m%d'), TRY_CAST({col('date')} AS TIMESTAMP))"
            if where["date"] else f"TIMESTAMP '{w.start:%Y-%m-%d}'")
    con = duckdb.connect()
    pages = lit(str(raw_dir / "*.json"))
    con.execute(f"""CREATE TEMP VIEW r AS SELECT unnest(properties."rows") AS r
                    FROM read_json({pages}, columns = {{'properties': 'STRUCT("rows" JSON[])'}})""")
    width = 1 + max(v[1] for v in where.values() if v)
    n, short, no_cost, no_date, no_currency, example = con.execute(f"""
        SELECT count(*), count(*) FILTER (json_array_length(r) < {width}),
               count(*) FILTER ({cost} IS NULL), count(*) FILTER (({date}) IS NULL),
               count(*) FILTER (({currency}) IS NULL),
               first(CAST(r AS VARCHAR)) FILTER ({cost} IS NULL OR ({date}) IS NULL OR ({currency}) IS NULL
                                                 OR json_array_length(r) < {width})
        FROM r""").fetchone() or (0, 0, 0, 0, 0, None)
    cost_column = (where["cost"] or ("",))[0]  # query_columns refuses an answer without one
    bad = [f"{k} {what}" for k, what in ((short, "shorter than the columns"),
                                         (no_cost, f"without a number in {cost_column}"),
                                         (no_date, f"without a date in {(where['date'] or ('',))[0]}"),
                                         (no_currency, "without a currency")) if k]
    if bad:
        raise UnreadableAnswer(f"of the {n} rows of the Cost Management answer, {', '.join(bad)} (the first: "
                               f"{str(example)[:120]}): no cost was written")
    if not where["date"]:
        p.note(f"no date column: each row is the window's cost, dated {w.start:%Y-%m-%d}")
    if not where["resource"]:
        p.note("no ResourceId column: cost by " + (where["group"][0] if where["group"] else "subscription"))
    con.execute("CREATE TABLE vms (id VARCHAR, location VARCHAR, tags VARCHAR)")
    vms = [(a["id"], a["region"], json.dumps(a["tags"])) for a in p.assets if a["account"] == sub]
    if vms:
        con.executemany("INSERT INTO vms VALUES (?, ?, ?)", vms)
    rid = f"lower({col('resource')})"
    # a VM, or a scale set (its instances are billed under its id): both are Virtual Machines meters, by the hour
    machine = (f"COALESCE(regexp_matches({rid}, '/microsoft\\.compute/(virtualmachines|virtualmachinescalesets)/'), "
               "false)")
    con.execute(f"""
        COPY (
            SELECT strftime({date}, '%Y-%m-%d') AS Date,
                   {lit(sub)} AS SubscriptionId,
                   {rid} AS ResourceId,
                   {col('group')} AS ResourceGroup,
                   COALESCE({col('category')}, CASE WHEN {machine} THEN 'Virtual Machines' ELSE 'Other' END)
                       AS MeterCategory,
                   {col('meter')} AS MeterName,
                   COALESCE(v.location, '') AS ResourceLocation,
                   {cost} AS CostInBillingCurrency,
                   {currency} AS BillingCurrency,
                   {col('quantity')} AS Quantity,
                   CASE WHEN {machine} THEN '1 Hour' END AS UnitOfMeasure,
                   CASE WHEN {col('meter')} LIKE '% Spot' THEN 'Spot' ELSE 'OnDemand' END AS PricingModel,
                   'Usage' AS ChargeType,
                   COALESCE(v.tags, '{{}}') AS Tags
            FROM r LEFT JOIN vms v ON v.id = {rid}
            ORDER BY 1, 3, 6, 4
        ) TO {lit(str(p.billing_path(target)))} (HEADER, DELIMITER ',')""")
    con.close()

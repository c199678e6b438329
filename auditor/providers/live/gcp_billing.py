"""The `gcp:billing` source: the Cloud Billing export from BigQuery (`--billing-uri project.dataset.table`), only
the columns the audit reads and only the window's rows, written as newline-delimited JSON as BigQuery makes each
line. Every line is checked first: one without a numeric cost, a currency or a usage start time fails the source,
and nothing is kept."""

from __future__ import annotations

import json
import math
import re

from google.auth.credentials import Credentials

from auditor.providers.live.gcp_api import PAGE, client_options, throttled
from auditor.providers.live.pull import Pull, UnreadableAnswer

BILLING_COLUMNS = ("billing_account_id", "service", "sku", "usage_start_time", "usage_end_time", "project",
                   "labels", "system_labels", "location", "cost", "currency", "usage", "credits", "cost_type")


def export(p: Pull, credentials: Credentials, endpoint: str | None, projects: list[str]) -> dict[str, int]:
    from google.cloud import bigquery

    table = p.options.billing or ""
    if not re.fullmatch(r"[\w.-]+\.\w+\.\w+", table):
        raise ValueError(f"--billing-uri {table!r}: name the export table as project.dataset.table")
    columns = BILLING_COLUMNS + (("resource",) if "resource_v1" in table else ())
    client = bigquery.Client(project=table.split(".")[0] if not projects else projects[0], credentials=credentials,
                             client_options=client_options(endpoint))
    w = p.options.window
    sql = (f"SELECT TO_JSON_STRING(STRUCT({', '.join(columns)})) AS line FROM `{table}` "
           "WHERE usage_start_time >= @start AND usage_start_time < @end")
    config = bigquery.QueryJobConfig(query_parameters=[
        bigquery.ScalarQueryParameter("start", "TIMESTAMP", w.start.isoformat() + "Z"),
        bigquery.ScalarQueryParameter("end", "TIMESTAMP", w.end.isoformat() + "Z")])
    rows = p.retry.call(client.query_and_wait, sql, job_config=config, page_size=PAGE, throttled=throttled)
    target = p.billing_path(f"gcp/{table}/{w.start:%Y%m%d}-{w.end:%Y%m%d}.jsonl")
    written, blank, first = 0, 0, None
    with open(target, "w", encoding="utf-8") as f:
        for page in rows.pages:  # each row is already one JSON line, made by BigQuery: written as it comes
            lines = [row[0] for row in page]
            for line in lines:  # but checked first: a line without money is not written as if it were read
                if not billing_row_ok(line):
                    blank += 1
                    first = first or line
            f.write("".join(line + "\n" for line in lines))
            written += len(lines)
    if blank:
        target.unlink()
        raise UnreadableAnswer(f"{blank} of the {written} billing rows of {table} lack a cost that is a number, a "
                               f"currency or a usage start time (the first: {str(first)[:160]}); no cost was written")
    p.note("checked: every row has a numeric cost, a currency and a usage start time")
    if not written:
        target.unlink()
        raise LookupError(f"no billing rows in {table} for {w.label}")
    return {"rows": written, "files": 1}


def billing_row_ok(line: str) -> bool:
    """Whether a billing export row (one JSON object) has what every cost line needs."""
    try:
        row = json.loads(line)
    except ValueError:
        return False
    cost = row.get("cost") if isinstance(row, dict) else None
    return (isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost)
            and bool(row.get("currency")) and bool(row.get("usage_start_time")))

"""The audit's attributed costs as a FOCUS 1.3 dataset (`gpu-auditor export --focus`): one row per charge of the
`costs` table in the window (billing lines summed per file, UTC day and what the audit groups by), in the FOCUS
columns, then the same allocation again in `x_` columns (FOCUS: custom columns are prefixed `x_` and follow the
FOCUS columns).

The audit's allocation of a charge is FOCUS 1.3's data generator-calculated split cost allocation, with this
export as the data generator and `ALLOCATION_METHOD` as its method: each charge the audit allocates (to a team by
the policy's attribution, as every view of the audit attributes them; to a Kubernetes namespace from its tags; to
a job where its resource id is a job's) is one allocated charge that is the whole of its origin charge
(AllocatedRatio 1, so BilledCost and every other metric stay the export's own and the rows add up to the bill
exactly, per currency). AllocatedResourceId/Name is the most specific of job, namespace and team;
AllocatedTags the allocation as data generator-defined tags (`gpu-auditor/team`, `/project`, `/namespace`,
`/job`). A charge the audit allocates to nothing (no team, namespace or job; tax) has every Allocated* column
null, as FOCUS asks of a charge not related to a split.

Columns FOCUS makes mandatory that an export does not carry are derived where FOCUS defines them from others
(BillingPeriodStart/End: the calendar month of the charge; ServiceCategory from the audit's cost category where
the export gives none; InvoiceIssuerName, ServiceProviderName, HostProviderName and the deprecated ProviderName and
PublisherName: the provider, who issues the cloud bill and runs its machines), else left null where FOCUS allows
it. FOCUS 1.3 keeps the version in metadata, not in the rows: `focus-metadata.json` (`metadata`)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.sql import lit
from auditor.tables.breakdown import UNATTRIBUTED
from auditor.tables.sql import TAX, spend_team_sql, tag_sql
from auditor.tables.store import Store
from auditor.window import Window

if TYPE_CHECKING:
    from auditor.policy import Policy

FOCUS_VERSION = "1.3"  # the columns are 1.3's: its allocation and provider columns, and all of 1.0's
ALLOCATION_METHOD = "gpu-auditor-attribution"  # AllocatedMethodId: the method the README documents
TAG_PREFIX = "gpu-auditor/"  # the data generator-defined tag keys of AllocatedTags
NAMESPACE_TAGS = ["namespace", "kubernetes_namespace", "k8s-namespace", "kubernetes.io/namespace"]
SERVICE_CATEGORY = {"gpu_compute": "Compute", "other_compute": "Compute", "storage": "Storage",
                    "transfer": "Networking"}
PROVIDERS = {"aws": "AWS", "gcp": "Google Cloud", "azure": "Microsoft"}
TIME = "%Y-%m-%dT%H:%M:%SZ"


def _case(column: str, mapping: dict[str, str], default: str = "NULL") -> str:
    whens = " ".join(f"WHEN {lit(k)} THEN {lit(v)}" for k, v in mapping.items())
    return f"CASE {column} {whens} ELSE {default} END"


def columns(text_times: bool) -> dict[str, str]:
    """Each column of the dataset, in order, as SQL over the window's attributed `costs` rows."""
    def when(col: str) -> str:
        return f"strftime({col}, {lit(TIME)})" if text_times else col

    provider = f"COALESCE(ProviderName, {_case('x_Provider', PROVIDERS, 'x_Provider')})"
    month = "date_trunc('month', ChargePeriodStart)"
    tags = ", ".join(f"{{'k': {lit(TAG_PREFIX + k)}, 'v': {v}}}"
                     for k, v in (("team", "allocated_team"), ("project", "project"), ("namespace", "ns"),
                                  ("job", "job")))
    def allocated(sql: str) -> str:
        return f"CASE WHEN allocated THEN {sql} END"

    return {
        "AllocatedMethodDetails": allocated(lit('{"Elements":[{"AllocatedRatio":1}]}')),
        "AllocatedMethodId": allocated(lit(ALLOCATION_METHOD)),
        "AllocatedResourceId": allocated("COALESCE('job/' || job_key, 'namespace/' || ns, 'team/' || allocated_team)"),
        "AllocatedResourceName": allocated("COALESCE(job, ns, allocated_team)"),
        "AllocatedTags": allocated(f"CAST(to_json(map_from_entries(list_filter([{tags}], lambda e: e.v IS NOT NULL))) "
                                   "AS VARCHAR)"),
        "AvailabilityZone": "AvailabilityZone",
        "BilledCost": "BilledCost",
        "BillingAccountId": "COALESCE(BillingAccountId, SubAccountId, '(unknown)')",
        "BillingAccountName": "NULL::VARCHAR",
        "BillingCurrency": "BillingCurrency",
        "BillingPeriodEnd": when(f"{month} + INTERVAL 1 MONTH"),
        "BillingPeriodStart": when(month),
        "ChargeCategory": "ChargeCategory",
        "ChargeClass": "NULL::VARCHAR",
        "ChargeDescription": "ChargeDescription",
        "ChargePeriodEnd": when("ChargePeriodEnd"),
        "ChargePeriodStart": when("ChargePeriodStart"),
        "CommitmentDiscountCategory": "NULL::VARCHAR",
        "CommitmentDiscountId": "CommitmentDiscountId",
        "CommitmentDiscountName": "NULL::VARCHAR",
        "CommitmentDiscountStatus": "CommitmentDiscountStatus",
        "CommitmentDiscountType": "CommitmentDiscountType",
        "ConsumedQuantity": "ConsumedQuantity",
        "ConsumedUnit": "ConsumedUnit",
        "ContractedCost": "COALESCE(EffectiveCost, BilledCost)",
        "ContractedUnitPrice": "NULL::DECIMAL(38, 18)",
        "EffectiveCost": "COALESCE(EffectiveCost, BilledCost)",
        "HostProviderName": provider,
        "InvoiceIssuerName": provider,
        "ListCost": "COALESCE(ListCost, BilledCost)",
        "ListUnitPrice": "NULL::DECIMAL(38, 18)",
        "PricingCategory": "PricingCategory",
        "PricingQuantity": "ConsumedQuantity",
        "PricingUnit": "ConsumedUnit",
        "ProviderName": provider,
        "PublisherName": provider,
        "RegionId": "RegionId",
        "RegionName": "RegionId",
        "ResourceId": "ResourceId",
        "ResourceName": "NULL::VARCHAR",
        "ResourceType": "NULL::VARCHAR",
        "ServiceCategory": f"COALESCE(ServiceCategory, {_case('x_CostCategory', SERVICE_CATEGORY, lit('Other'))})",
        "ServiceName": "COALESCE(ServiceName, x_Provider)",
        "ServiceProviderName": provider,
        "SkuId": "SkuId",
        "SkuPriceId": "NULL::VARCHAR",
        "SubAccountId": "SubAccountId",
        "SubAccountName": "NULL::VARCHAR",
        "Tags": "CAST(to_json(Tags) AS VARCHAR)",
        "x_Team": "team",
        "x_Project": "project",
        "x_Namespace": "ns",
        "x_Job": "job",
        "x_CostCategory": "x_CostCategory",
        "x_InstanceType": "x_InstanceType",
        "x_GpuModel": "x_GpuModel",
    }


def _rows(window: Window, policy: Policy, text_times: bool) -> str:
    team, project = spend_team_sql(policy), tag_sql(policy.project_tags)
    cols = ", ".join(f"{sql} AS {name}" for name, sql in columns(text_times).items())
    return f"""
        WITH j AS (SELECT lower(id) AS jid, min(id) AS id, min(COALESCE(name, id)) AS job FROM jobs GROUP BY jid),
             t AS (SELECT *, COALESCE({team}, {lit(UNATTRIBUTED)}) AS team, {project} AS project,
                          {tag_sql(NAMESPACE_TAGS)} AS ns,
                          (SELECT min(jid) FROM j WHERE lower(ResourceId) = jid  -- one job at most: no row doubled
                              OR ends_with(lower(ResourceId), '/' || jid)
                              OR ends_with(lower(ResourceId), ':' || jid)) AS job_id
                   FROM costs WHERE {window.where()}),
             c AS (SELECT t.*, j.id AS job_key, j.job,
                          CASE WHEN team NOT IN ({lit(UNATTRIBUTED)}, {lit(TAX)}) THEN team END AS allocated_team,
                          allocated_team IS NOT NULL OR ns IS NOT NULL OR job_id IS NOT NULL AS allocated
                   FROM t LEFT JOIN j ON jid = job_id)
        SELECT {cols} FROM c
        ORDER BY c.ChargePeriodStart, c.BillingCurrency, c.x_Provider, c.BillingAccountId, c.ResourceId,
                 c.x_SourceFile, c.x_SourceRow"""


JSON_COLUMNS = ("AllocatedMethodDetails", "AllocatedTags", "Tags")
DATA_TYPES = {"VARCHAR": "STRING", "TIMESTAMP": "DATETIME", "TIMESTAMP WITH TIME ZONE": "DATETIME"}


def metadata(store: Store, window: Window, policy: Policy, created: datetime) -> bytes:
    """focus-metadata.json: FOCUS's schema metadata of the dataset, its FocusVersion (which FOCUS keeps out of the
    rows) and each column's name and FOCUS data type; the SchemaId is a digest of those, so a changed schema has
    a new id, as FOCUS asks."""
    described = store.con.execute(f"DESCRIBE ({_rows(window, policy, False)})").fetchall()
    defs = [{"ColumnName": name, "DataType": "JSON" if name in JSON_COLUMNS else
             "DECIMAL" if kind.startswith("DECIMAL") else DATA_TYPES.get(kind, kind)} for name, kind, *_ in described]
    digest = hashlib.sha256(json.dumps([FOCUS_VERSION, defs]).encode()).hexdigest()[:32]
    schema = {"SchemaId": digest, "FocusVersion": FOCUS_VERSION, "CreationDate": created.strftime(TIME),
              "ColumnDefinition": defs}
    return (json.dumps({"Schema": schema}, indent=2) + "\n").encode()


def export(store: Store, window: Window, policy: Policy, created: datetime) -> dict[str, bytes]:
    """{focus.csv: ..., focus.parquet: ..., focus-metadata.json: ...}: the same rows, written by DuckDB to a
    scratch folder and read back, and their metadata, so that the caller writes all three into place at once."""
    out = {"focus-metadata.json": metadata(store, window, policy, created)}
    with tempfile.TemporaryDirectory(prefix="gpu-auditor-focus-") as tmp:
        for name, fmt, text in (("focus.csv", "FORMAT CSV, HEADER", True), ("focus.parquet", "FORMAT PARQUET", False)):
            path = os.path.join(tmp, name)
            store.con.execute(f"COPY ({_rows(window, policy, text)}) TO {lit(path)} ({fmt})")
            out[name] = Path(path).read_bytes()
    return out


def totals(store: Store, window: Window) -> dict[str, Decimal]:
    """BilledCost of the window per currency: what the dataset adds up to."""
    return {cur: amount for cur, amount in store.con.execute(
        f"SELECT BillingCurrency, sum(BilledCost) FROM costs WHERE {window.where()} GROUP BY 1 ORDER BY 1").fetchall()}

"""The audit's attributed costs as a FOCUS dataset (`gpu-auditor export --focus`): one row per charge of the
`costs` table in the window (billing lines summed per file, UTC day and what the audit groups by), in the FOCUS
1.0 columns, then the audit's allocation of each charge in `x_` columns (FOCUS: custom columns are prefixed `x_`
and follow the FOCUS columns): the team and project by the policy's attribution (as every view of the audit
attributes them), the Kubernetes namespace from the charge's tags, the job the charge is (its resource id is a
job's), and the audit's cost category. BilledCost is the export's own amount, unrounded: the rows add up to the
bill exactly, per currency.

Columns FOCUS makes mandatory that an export does not carry are derived where FOCUS defines them from others
(BillingPeriodStart/End: the calendar month of the charge; ServiceCategory from the audit's cost category where
the export gives none; InvoiceIssuerName and PublisherName: the provider, who issues the cloud bill), else left
null where FOCUS allows it."""

from __future__ import annotations

import os
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.sql import lit
from auditor.tables.breakdown import UNATTRIBUTED
from auditor.tables.sql import spend_team_sql, tag_sql
from auditor.tables.store import Store
from auditor.window import Window

if TYPE_CHECKING:
    from auditor.policy import Policy

FOCUS_VERSION = "1.0"  # the version focus-validator (PyPI) checks it against; the columns are those of 1.0
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
    return {
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
        "SkuId": "SkuId",
        "SkuPriceId": "NULL::VARCHAR",
        "SubAccountId": "SubAccountId",
        "SubAccountName": "NULL::VARCHAR",
        "Tags": "CAST(to_json(Tags) AS VARCHAR)",
        "x_Team": "team",
        "x_Project": "project",
        "x_Namespace": tag_sql(NAMESPACE_TAGS),
        "x_Job": "job",
        "x_CostCategory": "x_CostCategory",
        "x_InstanceType": "x_InstanceType",
        "x_GpuModel": "x_GpuModel",
    }


def _rows(window: Window, policy: Policy, text_times: bool) -> str:
    team, project = spend_team_sql(policy), tag_sql(policy.project_tags)
    cols = ", ".join(f"{sql} AS {name}" for name, sql in columns(text_times).items())
    return f"""
        WITH j AS (SELECT lower(id) AS jid, COALESCE(name, id) AS job FROM jobs),
             c AS (SELECT *, COALESCE({team}, {lit(UNATTRIBUTED)}) AS team, {project} AS project,
                          (SELECT min(job) FROM j WHERE lower(ResourceId) = jid  -- one job at most: no row doubled
                              OR ends_with(lower(ResourceId), '/' || jid)
                              OR ends_with(lower(ResourceId), ':' || jid)) AS job
                   FROM costs WHERE {window.where()})
        SELECT {cols} FROM c
        ORDER BY c.ChargePeriodStart, c.BillingCurrency, c.x_Provider, c.BillingAccountId, c.ResourceId,
                 c.x_SourceFile, c.x_SourceRow"""


def export(store: Store, window: Window, policy: Policy) -> dict[str, bytes]:
    """{focus.csv: ..., focus.parquet: ...}: the same rows, written by DuckDB to a scratch folder and read back,
    so that the caller writes both into place at once."""
    out = {}
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

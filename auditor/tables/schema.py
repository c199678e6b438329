"""The tables of the store: `costs` (billing lines summed per file, UTC day and everything the audit groups by,
named as FOCUS names them, plus `x_` columns), `assets`, `gpu_usage` and `jobs`."""

from __future__ import annotations

from auditor.providers.billing.columns import MONEY
from auditor.providers.catalog import GPU_COUNT
from auditor.sql import q

COSTS = {
    "BilledCost": MONEY, "EffectiveCost": MONEY, "ListCost": MONEY, "BillingCurrency": "VARCHAR",
    "ChargePeriodStart": "TIMESTAMP", "ChargePeriodEnd": "TIMESTAMP", "ChargeCategory": "VARCHAR",
    "ChargeDescription": "VARCHAR", "ServiceName": "VARCHAR", "ServiceCategory": "VARCHAR",
    "ProviderName": "VARCHAR", "BillingAccountId": "VARCHAR", "SubAccountId": "VARCHAR",
    "ResourceId": "VARCHAR", "RegionId": "VARCHAR", "AvailabilityZone": "VARCHAR", "SkuId": "VARCHAR",
    "PricingCategory": "VARCHAR", "ConsumedQuantity": MONEY, "ConsumedUnit": "VARCHAR",
    "CommitmentDiscountId": "VARCHAR", "CommitmentDiscountStatus": "VARCHAR", "CommitmentDiscountType": "VARCHAR",
    "CommitmentDiscountQuantity": MONEY, "CommitmentDiscountUnit": "VARCHAR", "CapacityReservationId": "VARCHAR",
    "CapacityReservationStatus": "VARCHAR", "ContractApplied": "VARCHAR",
    "Tags": "MAP(VARCHAR, VARCHAR)", "x_Provider": "VARCHAR", "x_UsageType": "VARCHAR",
    "x_InstanceType": "VARCHAR", "x_GpuModel": "VARCHAR", "x_GpuCount": GPU_COUNT, "x_CostCategory": "VARCHAR",
    "x_TransferKind": "VARCHAR", "x_TransferDirection": "VARCHAR", "x_TransferFrom": "VARCHAR",
    "x_TransferTo": "VARCHAR", "x_SplitResourceId": "VARCHAR", "x_SplitParentId": "VARCHAR",
    "x_SplitMethod": "VARCHAR", "x_SplitCost": MONEY, "x_SplitUnusedCost": MONEY,
    "x_SourceFile": "VARCHAR", "x_SourceRow": "BIGINT", "x_SourceFormat": "VARCHAR",
    "x_Lines": "BIGINT", "x_CommitmentEnd": "TIMESTAMP",
}

# Written by the load beside the COSTS columns, never by a reader: each row's tag set as a number
# (normalize.TAG_KEY), from which Store.tag_set_ids numbers the sets and writes x_TagSet.
TAG_COLUMNS = {"x_TagKey": "UHUGEINT", "x_TagSet": "INTEGER"}

TABLES = f"""
CREATE TABLE costs ({', '.join(f'{q(k)} {v}' for k, v in {**COSTS, **TAG_COLUMNS}.items())});
CREATE TABLE assets (id VARCHAR PRIMARY KEY, provider VARCHAR, account VARCHAR, region VARCHAR, zone VARCHAR,
    name VARCHAR, kind VARCHAR, instance_type VARCHAR, gpu_model VARCHAR, gpu_count {GPU_COUNT},
    gpu_memory_gb DOUBLE, lifecycle VARCHAR, state VARCHAR, launch_time TIMESTAMP, tags MAP(VARCHAR, VARCHAR));
CREATE TABLE gpu_usage (asset_id VARCHAR, window_start TIMESTAMP, window_end TIMESTAMP, samples BIGINT,
    mean_util_pct DOUBLE, p95_util_pct DOUBLE, peak_mem_gb DOUBLE, source VARCHAR);
CREATE TABLE jobs (id VARCHAR PRIMARY KEY, platform VARCHAR, provider VARCHAR, account VARCHAR, region VARCHAR,
    name VARCHAR, state VARCHAR, instance_type VARCHAR, instance_count INTEGER, gpu_model VARCHAR,
    gpu_count INTEGER, spot BOOLEAN, checkpoint_uri VARCHAR, checkpoint_interval_min DOUBLE,
    max_runtime_s BIGINT, max_wait_s BIGINT, training_s BIGINT, billable_s BIGINT, interruptions INTEGER,
    start_time TIMESTAMP, end_time TIMESTAMP, tags MAP(VARCHAR, VARCHAR), source_file VARCHAR,
    source_line INTEGER, kind VARCHAR DEFAULT 'job', sweep_id VARCHAR, sweep_max_trials INTEGER,
    sweep_parallel_trials INTEGER, sweep_trial_timeout_s BIGINT, sweep_algorithm VARCHAR,
    sweep_early_stopping VARCHAR, sweep_objective VARCHAR, mean_util_pct DOUBLE);
CREATE TABLE gpu_units (asset_id VARCHAR, resource VARCHAR, sharing VARCHAR, profile VARCHAR, count INTEGER,
    slices INTEGER, slices_per_gpu INTEGER, memory_gb DOUBLE, replicas INTEGER DEFAULT 1);
CREATE TABLE gpu_allocations (id VARCHAR, asset_id VARCHAR, resource VARCHAR, units INTEGER, namespace VARCHAR,
    pod VARCHAR, workload VARCHAR, state VARCHAR, start_time TIMESTAMP, end_time TIMESTAMP,
    tags MAP(VARCHAR, VARCHAR), share DOUBLE);
CREATE TABLE slice_usage (asset_id VARCHAR, gpu VARCHAR, uuid VARCHAR, instance VARCHAR, profile VARCHAR,
    namespace VARCHAR, pod VARCHAR, window_start TIMESTAMP, window_end TIMESTAMP, samples BIGINT,
    mean_active_pct DOUBLE, p95_active_pct DOUBLE, peak_mem_gb DOUBLE, source VARCHAR);
"""

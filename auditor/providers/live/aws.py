"""Live AWS for `gpu-auditor pull` (boto3, the default credential chain or a named profile; every account
of an organisation through an assumed role name).

Sources, each recorded in the snapshot manifest on its own:
- `aws:cur`: the Cost and Usage Report (legacy CUR or CUR 2.0 Data Exports) files in S3 for the window,
  found through their manifests; the bucket and prefix from `cur.describe_report_definitions` and
  `bcm-data-exports` or named with `--billing s3://bucket/prefix`.
- `aws:<account>:ec2:<region>`: GPU instances (`describe_instances` joined with `describe_instance_types`
  GpuInfo), spot, on-demand or capacity block.
- `aws:<account>:cloudwatch:<region>`: GPU utilisation and memory from the CloudWatch agent's
  `nvidia_smi_utilization_gpu` and `nvidia_smi_memory_used` (namespace CWAgent) via `get_metric_data`.
- `aws:<account>:sagemaker:<region>`: training jobs: managed spot, checkpoint config, stopping condition,
  training and billable seconds, tags; and hyperparameter tuning jobs (`ListHyperParameterTuningJobs`,
  `DescribeHyperParameterTuningJob`) as sweeps: resource limits, strategy, early stopping, objective, with each
  trial (`ListTrainingJobsForHyperParameterTuningJob`) a training job whose `sweep_id` is the tuning job's ARN.
- `aws:pricing` (with `--prices`): on-demand Linux prices of the GPU instance types seen, from the Pricing
  API, kept in the inventory's `prices` as evidence.

The standard `AWS_ENDPOINT_URL` (and `AWS_ENDPOINT_URL_<SERVICE>`) variables point every client elsewhere,
which is how the tests reach a moto server with this code unchanged.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ProfileNotFound

from auditor.errors import InputError
from auditor.providers.live.pull import Pull, UnreadableAnswer, gpu_model, iso, pages, usage_summary, utc

# Our Retry backs off on throttling (bounded, injectable); botocore's own retries are turned off.
CONFIG = Config(retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=60,
                user_agent_extra="gpu-auditor")
THROTTLE_CODES = {"Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded",
                  "TooManyRequestsException", "RequestThrottled", "RequestThrottledException", "SlowDown",
                  "ProvisionedThroughputExceededException", "EC2ThrottledException", "PriorRequestNotComplete",
                  "BandwidthLimitExceeded"}
LIFECYCLE = {"spot": "spot", "capacity-block": "capacity_block", "interruptible-capacity-reservation": "spot"}
LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
METRICS = {"util": ("nvidia_smi_utilization_gpu", "Average"), "mem": ("nvidia_smi_memory_used", "Maximum")}
PERIOD = 3600
PAGE = 100
QUERIES_PER_CALL = 500  # GetMetricData's limit


def throttled(e: BaseException) -> bool:
    if isinstance(e, ClientError):
        code = e.response.get("Error", {}).get("Code", "")
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return code in THROTTLE_CODES or status == 429
    return False


class Account:
    """One AWS account's session, and what was learnt about it that later sources need."""

    def __init__(self, session: boto3.Session, account_id: str):
        self.session = session
        self.id = account_id
        self.hosts: dict[str, str] = {}  # private DNS name -> instance id, for agent metrics keyed by host

    def client(self, service: str, region: str | None = None):
        return self.session.client(service, region_name=region, config=CONFIG)


def pull(p: Pull, session_factory: Callable[..., Any] = boto3.Session) -> None:
    o = p.options
    try:
        base = session_factory(profile_name=o.profile) if o.profile else session_factory()
    except ProfileNotFound as e:
        raise InputError(f"--profile {o.profile!r}: {e}") from None
    _register_credentials(p, base)
    regions = o.regions or [base.region_name or "us-east-1"]
    for name, _kind, account in _accounts(p, base, session_factory):
        if isinstance(account, str):  # the account could not be reached: each of its sources is missing
            for region in regions:
                for source, k in (("ec2", "inventory"), ("cloudwatch", "metrics"), ("sagemaker", "jobs")):
                    p.fail(f"aws:{name}:{source}:{region}", k, account)
            continue
        for region in regions:
            ec2_ok = p.run(f"aws:{account.id}:ec2:{region}", "inventory", lambda a=account, r=region: _ec2(p, a, r))
            if ec2_ok:
                p.run(f"aws:{account.id}:cloudwatch:{region}", "metrics",
                      lambda a=account, r=region: _cloudwatch(p, a, r))
            else:
                p.fail(f"aws:{account.id}:cloudwatch:{region}", "metrics", "skipped: the EC2 inventory failed")
            p.run(f"aws:{account.id}:sagemaker:{region}", "jobs", lambda a=account, r=region: _sagemaker(p, a, r))
    billing_account = Account(base, "")
    p.run("aws:cur", "billing", lambda: _cur(p, billing_account, regions[0]))
    if o.prices:
        p.run("aws:pricing", "prices", lambda: _pricing(p, billing_account))


def _register_credentials(p: Pull, session: boto3.Session) -> None:
    try:
        creds = session.get_credentials()
    except BotoCoreError:
        return
    if creds is not None:
        frozen = creds.get_frozen_credentials()
        p.secret(frozen.secret_key, frozen.token)


def _accounts(p: Pull, base: boto3.Session, session_factory: Callable[..., Any]):
    """(name, kind, Account or the reason it failed) for the caller's account, or with --assume-role for
    every active account of the organisation (or the --account ones)."""
    o = p.options
    try:
        me = p.retry.call(base.client("sts", config=CONFIG).get_caller_identity, throttled=throttled)
    except (ClientError, BotoCoreError) as e:
        yield "caller", "account", p.redact(_why(e))
        return
    if not o.assume_role:
        yield me["Account"], "account", Account(base, me["Account"])
        return
    partition = me["Arn"].split(":")[1]
    ids = list(o.accounts)
    if not ids:
        org = base.client("organizations", config=CONFIG)
        try:
            ids = [a["Id"] for page in pages(org.list_accounts, p.retry, throttled)
                   for a in page["Accounts"] if a.get("Status", "ACTIVE") == "ACTIVE"]
        except (ClientError, BotoCoreError) as e:
            yield "organization", "account", f"cannot list the organisation's accounts: {p.redact(_why(e))}"
            return
    sts = base.client("sts", config=CONFIG)
    for account_id in ids:
        try:
            c = p.retry.call(sts.assume_role, throttled=throttled,
                             RoleArn=f"arn:{partition}:iam::{account_id}:role/{o.assume_role}",
                             RoleSessionName="gpu-auditor-pull")["Credentials"]
        except (ClientError, BotoCoreError) as e:
            yield account_id, "account", f"cannot assume role {o.assume_role}: {p.redact(_why(e))}"
            continue
        p.secret(c["SecretAccessKey"], c["SessionToken"])
        session = session_factory(aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"],
                                  aws_session_token=c["SessionToken"], region_name=base.region_name)
        yield account_id, "account", Account(session, account_id)


def _why(e: BaseException) -> str:
    from auditor.providers.live.pull import describe_error

    return describe_error(e)


# ---- EC2 ----------------------------------------------------------------------------------------------

def _ec2(p: Pull, account: Account, region: str) -> dict[str, int]:
    ec2 = account.client("ec2", region)
    instances = [i for page in pages(ec2.describe_instances, p.retry, throttled, MaxResults=PAGE,
                                     Filters=[{"Name": "instance-state-name", "Values": LIVE_STATES}])
                 for r in page["Reservations"] for i in r["Instances"]]
    readable = [i for i in instances if i.get("InstanceId") and i.get("InstanceType")]
    if len(readable) < len(instances):
        p.unread("instances without an InstanceId or InstanceType", len(instances) - len(readable))
    instances = readable
    types = sorted({i["InstanceType"] for i in instances})
    gpu_info: dict[str, dict] = {}
    for start in range(0, len(types), 100):
        for page in pages(ec2.describe_instance_types, p.retry, throttled, InstanceTypes=types[start:start + 100]):
            gpu_info.update({t["InstanceType"]: t["GpuInfo"] for t in page["InstanceTypes"] if t.get("GpuInfo")})
    found = 0
    for i in instances:
        info = gpu_info.get(i["InstanceType"])
        if not info or not info.get("Gpus"):
            continue
        found += 1
        first = info["Gpus"][0]
        memory_gb = first.get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024 or None
        tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
        if i.get("PrivateDnsName"):
            account.hosts[i["PrivateDnsName"].split(".")[0]] = i["InstanceId"]
            account.hosts[i["PrivateDnsName"]] = i["InstanceId"]
        p.assets.append({
            "id": i["InstanceId"], "provider": "aws", "account": account.id, "region": region,
            "zone": i.get("Placement", {}).get("AvailabilityZone"), "name": tags.get("Name"), "kind": "vm",
            "instance_type": i["InstanceType"], "gpu_model": gpu_model(first.get("Name"), memory_gb),
            "gpu_count": sum(g.get("Count", 0) for g in info["Gpus"]),
            "gpu_memory_gb": round(memory_gb, 3) if memory_gb else None,
            "lifecycle": LIFECYCLE.get(i.get("InstanceLifecycle", ""), "on_demand"),
            "state": i.get("State", {}).get("Name"), "launch_time": iso(utc(i.get("LaunchTime"))), "tags": tags,
        })
    return {"instances": len(instances), "gpu_instances": found}


# ---- CloudWatch agent GPU metrics -------------------------------------------------------------------------

def _cloudwatch(p: Pull, account: Account, region: str) -> dict[str, int]:
    assets = {a["id"] for a in p.assets if a["account"] == account.id and a["region"] == region}
    if not assets:
        return {"metrics": 0, "gpu_usage": 0}
    cw = account.client("cloudwatch", region)
    queries: list[dict] = []
    owner: dict[str, tuple[str, str]] = {}  # query id -> (instance id, util|mem)
    for key, (metric, stat) in METRICS.items():
        for page in pages(cw.list_metrics, p.retry, throttled, Namespace="CWAgent", MetricName=metric):
            for m in page["Metrics"]:
                dims = {d["Name"]: d["Value"] for d in m.get("Dimensions", [])}
                iid = dims.get("InstanceId") or account.hosts.get(dims.get("host", ""))
                if iid not in assets:
                    continue
                qid = f"q{len(queries)}"
                owner[qid] = (iid, key)
                queries.append({"Id": qid, "ReturnData": True,
                                "MetricStat": {"Metric": m, "Period": PERIOD, "Stat": stat}})
    series: dict[str, list[tuple[datetime, float]]] = {}
    w = p.options.window
    for start in range(0, len(queries), QUERIES_PER_CALL):
        for page in pages(cw.get_metric_data, p.retry, throttled, MetricDataQueries=queries[start:start + 500],
                          StartTime=w.start, EndTime=w.end, ScanBy="TimestampAscending"):
            for r in page["MetricDataResults"]:
                if r.get("StatusCode") not in (None, "Complete", "PartialData"):  # PartialData: the next page
                    p.unread(f"metric series answered {r['StatusCode']}")
                    continue
                points = list(zip(r.get("Timestamps") or [], r.get("Values") or [], strict=False))
                finite = [(t, v) for t, v in points if isinstance(v, int | float) and math.isfinite(v)]
                if len(finite) < len(points) or len(r.get("Timestamps") or []) != len(r.get("Values") or []):
                    p.unread("metric points without a time and a finite value",
                             max(len(r.get("Timestamps") or []), len(r.get("Values") or [])) - len(finite))
                series.setdefault(r["Id"], []).extend(finite)
    added = 0
    for iid in sorted(assets):
        util = [series.get(q, []) for q, (i, k) in owner.items() if i == iid and k == "util"]
        mem = [series.get(q, []) for q, (i, k) in owner.items() if i == iid and k == "mem"]
        usage = usage_summary(iid, util, mem, PERIOD, "cloudwatch-agent")  # nvidia-smi reports memory in MiB
        if usage:
            p.gpu_usage.append(usage)
            added += 1
    return {"metrics": len(queries), "gpu_usage": added}


# ---- SageMaker ----------------------------------------------------------------------------------------------

def _sagemaker(p: Pull, account: Account, region: str) -> dict[str, int]:
    sm = account.client("sagemaker", region)
    w = p.options.window
    summaries = [s for page in pages(sm.list_training_jobs, p.retry, throttled, MaxResults=PAGE,
                                     CreationTimeBefore=w.end, LastModifiedTimeAfter=w.start)
                 for s in page["TrainingJobSummaries"]]
    read = 0
    for s in summaries:
        d = p.retry.call(sm.describe_training_job, throttled=throttled, TrainingJobName=s["TrainingJobName"])
        if not d.get("TrainingJobArn"):
            p.unread("training jobs described without a TrainingJobArn")
            continue
        if not (d.get("ResourceConfig") or {}).get("InstanceType") and not (d.get("ResourceConfig") or {}).get(
                "InstanceGroups"):
            p.unread("training jobs without an instance type (read without one)")
        read += 1
        tags = {t["Key"]: t["Value"] for page in pages(sm.list_tags, p.retry, throttled,
                                                       ResourceArn=d["TrainingJobArn"]) for t in page["Tags"]}
        p.jobs.append(training_job(d, tags, account.id, region))
    tuning = _tuning_jobs(p, sm, account, region)
    return {"training_jobs": read, "tuning_jobs": tuning}


def _tuning_jobs(p: Pull, sm, account: Account, region: str) -> int:
    """Tuning jobs in the window as sweeps, and their trials linked to them: a trial read already as a training
    job gets the sweep's id; one that was not (it began before the window) is described and added."""
    w = p.options.window
    summaries = [s for page in pages(sm.list_hyper_parameter_tuning_jobs, p.retry, throttled, MaxResults=PAGE,
                                     CreationTimeBefore=w.end, LastModifiedTimeAfter=w.start)
                 for s in page["HyperParameterTuningJobSummaries"]]
    by_arn = {j["id"]: j for j in p.jobs if j["platform"] == "sagemaker"}
    read = 0
    for s in summaries:
        d = p.retry.call(sm.describe_hyper_parameter_tuning_job, throttled=throttled,
                         HyperParameterTuningJobName=s["HyperParameterTuningJobName"])
        if not d.get("HyperParameterTuningJobArn"):
            p.unread("tuning jobs described without a HyperParameterTuningJobArn")
            continue
        read += 1
        tags = {t["Key"]: t["Value"] for page in pages(sm.list_tags, p.retry, throttled,
                                                       ResourceArn=d["HyperParameterTuningJobArn"])
                for t in page["Tags"]}
        sweep = tuning_job(d, tags, account.id, region)
        p.jobs.append(sweep)
        for page in pages(sm.list_training_jobs_for_hyper_parameter_tuning_job, p.retry, throttled,
                          HyperParameterTuningJobName=d["HyperParameterTuningJobName"], MaxResults=PAGE):
            for t in page["TrainingJobSummaries"]:
                trial = by_arn.get(t.get("TrainingJobArn"))
                if trial is None and t.get("TrainingJobName"):
                    td = p.retry.call(sm.describe_training_job, throttled=throttled,
                                      TrainingJobName=t["TrainingJobName"])
                    trial = by_arn[td["TrainingJobArn"]] = training_job(td, tags, account.id, region)
                    p.jobs.append(trial)
                if trial is None:
                    p.unread("tuning job trials without a TrainingJobName")
                    continue
                trial["sweep_id"] = sweep["id"]
                if t.get("TrainingJobStatus"):  # as the tuning job reports it: Stopped when early stopping ended it
                    trial["state"] = t["TrainingJobStatus"].lower()
                trial["tags"] = {**tags, **trial["tags"]}  # a trial carries its sweep's tags
    return read


STRATEGIES = {"bayesian": "bayesian", "random": "random", "hyperband": "hyperband", "grid": "grid"}


def tuning_job(d: dict[str, Any], tags: dict[str, str], account: str, region: str) -> dict[str, Any]:
    """A `describe_hyper_parameter_tuning_job` answer as a snapshot sweep: `instance_type` and `instance_count`
    are one trial's, `max_runtime_s` the whole search's, `sweep_trial_timeout_s` each trial's. Hyperband stops
    trials early by itself; otherwise early stopping is `TrainingJobEarlyStoppingType: Auto`."""
    config = d.get("HyperParameterTuningJobConfig") or {}
    definition = d.get("TrainingJobDefinition") or next(iter(d.get("TrainingJobDefinitions") or []), {})
    rc = definition.get("ResourceConfig") or {}
    limits = config.get("ResourceLimits") or {}
    strategy = str(config.get("Strategy") or "").lower()
    early = "hyperband" if strategy == "hyperband" else \
        ("auto" if str(config.get("TrainingJobEarlyStoppingType") or "Off").lower() == "auto" else None)
    objective = config.get("HyperParameterTuningJobObjective") or {}
    return {
        "id": d["HyperParameterTuningJobArn"], "platform": "sagemaker", "provider": "aws", "account": account,
        "region": region, "name": d.get("HyperParameterTuningJobName"), "kind": "sweep",
        "state": (d.get("HyperParameterTuningJobStatus") or "").lower() or None,
        "instance_type": rc.get("InstanceType"), "instance_count": rc.get("InstanceCount") or 1,
        "spot": bool(definition.get("EnableManagedSpotTraining")),
        "checkpoint_uri": (definition.get("CheckpointConfig") or {}).get("S3Uri"),
        "max_runtime_s": limits.get("MaxRuntimeInSeconds"),
        "sweep_max_trials": limits.get("MaxNumberOfTrainingJobs"),
        "sweep_parallel_trials": limits.get("MaxParallelTrainingJobs"),
        "sweep_trial_timeout_s": (definition.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds"),
        "sweep_algorithm": STRATEGIES.get(strategy, strategy or None), "sweep_early_stopping": early,
        "sweep_objective": (f"{str(objective['Type']).lower()} {objective['MetricName']}"
                            if objective.get("Type") and objective.get("MetricName") else None),
        "start_time": iso(utc(d.get("CreationTime"))), "end_time": iso(utc(d.get("HyperParameterTuningEndTime"))),
        "tags": tags,
    }


def training_job(d: dict[str, Any], tags: dict[str, str], account: str, region: str) -> dict[str, Any]:
    """A `describe_training_job` answer as a snapshot job."""
    rc = d.get("ResourceConfig", {})
    groups = rc.get("InstanceGroups") or []
    itype = rc.get("InstanceType") or (groups[0]["InstanceType"] if groups else None)
    count = rc.get("InstanceCount") or sum(g.get("InstanceCount", 0) for g in groups) or 1
    stop = d.get("StoppingCondition", {})
    transitions = d.get("SecondaryStatusTransitions", [])
    return {
        "id": d["TrainingJobArn"], "platform": "sagemaker", "provider": "aws", "account": account, "region": region,
        "name": d["TrainingJobName"], "state": (d.get("TrainingJobStatus") or "").lower() or None,
        "instance_type": itype, "instance_count": count, "spot": bool(d.get("EnableManagedSpotTraining")),
        "checkpoint_uri": (d.get("CheckpointConfig") or {}).get("S3Uri"),
        "max_runtime_s": stop.get("MaxRuntimeInSeconds"), "max_wait_s": stop.get("MaxWaitTimeInSeconds"),
        "training_s": d.get("TrainingTimeInSeconds"), "billable_s": d.get("BillableTimeInSeconds"),
        "interruptions": sum(1 for t in transitions if t.get("Status") == "Interrupted"),
        "start_time": iso(utc(d.get("TrainingStartTime") or d.get("CreationTime"))),
        "end_time": iso(utc(d.get("TrainingEndTime"))), "tags": tags,
        "sweep_id": d.get("TuningJobArn"),  # a trial of a tuning job
    }


# ---- Cost and Usage Report files ----------------------------------------------------------------------------

CUR1_MANIFEST = re.compile(r"(?:^|/)(\d{8})-(\d{8})/[^/]+-Manifest\.json$")
CUR2_MANIFEST = re.compile(r"(?:^|/)metadata/BILLING_PERIOD=(\d{4})-(\d{2})/[^/]*Manifest\.json$")


def _cur(p: Pull, account: Account, region: str) -> dict[str, int]:
    locations = [_parse_s3(p.options.billing)] if p.options.billing else _cur_locations(p, account)
    if not locations:
        raise LookupError("no CUR report definition or Data Export found in this account; name the files' "
                          "location with --billing s3://bucket/prefix")
    counts = {"manifests": 0, "files": 0, "bytes": 0}
    unreadable: list[str] = []
    for bucket, prefix, bucket_region in locations:
        s3 = account.client("s3", bucket_region or region)
        keys = [o["Key"] for page in pages(s3.list_objects_v2, p.retry, throttled, token_in="ContinuationToken",
                                           token_out="NextContinuationToken", Bucket=bucket, Prefix=prefix)
                for o in page.get("Contents", [])]
        for key in sorted(k for k in keys if _in_window(k, p.options.window)):
            listed = cur_files(_get(p, s3, bucket, key))
            if listed is None:
                unreadable.append(f"s3://{bucket}/{key}")
                continue
            _download(p, s3, bucket, key, f"aws/{bucket}/{key}")
            counts["manifests"] += 1
            for item in listed:
                src_bucket, src_key = _parse_s3(item)[:2] if str(item).startswith("s3://") else (bucket, item)
                counts["bytes"] += _download(p, s3, src_bucket, src_key, f"aws/{src_bucket}/{src_key}")
                counts["files"] += 1
    if unreadable:  # a billing period whose files are not known: its cost is missing, so the source is not ok
        raise UnreadableAnswer(f"{len(unreadable)} CUR manifest(s) are not a JSON object listing the report's files "
                               f"(reportKeys or dataFiles), the first {unreadable[0]}; their billing periods are "
                               "missing")
    if not counts["manifests"]:
        where = ", ".join(f"s3://{b}/{pre}" for b, pre, _ in locations)
        raise LookupError(f"no CUR manifest for {p.options.window.label} under {where}")
    return counts


def cur_files(text: bytes) -> list[str] | None:
    """The report files a CUR manifest lists (`reportKeys`, CUR 2.0's `dataFiles`), or None when the manifest is
    not a JSON object listing them as text."""
    try:
        manifest = json.loads(text)
    except ValueError:
        return None
    listed = next((manifest[k] for k in ("reportKeys", "dataFiles") if k in manifest), None) \
        if isinstance(manifest, dict) else None
    if not isinstance(listed, list) or not all(isinstance(x, str) and x for x in listed):
        return None
    return listed


def _in_window(key: str, window) -> bool:
    """A manifest of a billing period that overlaps the window (CUR 1 period folders, CUR 2.0 metadata)."""
    m = CUR1_MANIFEST.search(key)
    if m:  # the period folder's manifest; the copies inside assembly folders do not match
        start, end = datetime.strptime(m.group(1), "%Y%m%d"), datetime.strptime(m.group(2), "%Y%m%d")
        return start < window.end and end > window.start
    m = CUR2_MANIFEST.search(key)
    if m:
        start = datetime(int(m.group(1)), int(m.group(2)), 1)
        end = (start + timedelta(days=32)).replace(day=1)
        return start < window.end and end > window.start
    return False


def _cur_locations(p: Pull, account: Account) -> list[tuple[str, str, str | None]]:
    out = []
    cur = account.client("cur", "us-east-1")
    for page in pages(cur.describe_report_definitions, p.retry, throttled):
        for r in page.get("ReportDefinitions", []):
            prefix = "/".join(x for x in (r.get("S3Prefix", "").strip("/"), r["ReportName"]) if x) + "/"
            out.append((r["S3Bucket"], prefix, r.get("S3Region")))
    try:
        exports = account.client("bcm-data-exports", "us-east-1")
        for page in pages(exports.list_exports, p.retry, throttled):
            for e in page.get("Exports", []):
                export = p.retry.call(exports.get_export, throttled=throttled, ExportArn=e["ExportArn"])["Export"]
                dest = export["DestinationConfigurations"]["S3Destination"]
                prefix = "/".join(x for x in (dest.get("S3Prefix", "").strip("/"), export["Name"]) if x) + "/"
                out.append((dest["S3Bucket"], prefix, dest.get("S3Region")))
    except ClientError as e:
        if not out:
            raise
        p.progress(f"aws:cur: Data Exports not read ({_why(e)}); using the CUR report definitions")
    return out


def _parse_s3(uri: str) -> tuple[str, str, None]:
    m = re.fullmatch(r"s3://([^/]+)/?(.*)", uri or "")
    if not m:
        raise InputError(f"--billing {uri!r}: use s3://bucket/prefix")
    return m.group(1), m.group(2), None


def _get(p: Pull, s3, bucket: str, key: str) -> bytes:
    return p.retry.call(lambda: s3.get_object(Bucket=bucket, Key=key)["Body"].read(), throttled=throttled)


def _download(p: Pull, s3, bucket: str, key: str, relative: str) -> int:
    target = p.billing_path(relative)

    def fetch() -> int:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        with open(target, "wb") as f:
            shutil.copyfileobj(body, f, 1 << 20)
        return target.stat().st_size

    return p.retry.call(fetch, throttled=throttled)


# ---- Pricing -------------------------------------------------------------------------------------------------

def _pricing(p: Pull, account: Account) -> dict[str, int]:
    """On-demand Linux prices of the GPU instance types this pull saw, in each region seen."""
    wanted = sorted({(a["instance_type"], a["region"]) for a in p.assets if a["provider"] == "aws"} |
                    {(j["instance_type"].removeprefix("ml."), j["region"]) for j in p.jobs
                     if j["provider"] == "aws" and j.get("instance_type")})
    if not wanted:
        return {"prices": 0}
    pricing = account.client("pricing", "us-east-1")
    found = 0
    for itype, region in wanted:
        filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in (
            ("instanceType", itype), ("regionCode", region), ("operatingSystem", "Linux"), ("tenancy", "Shared"),
            ("preInstalledSw", "NA"), ("capacitystatus", "Used"))]
        for page in pages(pricing.get_products, p.retry, throttled, ServiceCode="AmazonEC2", Filters=filters,
                          FormatVersion="aws_v1"):
            for item in page.get("PriceList", []):
                price = on_demand_price(json.loads(item) if isinstance(item, str) else item)
                if price is None:
                    p.unread("price list products without an hourly USD price above zero")
                else:
                    p.prices.append({"provider": "aws", "instance_type": itype, "region": region,
                                     "price_per_hour": price, "currency": "USD", "source": "AWS Pricing API"})
                    found += 1
                    break
    return {"prices": found}


def on_demand_price(product: dict[str, Any]) -> str | None:
    """The hourly USD price of a Pricing API product: `terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD`."""
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            usd = dim.get("pricePerUnit", {}).get("USD")
            try:
                price = Decimal(str(usd))
            except ArithmeticError:  # not a number: not a price
                continue
            if dim.get("unit", "Hrs") in ("Hrs", "Hours") and price.is_finite() and price > 0:
                return usd
    return None

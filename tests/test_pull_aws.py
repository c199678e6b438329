"""`gpu-auditor pull --provider aws` over a real moto server on loopback (boto3 reaches it through the standard
AWS_ENDPOINT_URL variable, the adapter unchanged), and botocore's Stubber where moto lacks an API (Pricing, CUR
report definitions, SageMaker billable seconds). Then an audit of the snapshot finds what was planted."""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from click.testing import CliRunner
from servers.moto_server import ACCESS_KEY, SECRET_KEY, SESSION_TOKEN

from auditor.cli import cli
from auditor.providers.live import aws as aws_live
from auditor.providers.live import aws_pricing, aws_sagemaker
from auditor.providers.live.pull import Pull, PullOptions, Retry, pull_snapshot, sha256, source_line
from auditor.providers.live.snapshot import load_snapshot
from auditor.window import Window

REPO = Path(__file__).resolve().parents[1]
CUR_HEADER = (REPO / "fixtures" / "billing" / "cur-gpu-spot.csv").read_text().splitlines()[0].split(",")
TODAY = datetime.now(UTC).replace(tzinfo=None, hour=0, minute=0, second=0, microsecond=0)
# The window ends two days ahead, not one: TODAY is read when the module is imported, and the servers stamp what a
# test creates with the time it is created, which a suite that crosses midnight UTC puts past tomorrow's start.
SINCE, UNTIL = TODAY - timedelta(days=3), TODAY + timedelta(days=2)
WINDOW = Window(SINCE, UNTIL, "test")
STEP = 4
POLICY = """policy: test
version: "1"
owner: finops@example.com
currency: USD
teams:
  nlp: {lead: lead-nlp@example.com}
clauses:
  idle: {text: idle GPUs are stopped, max_mean_util_pct: 10, min_hours: 24}
  spot_checkpoint: {text: spot jobs checkpoint, max_interval_min: 60}
"""


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def pull_args(out: Path, *extra: str) -> list[str]:
    return ["pull", "--provider", "aws", "--region", "us-east-1", "--since", SINCE.date().isoformat(),
            "--until", UNTIL.date().isoformat(), "--billing-uri", "s3://cur-bucket/cur/", "--out", out, *extra]


# ---- what the fake account holds ------------------------------------------------------------------------


def launch(ec2, itype: str, name: str, spot: bool = False, team: str = "nlp") -> dict:
    extra = {"InstanceMarketOptions": {"MarketType": "spot"}} if spot else {}
    return ec2.run_instances(ImageId="ami-12c6146b", InstanceType=itype, MinCount=1, MaxCount=1, **extra,
                             TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                 {"Key": "Name", "Value": name}, {"Key": "team", "Value": team},
                                 {"Key": "owner", "Value": "ana@example.com"}]}])["Instances"][0]


def gpu_metrics(cw, instance: dict, util: list[float], mem_mib: float, gpus: int, by_host: bool = False) -> None:
    """CloudWatch agent points every STEP hours for each GPU of an instance over the window so far (moto scans
    every point on each call, so fewer is faster). With by_host, the agent ran without append_dimensions: the
    metrics name the host, not the instance."""
    hours = int((datetime.now(UTC).replace(tzinfo=None) - SINCE).total_seconds() // 3600)
    dims = [{"Name": "host", "Value": instance["PrivateDnsName"].split(".")[0]}] if by_host else \
        [{"Name": "InstanceId", "Value": instance["InstanceId"]}, {"Name": "host", "Value": "ip-x"}]
    data = []
    for gpu in range(gpus):
        d = dims + [{"Name": "index", "Value": str(gpu)}, {"Name": "name", "Value": "NVIDIA A100-SXM4-40GB"}]
        points = len(range(0, hours, STEP)) // len(util) * len(util)  # whole cycles: the mean is the same any hour
        for h in range(0, points * STEP, STEP):
            ts = SINCE + timedelta(hours=h, minutes=5)
            data.append({"MetricName": "nvidia_smi_utilization_gpu", "Dimensions": d, "Timestamp": ts,
                         "Value": util[h // STEP % len(util)], "Unit": "Percent"})
            data.append({"MetricName": "nvidia_smi_memory_used", "Dimensions": d, "Timestamp": ts,
                         "Value": mem_mib if h // STEP % 5 == 3 else mem_mib / 2, "Unit": "Megabytes"})
    for i in range(0, len(data), 1000):
        cw.put_metric_data(Namespace="CWAgent", MetricData=data[i:i + 1000])


def training(sm, name: str, spot: bool, checkpoint: bool) -> str:
    extra = {"CheckpointConfig": {"S3Uri": f"s3://ckpt/{name}/"}} if checkpoint else {}
    return sm.create_training_job(
        TrainingJobName=name, RoleArn="arn:aws:iam::123456789012:role/sm",
        AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://out/"}, EnableManagedSpotTraining=spot,
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50},
        StoppingCondition={"MaxRuntimeInSeconds": 86400, **({"MaxWaitTimeInSeconds": 172800} if spot else {})},
        Tags=[{"Key": "team", "Value": "nlp"}], **extra)["TrainingJobArn"]


def cur_line(i: int, day: datetime, instance: dict, usage: str, cost: float) -> dict:
    itype = instance["InstanceType"]
    return {"identity/LineItemId": f"li-{i}", "bill/PayerAccountId": "123456789012",
            "lineItem/UsageAccountId": "123456789012", "lineItem/LineItemType": "Usage",
            "lineItem/UsageStartDate": day.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lineItem/UsageEndDate": (day + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lineItem/ProductCode": "AmazonEC2", "lineItem/UsageType": f"{usage}:{itype}",
            "lineItem/Operation": "RunInstances", "lineItem/AvailabilityZone": "us-east-1a",
            "lineItem/ResourceId": instance["InstanceId"], "lineItem/UsageAmount": "24",
            "lineItem/CurrencyCode": "USD", "lineItem/UnblendedCost": f"{cost:.4f}",
            "lineItem/LineItemDescription": f"{itype} hours", "product/ProductName": "Amazon Elastic Compute Cloud",
            "product/instanceType": itype, "product/productFamily": "Compute Instance",
            "product/regionCode": "us-east-1", "pricing/publicOnDemandCost": f"{cost:.4f}",
            "pricing/term": "Spot" if "Spot" in usage else "OnDemand", "pricing/unit": "Hrs",
            "resourceTags/user:team": "nlp"}


def put_cur(s3, lines: list[dict]) -> list[str]:
    """Gzip CSV parts and the period manifest in S3 the way CUR delivers them; a superseded assembly stays
    beside the current one and must not be pulled. Returns the current keys."""
    s3.create_bucket(Bucket="cur-bucket")
    months: dict[datetime, list[dict]] = {}
    for line in lines:
        start = datetime.strptime(line["lineItem/UsageStartDate"], "%Y-%m-%dT%H:%M:%SZ")
        months.setdefault(start.replace(day=1), []).append(line)
    current = []
    for month, rows in months.items():
        nxt = (month + timedelta(days=32)).replace(day=1)
        period = f"cur/gpu-report/{month:%Y%m%d}-{nxt:%Y%m%d}"
        buf = io.StringIO()
        w = csv.DictWriter(buf, CUR_HEADER)
        w.writeheader()
        w.writerows(rows)
        key = f"{period}/assembly-new/gpu-report-00001.csv.gz"
        s3.put_object(Bucket="cur-bucket", Key=key, Body=gzip.compress(buf.getvalue().encode()))
        s3.put_object(Bucket="cur-bucket", Key=f"{period}/assembly-old/gpu-report-00001.csv.gz",
                      Body=gzip.compress(buf.getvalue().encode()))
        manifest = {"assemblyId": "assembly-new", "reportName": "gpu-report", "bucket": "cur-bucket",
                    "billingPeriod": {"start": f"{month:%Y%m%d}T000000.000Z", "end": f"{nxt:%Y%m%d}T000000.000Z"},
                    "reportKeys": [key], "compression": "GZIP", "contentType": "text/csv"}
        s3.put_object(Bucket="cur-bucket", Key=f"{period}/gpu-report-Manifest.json", Body=json.dumps(manifest))
        s3.put_object(Bucket="cur-bucket", Key=f"{period}/assembly-new/gpu-report-Manifest.json",
                      Body=json.dumps(manifest))
        current.append(key)
    return current


@pytest.fixture
def planted(aws):
    """An idle p4d, an oversized p4d (its metrics keyed by host only), a busy spot g5, a CPU box, SageMaker jobs
    (spot without and with checkpoints, on-demand) and a CUR for the window."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    # moto's server does not take botocore's gzip-compressed PutMetricData bodies
    cw = boto3.client("cloudwatch", region_name="us-east-1", config=Config(disable_request_compression=True))
    sm = boto3.client("sagemaker", region_name="us-east-1")
    idle = launch(ec2, "p4d.24xlarge", "nlp-idle")
    big = launch(ec2, "p4d.24xlarge", "nlp-oversized")
    spot = launch(ec2, "g5.xlarge", "vision-spot", spot=True, team="vision")
    cpu = launch(ec2, "m5.large", "web")
    gpu_metrics(cw, idle, [1.0, 3.0, 2.0], 2000, gpus=2)  # two of the eight GPUs: moto scans every point per call
    gpu_metrics(cw, big, [28.0, 30.0, 24.0], 10240, gpus=2, by_host=True)
    gpu_metrics(cw, spot, [85.0, 90.0], 20000, gpus=1)
    jobs = {"nockpt": training(sm, "llm-ft-nockpt", spot=True, checkpoint=False),
            "ckpt": training(sm, "llm-ft-ckpt", spot=True, checkpoint=True),
            "ondemand": training(sm, "llm-ft-ondemand", spot=False, checkpoint=False)}
    lines, i = [], 0
    for d in range(4):
        day = SINCE + timedelta(days=d)
        for inst, usage, cost in ((idle, "BoxUsage", 527.04), (big, "BoxUsage", 527.04),
                                  (spot, "SpotUsage", 7.24), (cpu, "BoxUsage", 2.30)):
            i += 1
            lines.append(cur_line(i, day, inst, usage, cost))
    keys = put_cur(boto3.client("s3", region_name="us-east-1"), lines)
    return {"idle": idle["InstanceId"], "big": big["InstanceId"], "spot": spot["InstanceId"],
            "cpu": cpu["InstanceId"], "jobs": jobs, "cur_keys": keys}


# ---- pull, then audit ---------------------------------------------------------------------------------------


@pytest.mark.heavy
def test_pull_writes_a_snapshot_and_the_audit_finds_what_was_planted(planted, tmp_path):
    snap = tmp_path / "snap"
    result = run(*pull_args(snap))
    assert result.exit_code == 0, result.output
    assert "wrote snapshot" in result.stdout

    manifest = json.loads((snap / "manifest.json").read_text())
    assert manifest["schema"] == "gpu-auditor/snapshot-manifest@1"
    assert manifest["provider"] == "aws" and manifest["failed"] == []
    assert manifest["window"]["start"] == SINCE.isoformat() + "Z"
    by_name = {s["name"]: s for s in manifest["sources"]}
    assert set(by_name) == {"aws:123456789012:ec2:us-east-1", "aws:123456789012:cloudwatch:us-east-1",
                            "aws:123456789012:sagemaker:us-east-1", "aws:cur"}
    assert by_name["aws:123456789012:ec2:us-east-1"]["counts"] == {"instances": 4, "gpu_instances": 3}
    assert by_name["aws:123456789012:cloudwatch:us-east-1"]["counts"]["gpu_usage"] == 3
    assert by_name["aws:123456789012:sagemaker:us-east-1"]["counts"] == {"training_jobs": 3, "tuning_jobs": 0}
    assert by_name["aws:cur"]["counts"]["files"] == len(planted["cur_keys"])
    # Every file is listed with its hash; the superseded assembly was not pulled.
    files = {f["path"]: f for f in manifest["files"]}
    on_disk = {p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file()} - {"manifest.json"}
    assert set(files) == on_disk
    for path, f in files.items():
        assert f["sha256"] == sha256(snap / path)
    assert not [p for p in files if "assembly-old" in p]
    assert [p for p in files if p.endswith("gpu-report-Manifest.json")]

    inv = load_snapshot(snap / "inventory.json")
    assets = {a["id"]: a for a in inv["assets"]}
    assert set(assets) == {planted["idle"], planted["big"], planted["spot"]}  # the CPU box is not a GPU asset
    assert assets[planted["idle"]]["gpu_model"] == "A100" and assets[planted["idle"]]["gpu_count"] == 8
    assert assets[planted["spot"]]["lifecycle"] == "spot" and assets[planted["spot"]]["gpu_model"] == "A10G"
    assert assets[planted["idle"]]["lifecycle"] == "on_demand"
    assert assets[planted["idle"]]["tags"]["team"] == "nlp" and assets[planted["idle"]]["name"] == "nlp-idle"
    usage = {u["asset_id"]: u for u in inv["gpu_usage"]}
    # the mean of the points planted so far today: 1, 3, 2 cycled, cut wherever the hour of the run cuts it
    points = usage[planted["idle"]]["samples"]
    assert usage[planted["idle"]]["mean_util_pct"] == pytest.approx(
        sum((1.0, 3.0, 2.0)[k % 3] for k in range(points)) / points, abs=1e-3)
    assert usage[planted["big"]]["peak_mem_gb"] == pytest.approx(10.0)  # found through the host name
    assert usage[planted["big"]]["p95_util_pct"] == pytest.approx(30.0)
    assert usage[planted["idle"]]["samples"] >= 72 // STEP
    span = usage[planted["idle"]]["window_end"] - usage[planted["idle"]]["window_start"]
    assert span >= timedelta(hours=72 - STEP)
    jobs = {j["name"]: j for j in inv["jobs"]}
    assert jobs["llm-ft-nockpt"]["spot"] is True and jobs["llm-ft-nockpt"]["checkpoint_uri"] is None
    assert jobs["llm-ft-ckpt"]["checkpoint_uri"] == "s3://ckpt/llm-ft-ckpt/"
    assert jobs["llm-ft-nockpt"]["max_wait_s"] == 172800 and jobs["llm-ft-nockpt"]["instance_count"] == 2
    assert jobs["llm-ft-nockpt"]["tags"] == {"team": "nlp"}

    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    report = tmp_path / "report"
    audited = run("audit", "--policy", policy, "--out", report, snap)
    assert audited.exit_code == 0, audited.output
    doc = json.loads((report / "audit.json").read_text())
    assert doc["partial"] is False
    assert doc["window"]["start"] == SINCE.isoformat() + "Z"  # the snapshot's window
    flagged = {(f["rule"], f["resource"]) for f in doc["findings"]}
    assert ("GPU001", planted["idle"]) in flagged
    assert ("GPU002", planted["big"]) in flagged
    assert ("SPOT001", planted["jobs"]["nockpt"]) in flagged
    assert ("SPOT001", planted["jobs"]["ckpt"]) not in flagged
    assert not {r for r, res in flagged if res == planted["spot"] and r.startswith("GPU")}  # the busy spot box
    idle = next(f for f in doc["findings"] if f["rule"] == "GPU001")
    assert idle["cost"] is not None  # joined to the CUR lines pulled with it


@pytest.mark.heavy
def test_no_credential_is_written(planted, tmp_path):
    snap = tmp_path / "snap"
    assert run(*pull_args(snap)).exit_code == 0
    for path in snap.rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
            for secret in (SECRET_KEY, SESSION_TOKEN, ACCESS_KEY):
                assert secret.encode() not in data, (path, secret)


@pytest.mark.heavy
def test_a_failing_source_is_recorded_and_the_audit_is_partial(planted, tmp_path, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on: SageMaker's endpoint is down
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", f"http://127.0.0.1:{dead}")
    snap = tmp_path / "snap"
    result = run(*pull_args(snap))
    assert result.exit_code == 3, result.output
    manifest = json.loads((snap / "manifest.json").read_text())
    assert [f["name"] for f in manifest["failed"]] == ["aws:123456789012:sagemaker:us-east-1"]
    assert "127.0.0.1" in manifest["failed"][0]["reason"]
    assert {s["name"] for s in manifest["sources"] if s["status"] == "ok"} >= {"aws:cur",
                                                                                 "aws:123456789012:ec2:us-east-1"}
    assert load_snapshot(snap / "inventory.json")["jobs"] == []

    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    audited = run("audit", "--policy", policy, "--out", tmp_path / "r", snap)
    assert audited.exit_code == 3, audited.output
    assert "sagemaker" in audited.stderr and "partial" in audited.stderr
    doc = json.loads((tmp_path / "r" / "audit.json").read_text())
    assert doc["partial"] is True
    assert ("GPU001", planted["idle"]) in {(f["rule"], f["resource"]) for f in doc["findings"]}


def test_without_credentials_every_source_fails_and_says_why(aws, tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    snap = tmp_path / "snap"
    result = run(*pull_args(snap))
    assert result.exit_code == 3
    manifest = json.loads((snap / "manifest.json").read_text())
    assert {f["name"] for f in manifest["failed"]} == {
        "aws:caller:ec2:us-east-1", "aws:caller:cloudwatch:us-east-1", "aws:caller:sagemaker:us-east-1", "aws:cur"}
    assert all("credentials" in f["reason"].lower() for f in manifest["failed"])


@pytest.mark.heavy
def test_live_audit_pulls_into_a_temporary_snapshot(planted, tmp_path):
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    result = run("audit", "--live", "--provider", "aws", "--region", "us-east-1", "--since",
                 SINCE.date().isoformat(), "--until", UNTIL.date().isoformat(), "--billing-uri",
                 "s3://cur-bucket/cur/", "--policy", policy, "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "r" / "audit.json").read_text())
    assert ("SPOT001", planted["jobs"]["nockpt"]) in {(f["rule"], f["resource"]) for f in doc["findings"]}
    assert doc["summary"]["billed_cost"]


@pytest.mark.heavy
def test_existing_snapshot_is_not_overwritten_without_force(planted, tmp_path):
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "keep.txt").write_text("mine")
    result = run(*pull_args(snap))
    assert result.exit_code == 2 and "--force" in result.stderr
    assert (snap / "keep.txt").read_text() == "mine"
    assert run(*pull_args(snap, "--force")).exit_code == 0
    assert not (snap / "keep.txt").exists() and (snap / "manifest.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["snap"]  # no staging folder left behind


# ---- pagination, throttling, and what moto lacks (Stubber) ---------------------------------------------------


def pull_with(tmp_path, monkeypatch=None, retry: Retry | None = None, factory=boto3.Session, **options) -> dict:
    opts = PullOptions("aws", WINDOW, regions=["us-east-1"], **options)
    return pull_snapshot(opts, tmp_path / "snap", retry=retry,
                         adapter=lambda p: aws_live.pull(p, session_factory=factory))


@pytest.mark.heavy
def test_pages_are_followed_to_the_end(aws, tmp_path, monkeypatch):
    monkeypatch.setattr(aws_live, "PAGE", 2)
    monkeypatch.setattr(aws_sagemaker, "PAGE", 2)
    ec2 = boto3.client("ec2", region_name="us-east-1")
    ids = {launch(ec2, "g4dn.xlarge", f"n{i}")["InstanceId"] for i in range(5)}
    sm = boto3.client("sagemaker", region_name="us-east-1")
    for i in range(3):
        training(sm, f"job-{i}", spot=False, checkpoint=False)
    manifest = pull_with(tmp_path, billing="s3://nothing-here/")
    inv = load_snapshot(tmp_path / "snap" / "inventory.json")
    assert {a["id"] for a in inv["assets"]} == ids
    assert len(inv["jobs"]) == 3
    assert [f["name"] for f in manifest["failed"]] == ["aws:cur"]  # no such bucket: recorded, not fatal


class StubbedSession(boto3.Session):
    """A real boto3 session whose clients for some services are wrapped in a botocore Stubber."""

    stubs: dict[str, Stubber] = {}

    def client(self, service, *args, **kwargs):
        if service in self.stubs:
            return self.stubs[service].client
        return super().client(service, *args, **kwargs)


def stubbed(service: str, region: str = "us-east-1") -> Stubber:
    stub = Stubber(boto3.client(service, region_name=region))
    stub.activate()
    return stub


@pytest.mark.heavy
def test_throttling_is_retried_with_backoff(aws, tmp_path, monkeypatch):
    ec2 = stubbed("ec2")
    ec2.add_client_error("describe_instances", "RequestLimitExceeded", "Request limit exceeded.", 503)
    ec2.add_client_error("describe_instances", "RequestLimitExceeded", "Request limit exceeded.", 503)
    ec2.add_response("describe_instances", {"Reservations": []})
    sm = stubbed("sagemaker")
    for _ in range(4):  # more throttling than the retry allows: that source fails, bounded
        sm.add_client_error("list_training_jobs", "ThrottlingException", "Rate exceeded", 400)
    monkeypatch.setattr(StubbedSession, "stubs", {"ec2": ec2, "sagemaker": sm})
    slept: list[float] = []
    manifest = pull_with(tmp_path, retry=Retry(delays=(0.5, 1.0, 2.0), sleep=slept.append),
                         factory=StubbedSession, billing="s3://nothing-here/")
    assert slept == [0.5, 1.0] + [0.5, 1.0, 2.0]
    failed = {f["name"]: f["reason"] for f in manifest["failed"]}
    assert failed["aws:123456789012:sagemaker:us-east-1"].startswith("ThrottlingException")
    assert "aws:123456789012:ec2:us-east-1" not in failed
    ec2.assert_no_pending_responses()


@pytest.mark.heavy
def test_training_and_billable_seconds_and_interruptions(aws, tmp_path, monkeypatch):
    """moto leaves BillableTimeInSeconds empty: the SageMaker answer comes from a Stubber."""
    sm = stubbed("sagemaker")
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-job/ft"
    sm.add_response("list_training_jobs", {"TrainingJobSummaries": [
        {"TrainingJobName": "ft", "TrainingJobArn": arn, "CreationTime": SINCE, "TrainingJobStatus": "Completed"}],
        "NextToken": "p2"})
    sm.add_response("list_training_jobs", {"TrainingJobSummaries": []})
    sm.add_response("describe_training_job", {
        "TrainingJobName": "ft", "TrainingJobArn": arn, "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed", "CreationTime": SINCE, "TrainingStartTime": SINCE + timedelta(hours=1),
        "TrainingEndTime": SINCE + timedelta(hours=9), "EnableManagedSpotTraining": True,
        "AlgorithmSpecification": {"TrainingInputMode": "File"}, "ModelArtifacts": {"S3ModelArtifacts": "s3://m"},
        "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 36000, "MaxWaitTimeInSeconds": 72000},
        "TrainingTimeInSeconds": 28800, "BillableTimeInSeconds": 9000,
        "SecondaryStatusTransitions": [
            {"Status": "Training", "StartTime": SINCE}, {"Status": "Interrupted", "StartTime": SINCE},
            {"Status": "Training", "StartTime": SINCE}, {"Status": "Interrupted", "StartTime": SINCE}]})
    sm.add_response("list_tags", {"Tags": [{"Key": "team", "Value": "nlp"}], "NextToken": "t2"})
    sm.add_response("list_tags", {"Tags": [{"Key": "owner", "Value": "ana@example.com"}]})
    monkeypatch.setattr(StubbedSession, "stubs", {"sagemaker": sm})
    pull_with(tmp_path, factory=StubbedSession, billing="s3://nothing-here/")
    job = load_snapshot(tmp_path / "snap" / "inventory.json")["jobs"][0]
    assert (job["training_s"], job["billable_s"], job["interruptions"]) == (28800, 9000, 2)
    assert job["instance_type"] == "ml.g5.12xlarge" and job["spot"] is True and job["max_runtime_s"] == 36000
    assert job["tags"] == {"team": "nlp", "owner": "ana@example.com"}
    assert job["start_time"] == SINCE + timedelta(hours=1)
    sm.assert_no_pending_responses()


@pytest.mark.heavy
def test_cur_found_through_report_definitions_and_prices_from_the_pricing_api(planted, tmp_path, monkeypatch):
    cur = stubbed("cur")
    cur.add_response("describe_report_definitions", {"ReportDefinitions": [{
        "ReportName": "gpu-report", "TimeUnit": "HOURLY", "Format": "textORcsv", "Compression": "GZIP",
        "AdditionalSchemaElements": ["RESOURCES"], "S3Bucket": "cur-bucket", "S3Prefix": "cur",
        "S3Region": "us-east-1"}]})
    exports = stubbed("bcm-data-exports")
    exports.add_response("list_exports", {"Exports": []})
    pricing = stubbed("pricing")
    product = {"product": {"attributes": {"instanceType": "p4d.24xlarge"}}, "terms": {"OnDemand": {"X.Y": {
        "priceDimensions": {"X.Y.Z": {"unit": "Hrs", "pricePerUnit": {"USD": "21.9576000000"}}}}}}}
    for _ in range(2):  # g5.xlarge, and p4d.24xlarge (the instances' and the jobs' ml.p4d.24xlarge)
        pricing.add_response("get_products", {"PriceList": [json.dumps(product)], "FormatVersion": "aws_v1"})
    monkeypatch.setattr(StubbedSession, "stubs", {"cur": cur, "bcm-data-exports": exports, "pricing": pricing})
    manifest = pull_with(tmp_path, factory=StubbedSession, prices=True)
    assert manifest["failed"] == []
    cur_source = next(s for s in manifest["sources"] if s["name"] == "aws:cur")
    assert cur_source["counts"]["files"] == len(planted["cur_keys"])
    inv = load_snapshot(tmp_path / "snap" / "inventory.json")
    assert {(p["instance_type"], p["price_per_hour"]) for p in inv["prices"]} >= {("p4d.24xlarge", "21.9576000000")}
    pricing.assert_no_pending_responses()


@pytest.mark.heavy
def test_assume_role_across_the_organisation(aws, tmp_path):
    org = boto3.client("organizations", region_name="us-east-1")
    org.create_organization(FeatureSet="ALL")
    member = org.create_account(AccountName="ml", Email="ml@example.com")["CreateAccountStatus"]["AccountId"]
    creds = boto3.client("sts").assume_role(RoleArn=f"arn:aws:iam::{member}:role/Auditor",
                                            RoleSessionName="plant")["Credentials"]
    in_member = boto3.client("ec2", region_name="us-east-1", aws_access_key_id=creds["AccessKeyId"],
                             aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["SessionToken"])
    theirs = launch(in_member, "g5.xlarge", "member-box")["InstanceId"]
    mine = launch(boto3.client("ec2", region_name="us-east-1"), "g4dn.xlarge", "payer-box")["InstanceId"]
    manifest = pull_with(tmp_path, assume_role="Auditor", billing="s3://nothing-here/")
    inv = load_snapshot(tmp_path / "snap" / "inventory.json")
    by_account = {a["id"]: a["account"] for a in inv["assets"]}
    assert by_account[theirs] == member
    assert by_account[mine] == "123456789012"
    assert f"aws:{member}:ec2:us-east-1" in {s["name"] for s in manifest["sources"] if s["status"] == "ok"}
    text = "".join(p.read_text() for p in (tmp_path / "snap").glob("*.json"))
    assert creds["SecretAccessKey"] not in text


def test_redaction_of_messages():
    p = Pull(PullOptions("aws", WINDOW), Path("/nonexistent"))
    p.secret("s3cr3t-value")
    text = p.redact('401 for Authorization: Bearer eyJabc.def.ghi; token=abcd1234; echo s3cr3t-value; '
                    '{"access_token": "ya29.zzz"}')
    for leaked in ("eyJabc", "abcd1234", "s3cr3t-value", "ya29.zzz"):
        assert leaked not in text
    assert "401 for" in text


@pytest.mark.heavy
def test_an_unreadable_cur_manifest_fails_the_billing_source(aws, tmp_path):
    """A manifest of the window's billing period that is not JSON, or lists no report files: that period's cost
    would be missing, so the source is not ok."""
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="cur-bucket")
    month = SINCE.replace(day=1)
    nxt = (month + timedelta(days=32)).replace(day=1)
    key = f"cur/gpu-report/{month:%Y%m%d}-{nxt:%Y%m%d}/gpu-report-Manifest.json"
    for body in (b"<Error>not json</Error>", json.dumps({"reportName": "gpu-report"}).encode()):
        s3.put_object(Bucket="cur-bucket", Key=key, Body=body)
        manifest = pull_with(tmp_path, billing="s3://cur-bucket/cur/gpu-report/")
        reason = {f["name"]: f["reason"] for f in manifest["failed"]}["aws:cur"]
        assert reason == (f"UnreadableAnswer: 1 CUR manifest(s) are not a JSON object listing the report's files "
                          f"(reportKeys or dataFiles), the first s3://cur-bucket/{key}; their billing periods are "
                          "missing")
        assert not (tmp_path / "snap" / "billing").exists()
        shutil.rmtree(tmp_path / "snap")


def test_instances_and_metric_series_that_cannot_be_read_are_counted(aws, tmp_path, monkeypatch):
    ec2 = stubbed("ec2")
    ec2.add_response("describe_instances", {"Reservations": [{"Instances": [{"InstanceId": "i-0notype"}]}]})
    monkeypatch.setattr(StubbedSession, "stubs", {"ec2": ec2})
    manifest = pull_with(tmp_path, factory=StubbedSession, billing="s3://nothing-here/")
    source = next(s for s in manifest["sources"] if s["name"] == "aws:123456789012:ec2:us-east-1")
    assert source["counts"] == {"instances": 0, "gpu_instances": 0}
    assert source_line(source) == "instances 0, gpu_instances 0; not read: 1 instances without an InstanceId or " \
                                  "InstanceType"
    assert aws_pricing.on_demand_price({"terms": {"OnDemand": {"t": {"priceDimensions": {"d": {
        "unit": "Hrs", "pricePerUnit": {"USD": "n/a"}}}}}}}) is None  # not a number: no price, not a crash


@pytest.mark.heavy
def test_a_fractional_gpu_is_counted_as_its_share_and_flagged_idle(aws, tmp_path):
    """AWS describes a g6f.xlarge as `Gpus[].Count: 0`, `LogicalGpuCount: 1`, `GpuPartitionSize: 0.125`
    (moto's copy of DescribeInstanceTypes): an eighth of an L4. Idle beside an idle g5.xlarge, both are flagged,
    each with what its own billing lines cost; its GPU-hours are an eighth of its hours."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    cw = boto3.client("cloudwatch", region_name="us-east-1", config=Config(disable_request_compression=True))
    frac, whole = launch(ec2, "g6f.xlarge", "frac-idle"), launch(ec2, "g5.xlarge", "whole-idle")
    gpu_metrics(cw, frac, [1.0, 2.0], 300, gpus=1)
    gpu_metrics(cw, whole, [1.0, 2.0], 300, gpus=1)
    lines = [cur_line(2 * d + k, SINCE + timedelta(days=d), inst, "BoxUsage", cost)
             for d in range(4) for k, (inst, cost) in enumerate(((frac, 5.2128), (whole, 24.144)))]
    put_cur(boto3.client("s3", region_name="us-east-1"), lines)
    snap = tmp_path / "snap"
    assert run(*pull_args(snap)).exit_code == 0
    assets = {a["instance_type"]: a for a in load_snapshot(snap / "inventory.json")["assets"]}
    assert (assets["g6f.xlarge"]["gpu_count"], assets["g6f.xlarge"]["gpu_model"]) == (0.125, "L4")
    assert assets["g5.xlarge"]["gpu_count"] == 1
    (tmp_path / "policy.yml").write_text(POLICY)
    assert run("audit", "--policy", tmp_path / "policy.yml", "--out", tmp_path / "r", snap).exit_code == 0
    doc = json.loads((tmp_path / "r" / "audit.json").read_text())
    idle = {f["resource"]: f for f in doc["findings"] if f["rule"] == "GPU001"}
    assert set(idle) == {frac["InstanceId"], whole["InstanceId"]}
    assert idle[frac["InstanceId"]]["cost"] == "20.85"  # 4 days x 5.2128, its own billing
    assert idle[whole["InstanceId"]]["cost"] == "96.58"  # 4 days x 24.144
    assert "(0.125x L4)" in idle[frac["InstanceId"]]["message"]
    by_model = {m["model"]: m for m in doc["summary"]["fleet"]["by_model"]}
    assert by_model["L4"]["gpu_hours"] == "12.0"  # 4 x 24 h x 1/8
    assert by_model["A10G"]["gpu_hours"] == "96.0"

"""`gpu-auditor pull --provider azure` against the Azure REST API specification's own example responses.

The examples are read in place from ../shared/samples/azure-api/ (through tests/conftest.py's `outside`: absent,
the tests are skipped with the reason; Azure/azure-rest-api-specs, MIT licence,
Copyright (c) Microsoft Corporation; the repository, commit and path of each file are in SOURCES.md there) and
served through the loopback server, as tests/test_pull_azure.py serves its own recordings. Where a test changes
an example (a placeholder nextLink set to null to reach the next step, a column renamed, a GPU size given to a
VM), it does so on the copy it serves, and says so.

Each case of issue 22 is proved here: a Cost Management answer is read by its columns' names and never writes
a blank cost; `204 No Content` is retried after its Retry-After and then taken as empty; sweep jobs are pulled
with their limits, sampling, early termination and trial compute; a nextLink that is not a URL is refused in one
line; Monitor series split by a dimension are read by that dimension or named.
"""

from __future__ import annotations

import copy
import csv
import json
import time
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from azure.core.credentials import AccessToken
from click.testing import CliRunner
from conftest import outside
from servers.http_api import ApiServer, Request

from auditor.cli import cli
from auditor.providers.live import azure as azure_live
from auditor.providers.live import azure_cost
from auditor.providers.live.pull import PullOptions, Retry, pull_snapshot, source_line
from auditor.providers.live.snapshot import load_snapshot
from auditor.window import Window

SUB = "00000000-0000-0000-0000-000000000000"  # the Cost Management example's subscription
WINDOW = Window(datetime(2026, 10, 1), datetime(2026, 10, 4), "2026-10-01 to 2026-10-03")
TOKEN = "planted-azure-spec-token-0b7e"
GPU_SIZE = "Standard_NC24ads_A100_v4"
POLICY = """policy: test
version: "1"
owner: finops@example.com
currency: USD
clauses:
  idle: {text: idle GPUs are stopped, max_mean_util_pct: 10, min_hours: 1}
"""


def example(path: str, status: str = "200") -> dict | None:
    """An example's response body (None: the example's answer has no body, like its 204)."""
    doc = json.loads(outside("samples", "azure-api", path).read_text(encoding="utf-8"))
    return copy.deepcopy(doc["responses"][status].get("body"))


QUERY = "costmanagement/SubscriptionQueryGrouping.json"
WORKSPACES = "machinelearning/Workspace/listBySubscription.json"
SWEEPS = "machinelearning/SweepJob/list.json"
COMMANDS = "machinelearning/CommandJob/list.json"
METRICS = "monitor/GetMetric.json"


def no_next(body: dict) -> dict:
    """The example with its placeholder nextLink ("nextLink", "string") set to null: a list of one page."""
    body["nextLink"] = None
    return body


class Spec:
    """ARM answering with the specification's examples. `answers` maps a route to its answers, served in turn
    (the last one again and again): (status, body) or (status, body, headers)."""

    def __init__(self, **answers):
        self.answers = {
            "vms": [(200, example("compute/VirtualMachine_ListAll_MinimumSet_Gen.json"))],
            "scalesets": [(200, example("compute/VirtualMachineScaleSet_ListAll_MinimumSet_Gen.json"))],
            "workspaces": [(200, example(WORKSPACES))],
            "jobs": [(200, {"value": []})],
            "compute": [(200, example("machinelearning/Compute/get/AmlCompute.json"))],
            "metrics": [(200, example(METRICS))],
            "query": [(200, example(QUERY))],
            **answers}
        self.asked: dict[str, list[Request]] = {}

    def __call__(self, req: Request):
        if req.header("Authorization") != f"Bearer {TOKEN}":
            return 401, {"error": {"code": "AuthenticationFailed", "message": "Authentication failed."}}
        path = req.path.lower()
        route = next((name for name, match in (
            ("vms", path.endswith("/providers/microsoft.compute/virtualmachines")),
            ("scalesets", path.endswith("/providers/microsoft.compute/virtualmachinescalesets")),
            ("workspaces", path.endswith("/providers/microsoft.machinelearningservices/workspaces")),
            ("jobs", path.endswith("/jobs")),
            ("compute", "/computes/" in path),
            ("metrics", path.endswith("/providers/microsoft.insights/metrics")),
            ("query", path.endswith("/providers/microsoft.costmanagement/query") and req.method == "POST"),
        ) if match), None)
        if route is None:
            return 404, {"error": {"code": "NotFound", "message": f"no example for {req.method} {req.path}"}}
        self.asked.setdefault(route, []).append(req)
        queue = self.answers[route]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return answer(req) if callable(answer) else answer


class Credential:
    def get_token(self, *scopes, **kwargs):
        return AccessToken(TOKEN, int(time.time()) + 3600)


def pull(tmp_path, spec: Spec, monkeypatch, sleeps: list | None = None) -> dict:
    with ApiServer(spec) as server:
        monkeypatch.setenv(azure_live.ENDPOINT_ENV, server.url)
        retry = Retry(delays=(0.0,), sleep=(sleeps if sleeps is not None else []).append)
        return pull_snapshot(PullOptions("azure", WINDOW, accounts=[SUB]), tmp_path / "snap", retry=retry,
                             adapter=lambda p: azure_live.pull(p, credential=Credential()))


def source(manifest: dict, name: str) -> dict:
    return next(s for s in manifest["sources"] if s["name"] == f"azure:{SUB}:{name}")


def cost_lines(tmp_path) -> list[dict]:
    files = list((tmp_path / "snap" / "billing").rglob("*.csv"))
    assert len(files) == 1, files
    with open(files[0], newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def with_columns(body: dict, rename: dict[str, str]) -> dict:
    for c in body["properties"]["columns"]:
        c["name"] = rename.get(c["name"], c["name"])
    return body


# ---- Cost Management: columns by name, never a blank cost ----------------------------------------------------

@pytest.mark.heavy
def test_the_query_example_is_read_by_its_column_names_and_the_audit_counts_every_cent(tmp_path, monkeypatch):
    """The example answers with PreTaxCost, ResourceGroup and Currency (no date, no ResourceId): four rows worth
    $220.95, which the pull once wrote with empty costs while saying `ok, rows 4`."""
    manifest = pull(tmp_path, Spec(), monkeypatch)
    cost = source(manifest, "cost")
    assert cost["status"] == "ok" and cost["counts"] == {"pages": 1, "rows": 4}
    line = source_line(cost)
    assert "columns read by name: cost PreTaxCost, currency Currency, group ResourceGroup" in line
    assert "no date column: each row is the window's cost, dated 2026-10-01" in line
    assert "no ResourceId column: cost by ResourceGroup" in line
    lines = cost_lines(tmp_path)
    rows = example(QUERY)["properties"]["rows"]
    assert [(r["ResourceGroup"], Decimal(r["CostInBillingCurrency"]), r["BillingCurrency"], r["Date"])
            for r in lines] == sorted((g, Decimal(str(c)), cur, "2026-10-01") for c, g, cur in rows)
    raw = (tmp_path / "snap" / "raw" / "azure" / SUB / "query-0001.json").read_text()
    assert "218.68795741935486" in raw  # the page kept as the API sent it

    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    result = CliRunner().invoke(cli, ["audit", "--policy", str(policy), "--out", str(tmp_path / "r"),
                                      str(tmp_path / "snap")], catch_exceptions=False)
    doc = json.loads((tmp_path / "r" / "audit.json").read_text())
    assert result.exit_code == 3  # partial: the ML source refused the workspaces' nextLink (its own test below)
    assert doc["summary"]["billed_cost"] == {"USD": "220.95"}


@pytest.mark.heavy
@pytest.mark.parametrize(("rename", "cost_column", "currency"), [
    ({"PreTaxCost": "totalCost"}, "totalCost", "USD"),  # named after the request's aggregation alias
    ({"PreTaxCost": "Cost"}, "Cost", "USD"),
    ({"PreTaxCost": "CostUSD", "Currency": "BillingCurrencyName"}, "CostUSD", "USD"),  # no currency column: USD
    ({"PreTaxCost": "PreTaxCostUSD"}, "PreTaxCostUSD", "USD"),
])
def test_the_cost_column_under_each_name_the_api_uses(tmp_path, monkeypatch, rename, cost_column, currency):
    spec = Spec(query=[(200, with_columns(example(QUERY), rename))])
    manifest = pull(tmp_path, spec, monkeypatch)
    assert source(manifest, "cost")["status"] == "ok"
    assert f"cost {cost_column}" in source_line(source(manifest, "cost"))
    lines = cost_lines(tmp_path)
    assert sum(Decimal(r["CostInBillingCurrency"]) for r in lines) == sum(
        Decimal(str(r[0])) for r in example(QUERY)["properties"]["rows"])
    assert {r["BillingCurrency"] for r in lines} == {currency}


def test_usage_date_as_a_number_or_as_text(tmp_path, monkeypatch):
    body = example(QUERY)
    body["properties"]["columns"].append({"name": "UsageDate", "type": "Number"})
    dates = [20261001, "20261002", "2026-10-03T00:00:00", 20261003]
    for row, day in zip(body["properties"]["rows"], dates, strict=True):
        row.append(day)
    manifest = pull(tmp_path, Spec(query=[(200, body)]), monkeypatch)
    assert source(manifest, "cost")["status"] == "ok"
    assert "date UsageDate" in source_line(source(manifest, "cost"))
    by_group = {r["ResourceGroup"]: r["Date"] for r in cost_lines(tmp_path)}
    assert sorted(by_group.values()) == ["2026-10-01", "2026-10-02", "2026-10-03", "2026-10-03"]


@pytest.mark.heavy
@pytest.mark.parametrize(("change", "words"), [
    # the cost column under a name the adapter does not know: refused, naming what it got and what it needs
    (lambda b: with_columns(b, {"PreTaxCost": "Amount"}),
     "the Cost Management answer has columns Amount, ResourceGroup, Currency; it needs a cost (totalCost, Cost, "
     "PreTaxCost, CostInBillingCurrency, CostUSD, PreTaxCostUSD, CostInUSD): no cost was written"),
    (lambda b: with_columns(b, {"Currency": "Unit"}),
     "it needs a currency (Currency, BillingCurrency, BillingCurrencyCode): no cost was written"),
    # a row whose cost is blank, or not a number
    (lambda b: b["properties"]["rows"][1].__setitem__(0, None) or b,
     "of the 4 rows of the Cost Management answer, 1 without a number in PreTaxCost (the first: "
     '[null,"Ict_StratAndPlan_GoldSprova_Prod_1","USD"]): no cost was written'),
    (lambda b: b["properties"]["rows"][2].__setitem__(0, "n/a") or b, "1 without a number in PreTaxCost"),
    (lambda b: b["properties"]["rows"][3].pop() and b, "1 shorter than the columns"),
])
def test_a_blank_cost_is_never_written_as_ok(tmp_path, monkeypatch, change, words):
    manifest = pull(tmp_path, Spec(query=[(200, change(example(QUERY)))]), monkeypatch)
    cost = source(manifest, "cost")
    assert cost["status"] == "failed" and words in cost["reason"], cost["reason"]
    assert cost["reason"].startswith("UnreadableAnswer: ") and "\n" not in cost["reason"]
    assert not (tmp_path / "snap" / "billing").exists()
    assert f"azure:{SUB}:cost" in {f["name"] for f in manifest["failed"]}


# ---- 204 No Content ------------------------------------------------------------------------------------------

def test_204_is_asked_again_after_its_retry_after_then_read(tmp_path, monkeypatch):
    later = (204, example(QUERY, "204"), {"Retry-After": "2"})
    spec = Spec(query=[later, later, (200, example(QUERY))])
    sleeps: list[float] = []
    manifest = pull(tmp_path, spec, monkeypatch, sleeps)
    assert source(manifest, "cost")["counts"] == {"pages": 1, "rows": 4}
    assert sleeps == [2.0, 2.0] and len(spec.asked["query"]) == 3


@pytest.mark.heavy
@pytest.mark.parametrize(("headers", "asks", "sleeps"), [
    ({}, 1, []),  # the example's 204: no body, no Retry-After: no cost, said at once
    ({"Retry-After": "600"}, 3, [60.0, 60.0]),  # Retry-After bounded to a minute, three asks
    ({"x-ms-retry-after-ms": "1500"}, 3, [1.5, 1.5]),
])
def test_204_without_content_is_an_empty_result_said_in_the_line(tmp_path, monkeypatch, headers, asks, sleeps):
    spec = Spec(query=[(204, example(QUERY, "204"), headers)])
    waited: list[float] = []
    manifest = pull(tmp_path, spec, monkeypatch, waited)
    cost = source(manifest, "cost")
    assert cost["status"] == "ok" and cost["counts"] == {"pages": 0, "rows": 0}
    assert source_line(cost) == (f"pages 0, rows 0; the Query API answered 204 No Content ({asks} ask"
                                 f"{'s' if asks > 1 else ''}): no rows; no cost in {WINDOW.label}: the query "
                                 "answered without rows")
    assert waited == sleeps and len(spec.asked["query"]) == asks
    assert not (tmp_path / "snap" / "billing").exists()


# ---- Azure ML sweep jobs -------------------------------------------------------------------------------------

def test_sweep_jobs_are_pulled_with_their_limits_sampling_early_termination_and_trial_compute(tmp_path, monkeypatch):
    """The workspaces example (two workspaces of one name in two resource groups), each answering with the job
    list examples: the sweep in the first, the command job in the second. Their placeholder nextLinks are set to
    null here; the refusal of such a link is the next test."""
    def jobs(req: Request):
        path = SWEEPS if "/resourcegroups/workspace-1234/" in req.path.lower() else COMMANDS
        return 200, no_next(example(path))

    spec = Spec(workspaces=[(200, no_next(example(WORKSPACES)))], jobs=[jobs])
    manifest = pull(tmp_path, spec, monkeypatch)
    ml = source(manifest, "ml")
    assert ml["status"] == "ok" and ml["counts"] == {"workspaces": 2, "command_jobs": 1, "sweep_jobs": 1}
    # the examples' computeId is "string": no cluster is asked for, and the line says why
    assert ml["unread"] == {"computeId values that are not resource ids ('string'; the job is read without its "
                            "cluster)": 2}
    assert "compute" not in spec.asked
    assert all(r.arg("jobType") is None for r in spec.asked["jobs"])  # every type listed, not Command only
    jobs_by_kind = {j.get("kind", "job"): j for j in json.loads((tmp_path / "snap" / "inventory.json").read_text())
                    ["jobs"]}
    ws = example(WORKSPACES)["value"]
    sweep = jobs_by_kind["sweep"]
    assert sweep["id"] == f"{ws[0]['id']}/jobs/string"  # the example's id is no resource id: made from the workspace
    assert jobs_by_kind["job"]["id"] == f"{ws[1]['id']}/jobs/string"
    assert {k: sweep[k] for k in sweep if k.startswith("sweep_")} == {
        "sweep_max_trials": 1, "sweep_parallel_trials": 1, "sweep_trial_timeout_s": 1, "sweep_algorithm": "grid",
        "sweep_early_stopping": "medianstopping", "sweep_objective": "minimize string"}
    assert (sweep["instance_type"], sweep["instance_count"], sweep["platform"], sweep["state"]) == (
        "string", 1, "azureml", "notstarted")
    assert load_snapshot(tmp_path / "snap" / "inventory.json")["jobs"][0]["kind"] in ("sweep", "job")


def test_a_sweep_on_a_cluster_takes_the_trial_compute_from_the_cluster(tmp_path, monkeypatch):
    """The sweep example with a computeId naming the AmlCompute example's cluster (STANDARD_NC6, Dedicated), and
    its trial asking no instance type, and without early termination."""
    ws = example(WORKSPACES)["value"][0]
    body = no_next(example(SWEEPS))
    props = body["value"][0]["properties"]
    props["computeId"] = f"{ws['id']}/computes/compute123"
    del props["trial"]["resources"]["instanceType"], props["earlyTermination"]
    props["limits"]["timeout"] = "PT6H"
    spec = Spec(workspaces=[(200, {"value": [ws]})], jobs=[(200, body)])
    manifest = pull(tmp_path, spec, monkeypatch)
    assert source(manifest, "ml")["status"] == "ok" and "unread" not in source(manifest, "ml")
    (sweep,) = load_snapshot(tmp_path / "snap" / "inventory.json")["jobs"]
    assert (sweep["kind"], sweep["instance_type"], sweep["spot"]) == ("sweep", "STANDARD_NC6", False)
    assert (sweep["sweep_early_stopping"], sweep["max_runtime_s"], sweep["sweep_trial_timeout_s"]) == (None, 21600, 1)
    assert [r.path for r in spec.asked["compute"]] == [props["computeId"]]


# ---- nextLink ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("link", "words"), [
    ("nextLink", "the API's nextLink 'nextLink' is not an http(s) URL; stopped paging"),  # the example, as is
    ("/subscriptions/x/page2", "the API's nextLink '/subscriptions/x/page2' is not an http(s) URL"),
    ("https://elsewhere.example/page2", "the API's nextLink 'https://elsewhere.example/page2' leaves http://127.0.0.1:"),
])
def test_a_next_link_that_is_not_a_url_on_the_endpoint_is_refused_in_one_line(tmp_path, monkeypatch, link, words):
    body = example(WORKSPACES)
    body["nextLink"] = link
    manifest = pull(tmp_path, Spec(workspaces=[(200, body)]), monkeypatch)
    assert [f["name"] for f in manifest["failed"]] == [f"azure:{SUB}:ml"]
    reason = manifest["failed"][0]["reason"]
    assert words in reason and "\n" not in reason and "not a valid host" not in reason
    assert source(manifest, "cost")["status"] == "ok"  # the others go on


def test_the_cost_query_next_link_is_checked_too(tmp_path, monkeypatch):
    body = example(QUERY)
    body["properties"]["nextLink"] = "string"
    manifest = pull(tmp_path, Spec(query=[(200, body)]), monkeypatch)
    assert "the API's nextLink 'string' is not an http(s) URL" in source(manifest, "cost")["reason"]
    assert not (tmp_path / "snap" / "billing").exists()


# ---- Monitor series by dimension -----------------------------------------------------------------------------

def gpu_vm_spec(metrics: dict) -> Spec:
    """The VM list example with a GPU size given to its first VM (the example's VMs have no hardwareProfile), and
    Monitor answering with `metrics`."""
    vms = example("compute/VirtualMachine_ListAll_MinimumSet_Gen.json")
    vms["value"][0]["properties"] = {"hardwareProfile": {"vmSize": GPU_SIZE}}
    return Spec(vms=[(200, vms)], metrics=[(200, metrics)])


def as_gpu_metrics(dimension: str | None) -> dict:
    """The GetMetric example (BlobCount and BlobCapacity, five series each split by `tier`, hourly points) with
    its metrics named as the Telegraf nvidia_smi metrics, and its dimension renamed to `dimension`."""
    body = example(METRICS)
    for metric, name in zip(body["value"], ("utilization_gpu", "memory_used"), strict=True):
        metric["name"] = {"value": name, "localizedValue": name}
        for ts in metric["timeseries"]:
            for m in ts["metadatavalues"]:
                m["name"] = {"value": dimension, "localizedValue": dimension}
    return body


def test_series_split_by_gpu_are_read_one_series_a_gpu(tmp_path, monkeypatch):
    body = as_gpu_metrics("index")
    manifest = pull(tmp_path, gpu_vm_spec(body), monkeypatch)
    metrics = source(manifest, "metrics")
    assert metrics["counts"] == {"resources": 1, "gpu_usage": 1, "without_gpu_metrics": 0}
    assert "utilization_gpu series split by GPU read as one series a GPU" in metrics["notes"]
    (usage,) = load_snapshot(tmp_path / "snap" / "inventory.json")["gpu_usage"]
    util, mem = body["value"]
    hours = {}
    for ts in util["timeseries"]:
        for d in ts["data"]:
            hours.setdefault(d["timeStamp"], []).append(d["average"])
    per_hour = [sum(v) / len(v) for v in hours.values()]
    assert usage["samples"] == len(hours) == 5
    assert usage["mean_util_pct"] == pytest.approx(min(100.0, sum(per_hour) / len(per_hour)), abs=1e-3)
    assert usage["peak_mem_gb"] == pytest.approx(max(d["maximum"] for ts in mem["timeseries"]
                                                     for d in ts["data"]) / 1024, abs=1e-3)


def test_series_split_by_a_dimension_not_asked_for_are_named_not_merged(tmp_path, monkeypatch):
    manifest = pull(tmp_path, gpu_vm_spec(as_gpu_metrics("tier")), monkeypatch)  # the example's own dimension
    metrics = source(manifest, "metrics")
    assert metrics["status"] == "ok" and metrics["counts"]["gpu_usage"] == 0
    assert metrics["unread"] == {
        "resources whose memory_used series are split by tier (a dimension not asked for; not merged)": 1,
        "resources whose utilization_gpu series are split by tier (a dimension not asked for; not merged)": 1}
    assert "not read: 1 resources whose memory_used series are split by tier" in source_line(metrics)
    assert load_snapshot(tmp_path / "snap" / "inventory.json")["gpu_usage"] == []


def test_metrics_not_asked_for_are_named(tmp_path, monkeypatch):
    manifest = pull(tmp_path, gpu_vm_spec(example(METRICS)), monkeypatch)  # the example as is: blob metrics
    assert source(manifest, "metrics")["unread"] == {"metrics not asked for (BlobCapacity)": 1,
                                                     "metrics not asked for (BlobCount)": 1}


def test_the_compute_examples_have_no_gpu_and_a_duplicate_id_is_counted(tmp_path, monkeypatch):
    vms = example("compute/VirtualMachine_ListAll_MinimumSet_Gen.json")
    for vm in vms["value"]:  # the example's two VMs share one id
        vm["properties"] = {"hardwareProfile": {"vmSize": GPU_SIZE}}
    manifest = pull(tmp_path, Spec(vms=[(200, vms)]), monkeypatch)
    compute = source(manifest, "compute")
    assert compute["counts"] == {"vms": 2, "gpu_vms": 1} and compute["unread"] == {"GPU VMs listed twice": 1}
    assert source(manifest, "scalesets")["counts"] == {"scale_sets": 1, "gpu_scale_sets": 0}


def test_retry_after_as_seconds_or_an_http_date_is_bounded():
    from email.utils import format_datetime

    retry_after = azure_cost.retry_after

    soon = format_datetime(azure_cost.utc_now() + timedelta(seconds=30), usegmt=True)
    assert retry_after({"Retry-After": soon}) == pytest.approx(30, abs=2)
    assert [retry_after(h) for h in ({"Retry-After": "5"}, {"Retry-After": "3600"}, {"Retry-After": "soon"}, {})] == [
        5.0, 60.0, None, None]

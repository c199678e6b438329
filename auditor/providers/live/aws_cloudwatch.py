"""The `aws:<account>:cloudwatch:<region>` source: GPU utilisation and memory of the EC2 inventory's instances from
the CloudWatch agent's `nvidia_smi_utilization_gpu` and `nvidia_smi_memory_used` (namespace CWAgent) via
`get_metric_data`, hourly; a metric keyed by `host` is matched to its instance by private DNS name."""

from __future__ import annotations

import math
from datetime import datetime

from auditor.providers.live.aws_account import Account, throttled
from auditor.providers.live.pull import Pull, pages, usage_summary

METRICS = {"util": ("nvidia_smi_utilization_gpu", "Average"), "mem": ("nvidia_smi_memory_used", "Maximum")}
PERIOD = 3600
QUERIES_PER_CALL = 500  # GetMetricData's limit


def metrics(p: Pull, account: Account, region: str) -> dict[str, int]:
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
                if iid is None or iid not in assets:
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


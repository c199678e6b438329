"""The `aws:cur` source: the Cost and Usage Report (legacy CUR or CUR 2.0 Data Exports) files in S3 for the window,
found through their manifests and copied under `billing/` as delivered; the bucket and prefix from
`cur.describe_report_definitions` and `bcm-data-exports`, or named with `--billing s3://bucket/prefix`. A manifest
that does not list its files fails the source: its billing period's cost would be missing."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timedelta

from botocore.exceptions import ClientError

from auditor.errors import InputError
from auditor.providers.live.aws_account import Account, throttled
from auditor.providers.live.pull import Pull, UnreadableAnswer, describe_error, pages

CUR1_MANIFEST = re.compile(r"(?:^|/)(\d{8})-(\d{8})/[^/]+-Manifest\.json$")
CUR2_MANIFEST = re.compile(r"(?:^|/)metadata/BILLING_PERIOD=(\d{4})-(\d{2})/[^/]*Manifest\.json$")


def report(p: Pull, account: Account, region: str) -> dict[str, int]:
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
        p.progress(f"aws:cur: Data Exports not read ({describe_error(e)}); using the CUR report definitions")
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


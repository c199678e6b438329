"""Live AWS for `gpu-auditor pull` (boto3, the default credential chain or a named profile; every account
of an organisation through an assumed role name): the adapter's entry, the accounts, and the EC2 inventory.

Sources, each recorded in the snapshot manifest on its own:
- `aws:cur`: the Cost and Usage Report files in S3 for the window (`aws_cur.py`).
- `aws:<account>:ec2:<region>`: GPU instances (`describe_instances` joined with `describe_instance_types`
  GpuInfo), spot, on-demand or capacity block.
- `aws:<account>:cloudwatch:<region>`: GPU utilisation and memory from the CloudWatch agent
  (`aws_cloudwatch.py`).
- `aws:<account>:sagemaker:<region>`: SageMaker training jobs and tuning jobs as sweeps (`aws_sagemaker.py`).
- `aws:pricing` (with `--prices`): on-demand prices from the Pricing API (`aws_pricing.py`).

The standard `AWS_ENDPOINT_URL` (and `AWS_ENDPOINT_URL_<SERVICE>`) variables point every client elsewhere,
which is how the tests reach a moto server with this code unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from functools import partial
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, ProfileNotFound

from auditor.errors import InputError
from auditor.providers.live import aws_cloudwatch, aws_cur, aws_pricing, aws_sagemaker
from auditor.providers.live.aws_account import CONFIG, PAGE, Account, throttled
from auditor.providers.live.pull import Pull, describe_error, gpu_model, iso, pages, utc

LIFECYCLE = {"spot": "spot", "capacity-block": "capacity_block", "interruptible-capacity-reservation": "spot"}
LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]


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
            ec2_ok = p.run(f"aws:{account.id}:ec2:{region}", "inventory", partial(_ec2, p, account, region))
            if ec2_ok:
                p.run(f"aws:{account.id}:cloudwatch:{region}", "metrics",
                      partial(aws_cloudwatch.metrics, p, account, region))
            else:
                p.fail(f"aws:{account.id}:cloudwatch:{region}", "metrics", "skipped: the EC2 inventory failed")
            p.run(f"aws:{account.id}:sagemaker:{region}", "jobs",
                  partial(aws_sagemaker.training_jobs, p, account, region))
    billing_account = Account(base, "")
    p.run("aws:cur", "billing", lambda: aws_cur.report(p, billing_account, regions[0]))
    if o.prices:
        p.run("aws:pricing", "prices", lambda: aws_pricing.pricing(p, billing_account))


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
        yield "caller", "account", p.redact(describe_error(e))
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
            yield "organization", "account", f"cannot list the organisation's accounts: {p.redact(describe_error(e))}"
            return
    sts = base.client("sts", config=CONFIG)
    for account_id in ids:
        try:
            c = p.retry.call(sts.assume_role, throttled=throttled,
                             RoleArn=f"arn:{partition}:iam::{account_id}:role/{o.assume_role}",
                             RoleSessionName="gpu-auditor-pull")["Credentials"]
        except (ClientError, BotoCoreError) as e:
            yield account_id, "account", f"cannot assume role {o.assume_role}: {p.redact(describe_error(e))}"
            continue
        p.secret(c["SecretAccessKey"], c["SessionToken"])
        session = session_factory(aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"],
                                  aws_session_token=c["SessionToken"], region_name=base.region_name)
        yield account_id, "account", Account(session, account_id)



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
            "gpu_count": gpus_of(info["Gpus"]),
            "gpu_memory_gb": round(memory_gb, 3) if memory_gb else None,
            "lifecycle": LIFECYCLE.get(i.get("InstanceLifecycle", ""), "on_demand"),
            "state": i.get("State", {}).get("Name"), "launch_time": iso(utc(i.get("LaunchTime"))), "tags": tags,
        })
    return {"instances": len(instances), "gpu_instances": found}


def gpus_of(gpus: list[dict]) -> int | float:
    """Physical GPUs' worth of an instance type's `GpuInfo.Gpus`: a fractional type (g6f, gr6f) has `Count` 0
    and one logical GPU that is `GpuPartitionSize` (0.125 to 0.5) of a physical one."""
    total = Decimal(0)
    for g in gpus:
        if g.get("Count"):
            total += Decimal(g["Count"])
        else:
            total += Decimal(g.get("LogicalGpuCount") or 0) * Decimal(str(g.get("GpuPartitionSize") or 0))
    return int(total) if total == total.to_integral_value() else float(total)


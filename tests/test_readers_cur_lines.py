"""Each column of a legacy CUR line, one line for each way the AWS reader reads it: every line item type's charge
category and amortised cost (as AWS's Cloud Intelligence Dashboards amortise: a savings plan's covered usage at
its effective cost, a recurring fee's unused commitment, a reservation's unused fees, an upfront fee of nothing),
commitments, pricing, transfers, kinds, tags in every layout, capacity reservations and split cost allocation.

The expected values are worked out here from the CUR data dictionary and the reader's docstrings, never read back
from the reader. Each test reads its own small file (no shared fixture): mutmut runs a test against the functions
it saw that test call, so a file read once for a module would be checked against one test only."""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.errors import InputError
from auditor.tables.store import Store

D = Decimal
SP = "arn:aws:savingsplans::111122223333:savingsplan/sp-1"
RI = "arn:aws:ec2:us-east-1:111122223333:reserved-instances/ri-1"


def line(kind: str = "Usage", cost: str = "1.00", **over: str) -> dict[str, str]:
    """One CUR line of an hour of p4d.24xlarge in us-east-1, with `over` (`a__B` for `a/B`) changed."""
    row = {"identity/LineItemId": "x", "bill/PayerAccountId": "111122223333",
           "lineItem/UsageAccountId": "444455556666", "lineItem/LineItemType": kind,
           "lineItem/UsageStartDate": "2024-03-01T00:00:00Z", "lineItem/UsageEndDate": "2024-03-01T01:00:00Z",
           "lineItem/ProductCode": "AmazonEC2", "lineItem/UsageType": "BoxUsage:p4d.24xlarge",
           "lineItem/ResourceId": "i-0abc", "lineItem/UsageAmount": "1", "lineItem/CurrencyCode": "USD",
           "lineItem/UnblendedCost": cost, "lineItem/LineItemDescription": "an hour",
           "product/productFamily": "Compute Instance", "product/regionCode": "us-east-1",
           "pricing/term": "OnDemand", "pricing/unit": "Hrs"}
    row.update({k.replace("__", "/"): v for k, v in over.items()})
    return row


def read(tmp_path: Path, rows: list[dict[str, str]], columns: str) -> list[tuple]:
    header = list(dict.fromkeys(k for r in rows for k in r))
    path = tmp_path / "cur.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, header, lineterminator="\n", restval="")
        w.writeheader()
        w.writerows(rows)
    store = Store()
    assert store.load_file(path).format == "aws-cur"
    return store.lines().execute(f"SELECT {columns} FROM lines ORDER BY x_SourceRow").fetchall()


def test_every_line_item_type_charge_category_and_amortised_cost(tmp_path):
    rows = [line("Usage", "10.00"),
            line("SavingsPlanCoveredUsage", "8.00", savingsPlan__SavingsPlanEffectiveCost="5.50"),
            line("SavingsPlanRecurringFee", "100.00", savingsPlan__TotalCommitmentToDate="100.00",
                 savingsPlan__UsedCommitment="62.50"),
            line("SavingsPlanNegation", "-8.00"),
            line("SavingsPlanUpfrontFee", "1000.00"),
            line("DiscountedUsage", "0.00", reservation__EffectiveCost="3.25"),
            line("RIFee", "50.00", reservation__UnusedAmortizedUpfrontFeeForBillingPeriod="1.50",
                 reservation__UnusedRecurringFee="2.25"),
            line("Fee", "500.00", reservation__ReservationARN=RI),
            line("Fee", "20.00"),
            line("Tax", "4.00"),
            *(line(k, "-1.00") for k in ("Credit", "Refund", "BundledDiscount", "EdpDiscount",
                                         "PrivateRateDiscount", "Discount")),
            line("SomethingNew", "2.00")]
    got = read(tmp_path, rows, "ChargeCategory, BilledCost, EffectiveCost")
    assert got == [("Usage", D("10.00"), D("10.00")), ("Usage", D("8.00"), D("5.50")),
                   ("Purchase", D("100.00"), D("37.50")), ("Credit", D("-8.00"), D(0)),
                   ("Purchase", D("1000.00"), D(0)), ("Usage", D("0.00"), D("3.25")),
                   ("Purchase", D("50.00"), D("3.75")), ("Purchase", D("500.00"), D(0)),
                   ("Purchase", D("20.00"), D("20.00")), ("Tax", D("4.00"), D("4.00")),
                   *[("Credit", D("-1.00"), D("-1.00"))] * 6, ("Usage", D("2.00"), D("2.00"))]


def test_commitments_pricing_and_their_end(tmp_path):
    """Covered usage names its reservation or savings plan as used, a fee line as unused; each ends when its
    reservation or plan does."""
    rows = [line("DiscountedUsage", reservation__ReservationARN=RI, reservation__EndTime="2025-01-01T00:00:00Z"),
            line("RIFee", reservation__ReservationARN=RI, reservation__EndTime="2025-01-01T00:00:00Z"),
            line("SavingsPlanCoveredUsage", savingsPlan__SavingsPlanARN=SP,
                 savingsPlan__EndTime="2026-06-01T00:00:00Z"),
            line("SavingsPlanRecurringFee", savingsPlan__SavingsPlanARN=SP,
                 savingsPlan__EndTime="2026-06-01T00:00:00Z"),
            line(lineItem__UsageType="SpotUsage:p4d.24xlarge"),
            line(pricing__term="Reserved"),
            line(pricing__term="")]
    got = read(tmp_path, rows, "CommitmentDiscountId, CommitmentDiscountStatus, CommitmentDiscountType, "
                               "strftime(x_CommitmentEnd, '%Y-%m-%d'), PricingCategory")
    assert got == [(RI, "Used", "Reservation", "2025-01-01", "Committed"),
                   (RI, "Unused", "Reservation", "2025-01-01", "Standard"),
                   (SP, "Used", "Savings Plan", "2026-06-01", "Committed"),
                   (SP, "Unused", "Savings Plan", "2026-06-01", "Standard"),
                   (None, None, None, None, "Dynamic"), (None, None, None, None, "Committed"),
                   (None, None, None, None, None)]


def test_columns_of_a_line(tmp_path):
    """Currency (USD where the file names none), list cost (the public on-demand cost, else the cost), the
    service (the product's name, else its code), the region (its code, else the zone's), times, quantity."""
    rows = [line(cost="7.00", pricing__publicOnDemandCost="9.50", product__ProductName="Amazon Elastic Compute "
                 "Cloud", lineItem__AvailabilityZone="us-east-1a", product__sku="SKU1", lineItem__UsageAmount="2"),
            line(cost="7.00", lineItem__CurrencyCode="", product__regionCode="",
                 lineItem__AvailabilityZone="eu-west-1b")]
    got = read(tmp_path, rows, "BillingCurrency, ListCost, ServiceName, RegionId, AvailabilityZone, SkuId, "
                               "ConsumedQuantity, ConsumedUnit, BillingAccountId, SubAccountId, ResourceId, "
                               "ProviderName, x_Provider, strftime(ChargePeriodStart, '%H'), "
                               "strftime(ChargePeriodEnd, '%H'), ChargeDescription")
    common = ("Hrs", "111122223333", "444455556666", "i-0abc", "AWS", "aws", "00", "01", "an hour")
    assert got == [("USD", D("9.50"), "Amazon Elastic Compute Cloud", "us-east-1", "us-east-1a", "SKU1", D(2),
                    *common),
                   ("USD", D("7.00"), "AmazonEC2", "eu-west-1", "eu-west-1b", None, D(1), *common)]


def test_transfer_usage_types_kind_direction_and_regions(tmp_path):
    """`<src>-<dst>-AWS-Out-Bytes` names both ends by their prefixes; the product's from and to columns name
    them where present; us-east-1 lines often have no prefix."""
    def transfer(usage_type, **over):
        return line(lineItem__UsageType=usage_type, product__productFamily="Data Transfer", **over)

    rows = [transfer("USE1-USW2-AWS-Out-Bytes"),
            transfer("USW2-USE1-AWS-In-Bytes"),
            transfer("USE1-DataTransfer-Regional-Bytes"),
            transfer("USW2-DataTransfer-xAZ-In-Bytes"),
            transfer("DataTransfer-Out-Bytes", product__fromLocation="US East (N. Virginia)",
                     product__toLocation="External"),
            transfer("USE1-CloudFront-Out-Bytes"),
            transfer("USE1-Bytes", product__transferType="IntraRegion"),
            transfer("USE1-EUW1-Bytes", product__transferType="InterRegion Outbound",
                     product__fromRegionCode="us-east-1", product__toRegionCode="eu-west-1"),
            transfer("USE1-Bytes", product__transferType="AWS Inbound")]
    got = read(tmp_path, rows, "x_TransferKind, x_TransferDirection, x_TransferFrom, x_TransferTo, x_CostCategory")
    assert got == [("inter_region", "out", "us-east-1", "us-west-2", "transfer"),
                   ("inter_region", "in", "us-west-2", "us-east-1", "transfer"),
                   ("inter_zone", "out", "us-east-1", None, "transfer"),
                   ("inter_zone", "in", "us-west-2", None, "transfer"),
                   ("internet", "out", "us-east-1", None, "transfer"),
                   ("internet", "out", "us-east-1", None, "transfer"),
                   ("intra_region", "out", "us-east-1", None, "transfer"),
                   ("inter_region", "out", "us-east-1", "eu-west-1", "transfer"),
                   ("internet", "in", "us-east-1", None, "transfer")]


def test_kinds_and_instance_types(tmp_path):
    """Storage by family or usage type; compute by usage type or family (SageMaker's training, notebook and
    hosting usage too); the instance type from the product, else the usage type, else the description."""
    rows = [line(product__productFamily="Storage", lineItem__UsageType="USE1-TimedStorage-ByteHrs"),
            line(product__productFamily="", lineItem__UsageType="USE1-EBS:VolumeUsage.gp3"),
            line(product__productFamily="Storage Snapshot", lineItem__UsageType="USE1-EBS:SnapshotUsage"),
            line(product__productFamily="", lineItem__UsageType="USE1-UnusedBox:p5.48xlarge"),
            line(product__productFamily="", lineItem__UsageType="USE1-Train:ml.p4d.24xlarge-Training"),
            line(product__productFamily="", lineItem__UsageType="USE1-Notebk:ml.g5.xlarge",
                 lineItem__LineItemDescription="ml.g5.xlarge notebook hours"),
            line(product__productFamily="ML Instance", lineItem__UsageType="USE1-Host:ml.g5.2xlarge-Hosting",
                 product__instanceType="ml.g5.2xlarge"),
            line(product__productFamily="", lineItem__UsageType="USE1-CapacityBlock:p5.48xlarge"),
            line(product__productFamily="", lineItem__UsageType="USE1-Requests-Tier1"),
            # the family alone: a storage product's requests, an ML instance by an unknown usage type
            line(product__productFamily="Storage", lineItem__UsageType="USE1-Requests-Tier2"),
            line(product__productFamily="ML Instance", lineItem__UsageType="USE1-ml.p4d.24xlarge",
                 product__instanceType="ml.p4d.24xlarge")]
    got = read(tmp_path, rows, "x_CostCategory, x_InstanceType")
    assert got == [("storage", None), ("storage", None), ("storage", None), ("gpu_compute", "p5.48xlarge"),
                   ("other_compute", None), ("gpu_compute", "ml.g5.xlarge"), ("gpu_compute", "ml.g5.2xlarge"),
                   ("other_compute", None), ("other", None), ("storage", None), ("gpu_compute", "ml.p4d.24xlarge")]


def test_the_instance_type_named_only_in_a_description(tmp_path):
    """An instance type named in the description alone (no product column, no usage type that names one) is read
    from it, whatever its size: each size word, a SageMaker `ml.` type, in any place of the text; a description
    with no size word (a data transfer's) names none, and neither does a size word without a type before it."""
    named = ["p4d.24xlarge", "m5.large", "t3.medium", "t3.small", "t3.micro", "t3.nano", "c5.metal", "m7i.metal-48xl",
             "ml.g5.xlarge"]
    texts = [f"$1.00 per {t} instance hour" for t in named] + [
        "$0.09 per GB - first 10 TB / month data transfer out", "a large medium small micro nano metal bill",
        "  c5.metal   "]
    rows = [line(product__productFamily="", lineItem__UsageType="USE1-Fee", lineItem__LineItemDescription=t)
            for t in texts]
    got = [itype for (itype,) in read(tmp_path, rows, "x_InstanceType")]
    assert got == [*named, None, None, "c5.metal"]


def test_a_tag_column_no_rule_reads_is_not_read(tmp_path):
    """With the keys the audit reads given (Store(tag_keys=...), folded by case and spaces), a CUR's tag columns
    of other keys are not read at all: two hours that differ only in their run tag are one row of two lines (were
    the column read, it would group them apart); a key read is read in any case (`Team`)."""
    rows = [line(**{"resourceTags/user:Team": "nlp", "resourceTags/user:run": run,
                    "resourceTags/aws:createdBy": "root"}) for run in ("r-1", "r-2")]
    path = tmp_path / "cur.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    store = Store(tag_keys=["team", "aws:createdby"])
    store.load_file(path)
    assert store.con.execute("SELECT Tags, x_Lines FROM costs").fetchall() == [
        ({"Team": "nlp", "aws:createdBy": "root"}, 2)]


def test_the_cost_column_is_the_unblended_cost(tmp_path):
    """The export's own column the billed cost is summed from (a source's `cost_column`, which a spreadsheet's
    total row is checked against): lineItem/UnblendedCost, not the usage amount or another amount read."""
    rows = [line(cost="2.50", splitLineItem__SplitCost="1.00", pricing__publicOnDemandCost="3.00")]
    path = tmp_path / "cur.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    assert Store().load_file(path).cost_column == "lineItem/UnblendedCost"


def snake(column: str) -> str:
    """`lineItem/UnblendedCost` as Athena and CUR 2.0 spell it: `line_item_unblended_cost`."""
    return "_".join("".join(f"_{c.lower()}" if c.isupper() else c for c in part).lstrip("_")
                    for part in column.split("/"))


@pytest.mark.heavy
def test_tags_in_every_layout(tmp_path):
    """A column per tag, `resourceTags/user:team` (legacy) or `resource_tags_user_team` (Athena): user tags by
    their name, AWS tags with their `aws:` prefix, empty values left out; CUR 2.0's one `resource_tags` object
    (JSON text in CSV) with keys `user_team` and `aws_created_by`."""
    tagged = line(**{"resourceTags/user:team": "nlp", "resourceTags/user:owner": " ",
                     "resourceTags/aws:createdBy": "root"})
    untagged = line()
    assert read(tmp_path, [tagged, untagged], "Tags") == [({"team": "nlp", "aws:createdBy": "root"},), ({},)]
    athena = {snake(k) if "/" in k and not k.startswith("resourceTags") else k: v for k, v in tagged.items()}
    athena = {k.replace("resourceTags/user:", "resource_tags_user_").replace("resourceTags/aws:",
                                                                             "resource_tags_aws_"): v
              for k, v in athena.items()}
    assert read(tmp_path, [athena], "Tags") == [({"team": "nlp", "aws:createdBy": "root"},)]
    cur2 = {snake(k): v for k, v in untagged.items()}
    cur2["resource_tags"] = json.dumps({"user_team": "nlp", "aws_created_by": "root", "user_owner": ""})
    assert read(tmp_path, [cur2], "Tags") == [({"team": "nlp", "aws:created_by": "root"},)]


@pytest.mark.parametrize("layout", ["legacy", "athena"])
@pytest.mark.parametrize("container", ["csv", "parquet", "json"])
@pytest.mark.parametrize("order", [("team", "Team", "Team_1"), ("team", "Team_1", "Team")])
def test_tags_that_differ_only_in_case_are_two_tags(tmp_path, layout, container, order):
    """AWS tag keys are case-sensitive: `team` and `Team` are two tags, each read by its own column, whatever
    name DuckDB gives the second (`..._1`; a tag of that very name is a third, and where it comes first DuckDB
    names `Team` `..._Team_1_1`). Kept as the store keeps tags: folded by case, so both where `team` is read,
    neither where it is not (was refused: one name to DuckDB)."""
    prefix = "resourceTags/user:" if layout == "legacy" else "resource_tags_user_"
    values = {"team": "nlp", "Team": "vision", "Team_1": "x"}
    rows = [line(**{f"{prefix}{k}": values[k] for k in order}), line(**{f"{prefix}Team": "cv"})]
    header = list(dict.fromkeys(k for r in rows for k in r))
    path = tmp_path / f"cur.{container}"
    if container == "csv":
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, header, lineterminator="\n", restval="")
            w.writeheader()
            w.writerows(rows)
    elif container == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table([pa.array([r.get(k) for r in rows], pa.string()) for k in header], names=header),
                       path)
    else:
        path.write_text("".join("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(r.get(k))}" for k in header) + "}\n"
                                for r in rows), encoding="utf-8")
    for keys, want in [(None, [{"team": "nlp", "Team": "vision", "Team_1": "x"}, {"Team": "cv"}]),
                       (["TEAM"], [{"team": "nlp", "Team": "vision"}, {"Team": "cv"}]), (["owner"], [{}, {}])]:
        store = Store(tag_keys=keys)
        assert store.load_file(path).format == "aws-cur"
        got = store.lines().execute("SELECT Tags, BilledCost FROM lines ORDER BY x_SourceRow").fetchall()
        assert got == [(t, D("1.00")) for t in want], (keys, got)


def test_capacity_reservations(tmp_path):
    """CUR 2.0's capacity reservation columns where present (status in any case); else the reservation's ARN as
    the line's resource, unused by its usage type (`UnusedBox`, `Reservation:`), used by its usage."""
    cr = "arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-1"
    rows = [line(lineItem__ResourceId=cr, lineItem__UsageType="USE1-UnusedBox:p5.48xlarge"),
            line(lineItem__ResourceId=cr, lineItem__UsageType="USE1-Reservation:p5.48xlarge"),
            line(lineItem__ResourceId=cr),
            line("Fee", lineItem__ResourceId=cr),
            line(**{"capacityReservation/CapacityReservationArn": "cr-2",
                    "capacityReservation/CapacityReservationStatus": "UNUSED"}),
            line(**{"capacityReservation/CapacityReservationArn": "cr-2",
                    "capacityReservation/CapacityReservationStatus": "Used"}),
            line(**{"capacityReservation/CapacityReservationArn": "cr-2",
                    "capacityReservation/CapacityReservationStatus": "Pending"}),
            line(**{"capacityReservation/CapacityReservationArn": "cr-2",
                    "capacityReservation/CapacityReservationStatus": "USED"}),
            line()]
    assert read(tmp_path, rows, "CapacityReservationId, CapacityReservationStatus") == [
        (cr, "Unused"), (cr, "Unused"), (cr, "Used"), (cr, None), ("cr-2", "Unused"), ("cr-2", "Used"),
        ("cr-2", "Pending"), ("cr-2", "Used"), (None, None)]


def test_split_cost_allocation(tmp_path):
    """A pod's line of split cost allocation carries its share of its instance's cost and of the instance's
    unused capacity; its resource is the pod, its parent the instance."""
    rows = [line(cost="0.00", lineItem__ResourceId="pod-1", splitLineItem__ParentResourceId="i-0abc",
                 splitLineItem__SplitCost="0.75", splitLineItem__UnusedCost="0.25"),
            line()]
    assert read(tmp_path, rows, "x_SplitResourceId, x_SplitParentId, x_SplitMethod, x_SplitCost, "
                                "x_SplitUnusedCost") == [
        ("pod-1", "i-0abc", "aws-split-cost-allocation", D("0.75"), D("0.25")), (None, None, None, None, None)]
    assert read(tmp_path, [line()], "x_SplitResourceId, x_SplitParentId, x_SplitMethod") == [(None, None, None)]
    # a parent without the split cost column: no split cost allocation, so nothing is split
    parent_only = [line(lineItem__ResourceId="pod-1", splitLineItem__ParentResourceId="i-0abc")]
    assert read(tmp_path, parent_only, "ResourceId, x_SplitResourceId, x_SplitParentId, x_SplitMethod") == [
        ("pod-1", None, None, None)]


def test_the_region_and_currency_of_a_line_another_way(tmp_path):
    """A legacy CUR without product/regionCode names its region in product/region; a line billed in euros keeps its
    currency and its amounts as written; its usage type is lineItem/UsageType as written."""
    row = {k: v for k, v in line(cost="3.40").items() if k != "product/regionCode"}
    rows = [row | {"product/region": "eu-central-1", "lineItem/CurrencyCode": "EUR"}]
    assert read(tmp_path, rows, "RegionId, BillingCurrency, BilledCost, EffectiveCost, x_UsageType") == [
        ("eu-central-1", "EUR", D("3.40"), D("3.40"), "BoxUsage:p4d.24xlarge")]


def test_the_region_code_read_first_and_without_a_zone(tmp_path):
    """product/regionCode is the region, where the line names no zone; where it is empty, product/region; where a
    file has both, the code is read first."""
    rows = [line(product__regionCode="ap-northeast-1", product__region="eu-central-1"),
            line(product__regionCode="", product__region="eu-central-1"),
            line(product__regionCode="", product__region="")]
    assert read(tmp_path, rows, "RegionId") == [("ap-northeast-1",), ("eu-central-1",), (None,)]
    only = [line(product__regionCode="sa-east-1")]
    assert read(tmp_path, only, "RegionId, AvailabilityZone") == [("sa-east-1", None)]


def test_transfer_regions_from_the_product_columns_alone(tmp_path):
    """A us-east-1 usage type has no prefix: the line's source region is product/fromRegionCode, else the region
    product/fromLocation names; its destination product/toRegionCode, else the region product/toLocation names."""
    def transfer(usage_type, **over):
        return line(lineItem__UsageType=usage_type, product__productFamily="Data Transfer", **over)

    rows = [transfer("DataTransfer-Out-Bytes", product__fromRegionCode="us-east-1"),
            transfer("DataTransfer-Out-Bytes", product__transferType="InterRegion Outbound",
                     product__fromLocation="Asia Pacific (Mumbai)", product__toLocation="EU (Ireland)"),
            transfer("DataTransfer-Out-Bytes", product__transferType="InterRegion Outbound",
                     product__fromRegionCode="us-east-1", product__toRegionCode="us-west-2",
                     product__fromLocation="EU (Ireland)", product__toLocation="Europe (Ireland)")]
    got = read(tmp_path, rows, "x_TransferKind, x_TransferDirection, x_TransferFrom, x_TransferTo")
    assert got == [("internet", "out", "us-east-1", None), ("inter_region", "out", "ap-south-1", "eu-west-1"),
                   ("inter_region", "out", "us-east-1", "us-west-2")]


@pytest.mark.parametrize(("column", "kind", "bad", "want"), [
    ("lineItem/UnblendedCost", "Usage", "12,50", "a number"),
    ("lineItem/UsageAmount", "Usage", "1 h", "a number"),
    ("pricing/publicOnDemandCost", "Usage", "n/a", "a number"),
    ("splitLineItem/SplitCost", "Usage", "0,75", "a number"),
    ("splitLineItem/UnusedCost", "Usage", "0,25", "a number"),
    ("lineItem/UsageStartDate", "Usage", "12/09/2023 11h", "a UTC time like 2026-07-01T00:00:00Z"),
    ("lineItem/UsageEndDate", "Usage", "12/09/2023 12h", "a UTC time like 2026-07-01T00:00:00Z"),
    ("reservation/EndTime", "DiscountedUsage", "next year", "a UTC time like 2026-07-01T00:00:00Z"),
    ("savingsPlan/EndTime", "SavingsPlanCoveredUsage", "never", "a UTC time like 2026-07-01T00:00:00Z"),
])
def test_a_value_that_does_not_parse_is_named_by_line_and_column(tmp_path, column, kind, bad, want):
    """Each money and time column the reader parses: a value that is no number or no time is named with the file,
    its line (the file's third: the header, a good line, the bad one) and its column."""
    good = {"lineItem/UsageAmount": "1", "pricing/publicOnDemandCost": "1.00", "splitLineItem/SplitCost": "0.00",
            "splitLineItem/UnusedCost": "0.00", "reservation/EndTime": "2025-01-01T00:00:00Z",
            "savingsPlan/EndTime": "2025-01-01T00:00:00Z", "splitLineItem/ParentResourceId": "i-0abc"}
    rows = [line(kind, **{k.replace("/", "__"): v for k, v in good.items()}),
            line(kind, **{k.replace("/", "__"): v for k, v in (good | {column: bad}).items()})]
    header = list(rows[0])
    path = tmp_path / "cur.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(InputError) as err:
        Store().load_billing([path])
    assert str(err.value) == f"{path}:3: column {column!r}: {bad!r} is not {want}"

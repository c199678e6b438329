"""The `aws:pricing` source (with `--prices`): on-demand Linux prices of the GPU instance types seen (and of the
SageMaker jobs' types), from the Pricing API, kept in the inventory's `prices` as evidence."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from auditor.providers.live.aws_account import Account, throttled
from auditor.providers.live.pull import Pull, pages


def pricing(p: Pull, account: Account) -> dict[str, int]:
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

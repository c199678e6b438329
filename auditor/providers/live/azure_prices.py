"""The `azure:prices` source (with `--prices`): pay-as-you-go Linux prices of the GPU sizes seen, per region, from
the Azure Retail Prices API (no credential; OData `$filter`, every `NextPageLink` followed), kept in the
inventory's `prices` as evidence; spot, low-priority and Windows meters are left out. Prices are read as exact
decimals."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from auditor.providers.live.azure_rest import GPU_SIZE, Rest
from auditor.providers.live.pull import Pull

PRICES = "https://prices.azure.com"
PRICES_API = "2023-01-01-preview"


def prices(p: Pull, base: str) -> dict[str, int]:
    """Pay-as-you-go Linux prices of the GPU sizes this pull saw, in each region seen."""
    from auditor.providers.catalog import load_catalog

    catalog = load_catalog()
    seen = [(x["instance_type"], x["region"]) for x in p.assets + p.jobs
            if x["provider"] == "azure" and x.get("instance_type") and x.get("region")]
    wanted: dict[tuple[str, str], tuple[str, str]] = {}
    for size, region in seen:  # the API's filter is case-sensitive: the catalog's spelling where it has one
        t = catalog.instance("azure", size)
        if t or GPU_SIZE.match(size):
            wanted.setdefault((size.lower(), region.lower()), (t.name if t else size, region.lower()))
    rest = Rest(p, base, link="NextPageLink", parse_float=Decimal)  # money stays exact
    found = 0
    for size, region in sorted(wanted.values()):
        odata = (f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' and armSkuName eq '{size}' "
                 "and priceType eq 'Consumption'")
        pages = rest.pages("/api/retail/prices", **{"api-version": PRICES_API, "$filter": odata})
        items = [item for page in pages for item in page.get("Items") or []]
        best = retail_price(items)
        if best:
            p.prices.append({"provider": "azure", "instance_type": size, "region": region,
                             "price_per_hour": str(best["retailPrice"]), "currency": best.get("currencyCode") or "USD",
                             "source": "Azure Retail Prices API"})
            found += 1
    return {"sizes": len(wanted), "prices": found}


def retail_price(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pay-as-you-go Linux meter among Retail Prices items: not spot, low priority or Windows; hourly; the
    primary meter region and the latest effective date first."""
    def plain(i: dict) -> bool:
        names = (str(i.get("skuName") or ""), str(i.get("meterName") or ""))
        return (i.get("type") == "Consumption" and i.get("unitOfMeasure") == "1 Hour"
                and not any(n.endswith((" Spot", " Low Priority")) for n in names)
                and not str(i.get("productName") or "").endswith(" Windows")
                and Decimal(str(i.get("retailPrice") or 0)) > 0)

    return max((i for i in items if plain(i)), default=None,
               key=lambda i: (bool(i.get("isPrimaryMeterRegion")), str(i.get("effectiveStartDate") or "")))

"""The `gcp:<project>:prices` source (with `--prices`): per-GPU hourly prices of the GPU models the project runs,
in its regions, from the Cloud Billing Catalog (google-cloud-billing, REST): Compute Engine's GPU SKUs, on demand
and Spot, read once a pull. Kept in the inventory's `prices` as evidence, one entry per SKU and region:
`instance_type` is `gpu:<model>` (on demand) or `gpu:<model>:spot`, the SKU id and description in `source`."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from google.auth.credentials import Credentials

from auditor.providers.live.gcp_api import TIMEOUT, client_options, list_pages
from auditor.providers.live.pull import Pull, gpu_model

COMPUTE_ENGINE = "services/6F81-5844-456A"  # Compute Engine in the Cloud Billing Catalog
# A GPU's own SKU, on demand or Spot: "Nvidia Tesla A100 GPU running in Americas", "Spot Preemptible Nvidia L4
# GPU running in Americas". Commitments, Virtual Workstation licences and other variants do not match.
GPU_SKU = re.compile(r"(?:Spot Preemptible )?Nvidia (?:Tesla )?(?P<gpu>[A-Z]+\d+[A-Z]*(?: \d+GB)?(?: Mega)?) "
                     r"GPU running in [\w ]+", re.I)
USAGE_TYPES = {"OnDemand": "", "Preemptible": ":spot"}  # the SKU's usage type -> suffix of the price's name


def gpu_skus(p: Pull, credentials: Credentials, endpoint: str | None) -> list[dict[str, Any]]:
    """Compute Engine's hourly GPU SKUs, on demand and Spot, every page of `list_skus`."""
    from google.cloud import billing_v1

    out = []
    with billing_v1.CloudCatalogClient(credentials=credentials, transport="rest",
                                       client_options=client_options(endpoint)) as client:
        for page in list_pages(p, client.list_skus, {"retry": None, "timeout": TIMEOUT},
                               parent=COMPUTE_ENGINE, currency_code="USD", page_size=5000):
            for sku in page.skus:
                m = GPU_SKU.fullmatch(sku.description)
                suffix = USAGE_TYPES.get(sku.category.usage_type)
                if not m or suffix is None or sku.category.resource_group != "GPU" or not sku.pricing_info:
                    continue
                expression = sku.pricing_info[0].pricing_expression  # the current price: no time range was asked
                rate = next((r for r in expression.tiered_rates if not r.start_usage_amount), None)
                if expression.usage_unit != "h" or rate is None:
                    continue
                price = Decimal(rate.unit_price.units) + Decimal(rate.unit_price.nanos).scaleb(-9)  # exact
                model = gpu_model(m["gpu"])
                out.append({"model": model, "name": f"gpu:{model}{suffix}",
                            "regions": set(sku.service_regions), "price": format(price.normalize(), "f"),
                            "currency": rate.unit_price.currency_code or "USD",
                            "source": f'Cloud Billing Catalog API, SKU {sku.sku_id} "{sku.description}", per GPU'})
    return out


def prices(p: Pull, skus: Callable[[], list[dict[str, Any]]], project: str) -> dict[str, int]:
    """Per-GPU hourly prices of the GPU models this project's instances and jobs use, in their regions (`skus`:
    `gpu_skus`, read once a pull)."""
    seen = [x for x in p.assets + p.jobs if x["provider"] == "gcp" and x["account"] == project and x.get("gpu_model")]
    models, regions = {x["gpu_model"] for x in seen}, {x["region"] for x in seen}
    if not models:
        return {"prices": 0}
    found = 0
    for sku in skus():
        if sku["model"] not in models:
            continue
        for region in sorted(regions & sku["regions"]):
            p.prices.append({"provider": "gcp", "instance_type": sku["name"], "region": region,
                             "price_per_hour": sku["price"], "currency": sku["currency"], "source": sku["source"]})
            found += 1
    return {"prices": found}

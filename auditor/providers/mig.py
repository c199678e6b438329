"""MIG profiles per GPU product (auditor/data/mig_profiles.yaml, from NVIDIA's MIG user guide) and what a slice
of each takes of its GPU.

A slice blocks max(memory slices / 8, compute slices / 7) of its GPU (of 4 and 4 on an A30): no other instance
can use the memory or the compute it holds. A node's slices are then counted together (`slice_shares`): where
they cover its MIG GPUs (every GPU cut as far as its profiles go, as NVIDIA's `all-<profile>` layouts and the
single strategy cut them) or claim more than them (a 4g and a 3g on one GPU: 4/7 + 4/8), their shares are
scaled to add up to those GPUs exactly, so a fully cut GPU is fully allocated and never more.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from importlib import resources

import yaml

PROFILE = re.compile(r"^(\d+)g\.(\d+)gb(\+me)?$")


@dataclass(frozen=True)
class Profile:
    name: str  # 3g.40gb
    compute: int  # compute slices
    memory: int  # memory slices
    instances: int  # at most, per GPU
    placements: tuple[int, ...]  # the memory slice each possible instance starts at


@dataclass(frozen=True)
class Product:
    name: str  # A100-80GB
    models: tuple[str, ...]  # the catalog's GPU model names
    compute_slices: int
    memory_slices: int
    profiles: dict[str, Profile]

    def blocks(self, profile: str) -> Fraction | None:
        """The share of one GPU a slice of `profile` takes from every other use, None for a profile not in the
        table."""
        p = self.profiles.get(profile)
        if p is None:
            return None
        return max(Fraction(p.memory, self.memory_slices), Fraction(p.compute, self.compute_slices))


@cache
def products() -> dict[str, Product]:
    text = resources.files("auditor.data").joinpath("mig_profiles.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    return {name: Product(name, tuple(p["models"]), int(p["compute_slices"]), int(p["memory_slices"]),
                          {prof: Profile(prof, int(c), int(m), int(n), tuple(int(x) for x in where))
                           for prof, (c, m, n, where) in p["profiles"].items()})
            for name, p in data["products"].items()}


def product_for(model: str | None, profiles: Iterable[str] = ()) -> Product | None:
    """The table of a GPU model (the catalog's name, e.g. `A100-80GB`); without one, the table every profile
    belongs to, where the tables that hold them all agree on what each blocks (`1g.10gb` alone is an A100 40GB's
    two memory slices or an A100 80GB's one: no table is chosen)."""
    by_model = next((p for p in products().values() if model in p.models), None) if model else None
    if by_model:
        return by_model
    wanted = [p for p in profiles if p]
    if not wanted:
        return None
    fits = [p for p in products().values() if all(w in p.profiles for w in wanted)]
    if fits and all(f.blocks(w) == fits[0].blocks(w) for f in fits for w in wanted):
        return fits[0]
    return None


def compute_share(profile: str, compute_slices: int = 7) -> Fraction:
    """A profile's compute slices out of the GPU's: the share of a profile no table holds."""
    m = PROFILE.match(profile or "")
    return Fraction(min(int(m.group(1)), compute_slices), compute_slices) if m else Fraction(1)


def blocks(model: str | None, profile: str) -> Fraction:
    """What one slice of `profile` takes of its GPU: from the product's table, else its compute slices of 7
    (of 4 on an A30)."""
    product = product_for(model, [profile])
    share = product.blocks(profile) if product else None
    if share is not None:
        return share
    return compute_share(profile, 4 if model == "A30" else 7)


def slice_shares(model: str | None, slices: dict[str, int], gpus: int) -> dict[str, Fraction]:
    """Each profile's share of a GPU per slice, for a node whose `gpus` MIG GPUs are cut into `slices`
    (profile -> MIG devices on the node). Where the slices fill the GPUs (each profile's count over its
    instances per GPU adds up to the GPUs or more) or block more than them, the shares are scaled to add up
    to the GPUs exactly; otherwise each is what it blocks, and the rest of the GPUs is unallocated."""
    product = product_for(model, slices)
    share = {p: blocks(product.models[0] if product else model, p) for p in slices}
    taken = sum((n * share[p] for p, n in slices.items()), Fraction(0))
    if gpus <= 0 or not taken:
        return share
    filled = (product is not None and all(p in product.profiles for p in slices)
              and sum((Fraction(n, product.profiles[p].instances) for p, n in slices.items()), Fraction(0)) >= gpus)
    if filled or taken > gpus:
        scale = Fraction(gpus) / taken
        return {p: s * scale for p, s in share.items()}
    return share


def gpus_cut(model: str | None, slices: dict[str, int]) -> int:
    """The fewest GPUs that hold `slices` (profile -> MIG devices): their compute slices fit, their memory
    slices fit, and no profile has more instances on a GPU than its table allows."""
    product = product_for(model, slices)
    c_total, m_total = (product.compute_slices, product.memory_slices) if product else (7, 8)
    compute, memory, least = Fraction(0), Fraction(0), 0
    for p, n in slices.items():
        prof = product.profiles.get(p) if product else None
        c = prof.compute if prof else int(compute_share(p, c_total) * c_total)
        compute += n * Fraction(c, c_total)
        memory += n * Fraction(prof.memory if prof else c, m_total)
        least = max(least, -(-n // prof.instances) if prof else 0)
    return max(least, math.ceil(compute), math.ceil(memory))

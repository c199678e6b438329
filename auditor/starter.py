"""The commented starter policy `gpu-auditor policy init` writes, generated from the rule pack so that
every clause and option it shows exists."""

from __future__ import annotations

import json

from auditor.registry import iter_clauses

HEADER = """\
# The team's written GPU policy, read by gpu-auditor.
# Each clause carries the sentence people read (text) and the numbers the rules use; the audit report
# quotes the text and shows compliance clause by clause. Check this file with:
#   gpu-auditor policy validate {name}
policy: Our ML GPU policy
version: "1"
owner: finops@example.com        # the policy owner; gets what no team owns
currency: USD

# Cost-allocation tags that say who owns a resource. A project tag maps to a team through teams.*.projects.
attribution:
  team_tags: [team]
  owner_tags: [owner]
  project_tags: [project]

teams:
  research: {{lead: lead-research@example.com, budget_per_quarter: 100000, gpu_hours_per_quarter: 20000,
             projects: [example-project]}}

clauses:
"""

TEXTS = {
    "idle": "A GPU machine that averages under 10% utilisation over a day is shut down.",
    "rightsizing": "Workloads run on the cheapest GPU type that holds their memory with 20% headroom.",
    "tagging": "Every resource carries team, owner and project tags.",
    "egress": "Training reads its data in its own region; inter-region copies stay under 1 TB a month.",
    "spot_checkpoint": "Spot training jobs checkpoint to durable storage at least hourly.",
    "spot_serving": "A server on spot GPUs runs at least two replicas, drains within its grace period, and has a "
                    "disruption budget.",
    "sweeps": "Hyperparameter sweeps stop bad trials early, cap their trials, and stay within a worst-case budget.",
    "spot_opportunity": "Training jobs that checkpoint run on spot capacity, which costs 60-90% less.",
    "spot_configuration": "A spot job's maximum wait leaves room for interruptions, and interruptions cost "
                          "it at most 10% of its training.",
    "forgotten_capacity": "Every GPU machine has an owner and reports its utilisation.",
    "stopped_capacity": "A stopped GPU machine gives up its disks and reservations within a week.",
    "forgotten_in_billing": "Every GPU machine the bill shows running has an owner, a job and a place in the "
                            "inventory; one billed around the clock with none of them is stopped.",
    "capacity_reservations": "A GPU capacity reservation is cancelled once the work it was made for is done: at "
                             "most 10% of what one costs is hours that ran nothing.",
    "budget": "Each team stays within its quarterly budget, in dollars and GPU-hours.",
    "attribution_target": "At most 5% of GPU spend belongs to no team.",
    "data_locality": "GPUs train in the region that holds their data.",
    "commitments": "GPU reservations are used: at most 10% of what one costs goes unused.",
    "commitment_coverage": "GPU capacity that runs every hour on demand is covered by a savings plan, reservation "
                           "or committed-use discount.",
    "commitment_renewal": "A GPU commitment that ends next quarter is renewed or replaced before it ends.",
    "checkpoint_storage": "Checkpoint buckets have a lifecycle rule; nothing grows in the hot tier forever.",
    "shared_gpu_idle": "A pod that holds a GPU slice (MIG, time-sliced or whole) uses it: under 5% engine "
                       "activity over a day and the slice is given back.",
    "shared_gpu_rightsizing": "Pods run on the smallest MIG profile that holds their memory with 20% headroom.",
    "gpu_allocation": "GPU nodes are kept full: at most a quarter of a node's GPU-hours go to no pod.",
    "waiver_expiry": "A waiver past its expiry date is renewed with a fresh reason, or removed.",
}

FOOTER = """
# Exceptions, with a reason, an owner and an expiry date; an expired waiver stops waiving and is reported.
waivers: []
#  - {rule: GPU002, resource: "i-0abc*", reason: benchmark rig, owner: lead@example.com, expires: 2027-01-31}
"""


def starter_policy(name: str = "gpu-policy.yml") -> str:
    out = [HEADER.format(name=name)]
    for clause, rules in iter_clauses():
        ids = ", ".join(f"{r.id} {r.name}" for r in rules)
        out.append(f"  # {ids}\n  {clause}:\n")
        out.append(f"    text: {json.dumps(TEXTS.get(clause, rules[0].summary()))}\n")
        options = {k: f for r in rules for k, f in r.options.items()}  # rules of one clause may share a key
        for key, f in options.items():
            out.append(f"    {key}: {json.dumps(f.default)}    # {f.doc}\n")
    out.append(FOOTER)
    return "".join(out)

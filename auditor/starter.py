"""The commented starter policy `gpu-auditor policy init` writes, generated from the rule pack so that
every clause and option it shows exists."""

from __future__ import annotations

import json

from auditor.rule import iter_clauses

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
  research: {{lead: lead-research@example.com, budget_per_quarter: 100000, projects: [example-project]}}

clauses:
"""

TEXTS = {
    "idle": "A GPU machine that averages under 10% utilisation over a day is shut down.",
    "rightsizing": "Workloads run on the cheapest GPU type that holds their memory with 20% headroom.",
    "tagging": "Every resource carries team, owner and project tags.",
    "egress": "Training reads its data in its own region; inter-region copies stay under 1 TB a month.",
    "spot_checkpoint": "Spot training jobs checkpoint to durable storage at least hourly.",
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
        for r in rules:
            for key, f in r.options.items():
                out.append(f"    {key}: {json.dumps(f.default)}    # {f.doc}\n")
    out.append(FOOTER)
    return "".join(out)

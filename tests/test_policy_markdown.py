"""`policy render`: the written policy as Markdown, stated in advance for a small policy (every part of the text:
header, attribution, teams, each clause's sentence, rules, severity and settings, the rules without a clause, the
waivers and their status)."""

from __future__ import annotations

from datetime import date

from auditor.policy import parse_policy, render_markdown
from auditor.registry import get_rule, iter_clauses

POLICY = (
    'policy: Small *GPU* policy\n'
    'version: 2026.10\n'
    'owner: finops@example.com\n'
    'currency: EUR\n'
    'attribution: {team_tags: [team, squad], owner_tags: [owner, contact], project_tags: [project, proj]}\n'
    'teams:\n'
    '  vision: {lead: lead-vision@example.com, budget_per_quarter: 1234567.5, gpu_hours_per_quarter: 20000.4, '
    'projects: [detector, seg_model]}\n'
    '  nlp: {lead: lead-nlp@example.com}\n'
    'clauses:\n'
    '  idle:\n'
    '    text: "Idle   GPUs are shut down."\n'
    '    severity: critical\n'
    '    max_mean_util_pct: 15\n'
    '    min_hours: 24\n'
    '  egress: {enabled: false}\n'
    '  tagging: {required_tags: [team, "co  st"]}\n'
    '  job_budget: {text: "Jobs | capped", max_share_of_team_budget_pct: 50, require_max_runtime: false}\n'
    '  regions: {allowed_regions: [us-east-1, "eu-*"]}\n'
    '  gpu_types: {workload_tags: []}\n'
    'waivers:\n'
    '  - {rule: GPU002, resource: "i-0abc*", reason: benchmark rig, owner: lead-vision@example.com, expires: '
    '2026-11-26}\n'
    '  - {rule: idle-gpu, resource: "i-1`x`  y", reason: "a | b", owner: lead-nlp@example.com, expires: 2026-11-25}\n'
)

# Everything before the rules without a clause: version as written, amounts with thousands separators (GPU-hours
# rounded to whole hours), Markdown escaped, code spans with their backticks made quotes and their spaces collapsed,
# a setting equal to its default marked so, the clauses in the pack's order.
HEAD = (
    '# Small \\*GPU\\* policy\n'
    '\n'
    'Version 2026.10 · owner finops@example.com · amounts in EUR\n'
    '\n'
    'Who owns a resource is read from its tags: team from `team`, `squad`, owner from `owner`, `contact`, and a '
    'project tag '
    '(`project`, `proj`) maps to the team that lists the project. What nobody owns goes to finops@example.com.\n'
    '\n'
    '## Teams and budgets\n'
    '\n'
    '| Team | Lead | Budget per quarter | GPU-hours per quarter | Projects |\n'
    '|---|---|---:|---:|---|\n'
    '| vision | lead-vision@example.com | 1,234,567.50 EUR | 20,000 | detector, seg\\_model |\n'
    '| nlp | lead-nlp@example.com | – | – | – |\n'
    '\n'
    '## Clauses\n'
    '\n'
    '### egress\n'
    '\n'
    "> Data copied between regions beyond the policy's monthly limit.\n"
    '\n'
    'Checked by NET001 cross-region-egress · severity medium · **disabled**\n'
    '\n'
    '| Setting | Value | Meaning |\n'
    '|---|---|---|\n'
    '| `max_gb_per_month` | `1000` (default) | inter-region GB a month allowed per source and destination |\n'
    '\n'
    '### gpu_types\n'
    '\n'
    '> Job on a GPU type the policy does not allow for its workload, or needing approval it lacks.\n'
    '\n'
    'Checked by GPU003 disallowed-gpu-type; GPU004 unknown-gpu-type · severity high\n'
    '\n'
    '| Setting | Value | Meaning |\n'
    '|---|---|---|\n'
    "| `allowed` | `{}` (default) | workload -\\> GPU models allowed for it; '\\*' for any other workload; empty "
    "allows all |\n"
    "| `workload_tags` | (none) | tags or labels that name a job's workload |\n"
    '| `default_workload` | `training` (default) | workload of a job that neither a label nor its platform names |\n'
    '| `approval_required` | (none) (default) | GPU models a job may use only with an approval label |\n'
    '| `approval_tags` | `gpu-approval` (default) | tags or labels whose non-empty value records the approval |\n'
    '\n'
    '### idle\n'
    '\n'
    '> Idle GPUs are shut down.\n'
    '\n'
    'Checked by GPU001 idle-gpu · severity critical\n'
    '\n'
    '| Setting | Value | Meaning |\n'
    '|---|---|---|\n'
    '| `max_mean_util_pct` | `15` | mean GPU utilisation below which a machine is idle |\n'
    '| `min_hours` | `24` (default) | hours of utilisation data needed before judging |\n'
    '\n'
    '### job_budget\n'
    '\n'
    '> Jobs \\| capped\n'
    '\n'
    'Checked by BUD002 job-cost-cap · severity high\n'
    '\n'
    '| Setting | Value | Meaning |\n'
    '|---|---|---|\n'
    '| `max_job_cost` | (none) (default) | projected cost one job run may reach, USD; unset: no cap |\n'
    "| `max_share_of_team_budget_pct` | `50` | share of its team's quarterly budget one job may project |\n"
    '| `require_max_runtime` | no | with a cap set, flag a GPU training job that sets no maximum runtime |\n'
    '\n'
    '### regions\n'
    '\n'
    '> Training job placed in a region the policy does not allow.\n'
    '\n'
    'Checked by REG001 region-not-allowed · severity high\n'
    '\n'
    '| Setting | Value | Meaning |\n'
    '|---|---|---|\n'
    '| `allowed_regions` | `us-east-1`, `eu-*` | region codes \\(or globs\\) jobs may run in; empty allows all |\n'
    '\n'
    '### tagging\n'
    '\n'
    "> Spend on resources that lack the policy's required cost-allocation tags.\n"
    '\n'
    'Checked by TAG001 missing-required-tags; TAG002 job-missing-labels · severity medium\n'
    '\n'
    '| Setting | Value | Meaning |\n'
    '|---|---|---|\n'
    '| `required_tags` | `team`, `co st` | tag keys every resource must carry |\n'
    '| `min_cost` | `1` (default) | smallest untagged cost worth a finding |\n'
    "| `label_patterns` | `{}` (default) | label -\\> regular expression its whole value must match, e.g. owner: "
    "'\\[a-z.\\]\\+@example\\\\.com' |\n"
    '\n'
)

WAIVERS = (
    '## Waivers\n'
    '\n'
    '| Rule | Resources | Reason | Owner | Expires | Status |\n'
    '|---|---|---|---|---|---|\n'
    '| GPU002 | `i-0abc*` | benchmark rig | lead-vision@example.com | 2026-11-26 | active (0 days left) |\n'
    "| GPU001 | `i-1'x' y` | a \\| b | lead-nlp@example.com | 2026-11-25 | **expired** (1 days ago) |\n"
    '\n'
    '_Rendered by gpu-auditor on 2026-11-26; waiver status as of that day._\n'
)


def render(text: str = POLICY, today: date = date(2026, 11, 26)) -> str:
    return render_markdown(parse_policy(text, "p.yml"), today)


def test_small_policy_rendered_whole():
    md = render()
    assert md.startswith(HEAD + "### Rules without a clause of their own\n\n"
                         "These run with their defaults until the policy sets a clause for them:\n\n")
    assert md.endswith("\n\n" + WAIVERS)


def test_rules_without_a_clause_listed_with_their_defaults():
    md = render()
    rest = md.split("for them:\n\n")[1].split("\n\n## Waivers")[0].split("\n")
    written = {"egress", "idle", "job_budget", "regions", "tagging", "gpu_types"}
    expected = [(c, r.id) for c, rules in iter_clauses() if c not in written for r in rules]
    assert [tuple(line.split(" ")[1:3]) for line in rest] == [(f"`{c}`:", i) for c, i in expected]
    assert ("- `capacity_reservations`: COM002 unused-capacity-reservation: Reserved GPU capacity paid for hours that "
            "ran nothing. (`max_unused_pct`: `10`, `min_unused_cost`: `50`, `gpu_only`: yes)") in rest
    assert ("- `commitment_coverage`: COM004 uncommitted-gpu-baseline: Steady on-demand GPU spend that a savings plan, "
            "reservation or committed-use discount would cover. (`min_floor_per_hour`: `5`, `commit_pct`: `100`, "
            "`discount_pct`: `{}`, `term`: `1y`, `discount_as_of`: (none), `discount_source`: (none))") in rest
    assert ("- `waiver_expiry`: POL001 expired-waiver: Waiver in the policy past its expiry date: it no longer "
            "waives, and someone must renew or drop it. (`grace_days`: `0`)") in rest


def test_minimal_policy_rendered():
    md = render("policy: P\nowner: o@example.com\n", date(2026, 1, 1))
    assert md.startswith(
        "# P\n\nVersion 1 · owner o@example.com · amounts in USD\n\n"
        "Who owns a resource is read from its tags: team from `team`, owner from `owner`, and a project tag "
        "(`project`) maps to the team that lists the project. What nobody owns goes to o@example.com.\n\n"
        "## Teams and budgets\n\nNo teams are named: every finding goes to the policy owner.\n\n"
        "## Clauses\n\n### Rules without a clause of their own\n\n")
    # a rule with no options is listed without parentheses
    assert "\n- `gpu_types`: GPU004 unknown-gpu-type: Job that asks for a GPU or instance type the bundled catalog " \
           "does not know.\n" in md
    assert md.endswith("\n\n## Waivers\n\nNo waivers.\n\n"
                       "_Rendered by gpu-auditor on 2026-01-01; waiver status as of that day._\n")


def test_a_clause_of_rules_of_different_severities_names_each_once(monkeypatch):
    monkeypatch.setattr(get_rule("TAG002"), "severity", get_rule("GPU001").severity)  # medium -> high
    md = render("policy: P\nowner: o@example.com\nclauses:\n  tagging: {}\n")
    assert "\nChecked by TAG001 missing-required-tags; TAG002 job-missing-labels · severity medium/high\n" in md

"""Per-rule YAML test cases (the sqlfluff and checkov way): entities in, the exact set of flagged ids out.

A case file `fixtures/rules/<ID>.yml`:

    rule: GPU001
    options: {max_mean_util_pct: 10}        # defaults for every case (optional)
    idle_machine_fails:
      entities:
        - {id: i-1, provider: aws, instance_type: p5.48xlarge, usage_hours: 720, mean_util_pct: 2}
      fail: [i-1]                           # the exact set of flagged resource ids
      message_contains: "2.0%"              # optional
      findings:                             # optional: what a flagged resource's finding states, exactly
        i-1: {cost: "812.40", monthly_savings: "823.68", currency: USD, wasted: "812.40",
              message: "...", evidence: {mean_util_pct: 2.0, ...}}   # any of these keys; evidence whole
    busy_machine_passes:
      options: {max_mean_util_pct: 5}       # per-case options (optional)
      entities: [...]
      fail: []
    negative_threshold_is_refused:
      options: {max_mean_util_pct: -1}
      refused: "must be at least 0"         # the policy with these options is refused when it loads, so
                                            # saying (no entities needed)

Entity fields are those of the rule's entity class (auditor.model); money maps such as
`cost: {USD: "812.40"}` become Decimals. The window is 2026-Q3 unless a case sets `window: 2026-Q2`.
Public, so a third-party rule pack can test its rules the same way.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from auditor.context import Context
from auditor.model import Finding
from auditor.policy import parse_policy
from auditor.providers.catalog import load_catalog
from auditor.registry import get_rule
from auditor.schema import parse_datetime
from auditor.window import parse_quarter

# libyaml's safe loader where PyYAML has it: the rule cases are read at every test collection, and the pure-Python
# loader takes seconds over them.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
CASE_KEYS = {"entities", "fail", "options", "message_contains", "window", "description", "rates", "refused",
             "findings"}
# what a case may state of a flagged resource's finding (`findings:`); the amounts as strings, compared as Decimals
FINDING_KEYS = {"cost", "monthly_savings", "wasted", "currency", "message", "evidence", "severity", "confidence",
                "team", "owner", "key"}  # key: what makes the fingerprint unique beyond rule and resource
POLICY = ("policy: rule test policy\nowner: owner@example.com\n"
          "teams:\n  vision: {lead: lead@example.com, projects: [detector]}\n"
          "  recsys: {lead: lead-recsys@example.com, budget_per_quarter: 10000}\n")  # BUD002's team budget


@dataclass
class Case:
    id: str
    rule: str
    name: str
    entities: list[dict[str, Any]]
    fail: set[str]
    options: dict[str, Any] = field(default_factory=dict)
    message_contains: str | None = None
    window: str = "2026-Q3"
    path: str = ""
    rates: dict[str, Any] | None = None  # the policy's rates.per_unit for the case (the policy is in USD)
    refused: str | None = None  # the policy with these options is refused when it loads, with this message
    findings: dict[str, dict[str, Any]] = field(default_factory=dict)  # resource id: what its finding states


def load_cases(folder: str | Path) -> list[Case]:
    cases = []
    for path in sorted(Path(folder).glob("*.yml")):
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
        rule = doc.pop("rule")
        defaults = doc.pop("options", None) or {}
        for name, body in doc.items():
            unknown = set(body) - CASE_KEYS
            if unknown:
                raise ValueError(f"{path}: case {name}: unknown keys {sorted(unknown)}")
            stated = {str(k): v for k, v in (body.get("findings") or {}).items()}
            for resource, fields in stated.items():
                if set(fields) - FINDING_KEYS:
                    raise ValueError(f"{path}: case {name}: findings.{resource}: unknown keys "
                                     f"{sorted(set(fields) - FINDING_KEYS)}")
            cases.append(Case(f"{rule}-{name}", rule, name, body.get("entities") or [], set(body.get("fail") or []),
                              {**defaults, **(body.get("options") or {})}, body.get("message_contains"),
                              body.get("window", "2026-Q3"), str(path), body.get("rates"), body.get("refused"),
                              stated))
    return cases


def _same(error: Exception) -> Exception:
    return error


def make_entity(cls: type, data: dict[str, Any]) -> Any:
    """An entity dataclass from plain YAML data, converting money and times."""
    types = {f.name: str(f.type) for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        if key not in types:
            raise ValueError(f"{cls.__name__} has no field {key!r}")
        t = types[key]
        if key == "cost" or t.startswith("dict[str, Decimal]"):
            value = {c: Decimal(str(v)) for c, v in value.items()}
        elif key == "tag_sets":
            value = [(dict(tags), currency, Decimal(str(amount))) for tags, currency, amount in value]
        elif t.startswith("list[tuple[str, Decimal"):  # (label, amount, ...) rows: months, top resources
            value = [(str(row[0]), *(Decimal(str(x)) for x in row[1:])) for row in value]
        elif t.split(" ")[0] == "date" and value is not None and not isinstance(value, date):
            value = date.fromisoformat(str(value))
        elif t.startswith("Decimal") and value is not None:
            value = Decimal(str(value))
        elif t.startswith("Fraction") and value is not None:  # a GPU share: "1/4" or 0.25
            value = Fraction(str(value))
        elif t.startswith("datetime") and value is not None:
            bad = ValueError(f"{cls.__name__}.{key}: bad time {value!r}")
            value = parse_datetime(value, functools.partial(_same, bad))
        kwargs[key] = value
    return cls(**kwargs)


def context(window: str = "2026-Q3", rates: dict[str, Any] | None = None) -> Context:
    policy = POLICY
    if rates:
        per_unit = ", ".join(f"{c}: {r}" for c, r in rates.items())
        policy += f"rates: {{date: 2026-09-30, source: rule test rates, per_unit: {{{per_unit}}}}}\n"
    return Context(load_catalog(), parse_policy(policy, "<rule-test-policy>"), parse_quarter(window))


def policy_with(case: Case) -> str:
    """The rule-test policy with the case's options written under the rule's clause, as a user would write them."""
    clause = {get_rule(case.rule).clause: {"text": "the case's clause", **case.options}}
    return POLICY + yaml.safe_dump({"clauses": clause}, sort_keys=False, allow_unicode=True)


def load_options(case: Case) -> None:
    """Load the policy holding the case's options, as `policy validate` and every command do: InputError if one
    is refused."""
    parse_policy(policy_with(case), f"<{case.id} policy>")


def run_case(case: Case) -> list[Finding]:
    cls = get_rule(case.rule)
    # the options as the policy gives them to the rule (auditor/core.py): money exact as written, not a float
    clause = parse_policy(policy_with(case), f"<{case.id} policy>").clause(cls.clause)
    rule = cls({k: v for k, v in (clause.options if clause else {}).items() if k in cls.options and v is not None})
    ctx = context(case.window, case.rates)
    findings = []
    for data in case.entities:
        findings.extend(rule.check(make_entity(cls.entity, data), ctx))
    return rule.fold(findings, ctx)

"""The written GPU policy: one YAML file, validated, with the line of every key kept for errors."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from auditor.errors import InputError, InputErrors
from auditor.model import Severity
from auditor.readable import read_text
from auditor.registry import get_rule, iter_clauses, rule_keys
from auditor.safeyaml import NoAliasLoader, control_character
from auditor.schema import Field, Validator, fmt_path, record, record_of
from auditor.text import did_you_mean, is_clean, md_escape, one_line


@dataclass
class Team:
    name: str
    lead: str | None
    budget_per_quarter: Decimal | None = None
    projects: list[str] = field(default_factory=list)
    gpu_hours_per_quarter: Decimal | None = None


@dataclass
class Clause:
    name: str
    text: str
    options: dict[str, Any]
    severity: Severity | None = None
    enabled: bool = True


@dataclass
class Waiver:
    rule: str  # the rule's ID
    resource: str  # a glob
    reason: str
    owner: str
    expires: date
    line: int | None = None

    def matches(self, rule_id: str, resource: str) -> bool:
        return self.rule == rule_id and fnmatch.fnmatchcase(resource, self.resource)

    def expired(self, today: date) -> bool:
        return self.expires < today


# Billing labels that name the job a line paid for: a label the team puts on its Vertex AI or Azure ML job, which the
# provider copies onto the job's billing lines.
JOB_TAGS = ("job", "job-name", "job_name", "job-id", "job_id")
TOKEN_TAGS = ("tokens", "train_tokens", "training_tokens")  # a job's label or annotation: tokens it trained on
SAMPLE_TAGS = ("samples", "train_samples", "training_samples")
SERIES_JOB_LABELS = ("job_name", "exported_job", "job")  # a series' labels that may name its job, in this order


@dataclass
class Rates:
    """Exchange rates the user gives (never fetched): how much of the policy's currency one unit of another is
    worth, on a date, from a source the report names."""

    date: date
    source: str
    per_unit: dict[str, Decimal]
    path: str | None = None  # the rates file, when they come from one

    def describe(self, currency: str) -> str:
        pairs = ", ".join(f"1 {c} = {r} {currency}" for c, r in sorted(self.per_unit.items()))
        return f"{pairs} ({self.source}, {self.date.isoformat()})"


@dataclass
class Policy:
    name: str
    version: str
    owner: str
    currency: str
    teams: dict[str, Team]
    clauses: dict[str, Clause]
    waivers: list[Waiver]
    team_tags: list[str]
    owner_tags: list[str]
    project_tags: list[str] = field(default_factory=lambda: ["project"])
    path: str | None = None
    rates: Rates | None = None
    mask_secrets: bool = True  # outputs.mask_secrets: mask credential-shaped text in every output
    job_tags: list[str] = field(default_factory=lambda: list(JOB_TAGS))
    token_tags: list[str] = field(default_factory=lambda: list(TOKEN_TAGS))
    sample_tags: list[str] = field(default_factory=lambda: list(SAMPLE_TAGS))
    token_series: list[str] = field(default_factory=list)  # Prometheus counters of a job's tokens (`pull`)
    sample_series: list[str] = field(default_factory=list)
    series_job_labels: list[str] = field(default_factory=lambda: list(SERIES_JOB_LABELS))

    def convert(self, amount: Decimal, currency: str) -> Decimal | None:
        """An amount in the policy's currency: as it is, or converted at the rate the user gave; None where no
        rate was given (thresholds and budgets then leave it out, and the audit says so)."""
        if currency == self.currency:
            return amount
        rate = self.rates.per_unit.get(currency) if self.rates else None
        return None if rate is None else amount * rate

    def team_of_project(self, project: str) -> str | None:
        for team in self.teams.values():
            if project in team.projects:
                return team.name
        return None

    def clause(self, name: str) -> Clause | None:
        return self.clauses.get(name)


SEVERITIES = tuple(s.label for s in Severity)
CURRENCY = re.compile(r"[A-Z]{3}")
RATES = record(
    doc="exchange rates into the policy's currency, given by the user (the audit never fetches them)",
    date=Field("date", required=True, doc="the day the rates are for"),
    source=Field("str", required=True, doc="where they come from, as the report names it"),
    per_unit=Field("map", required=True, item=Field("money", minimum=0),
                   doc="the policy's currency per one unit of each other currency, e.g. {CAD: 0.73}"),
)


def policy_schema() -> Field:
    """The policy's schema, composed from the options every rule of the pack declares."""
    clauses = {}
    for clause, rules in iter_clauses():
        fields: dict[str, Field] = {
            "text": Field("str", doc="the sentence people read"),
            "severity": Field("str", choices=SEVERITIES, doc="override the rules' severity"),
            "enabled": Field("bool", default=True),
        }
        for cls in rules:
            fields.update(cls.options)
        clauses[clause] = record_of(fields)
    return record(
        policy=Field("str", required=True, doc="the policy's title"),
        version=Field("scalar", default="1", doc="the policy's version; quoted or not"),
        owner=Field("str", required=True, doc="who owns the policy; the fallback contact"),
        currency=Field("str", default="USD", doc="the ISO 4217 code amounts, thresholds and budgets are in"),
        rates=RATES,
        rates_file=Field("str", doc="a YAML file of rates (date, source, per_unit), relative to the policy"),
        attribution=record(
            team_tags=Field("list", item=Field("tag"), default=["team"]),
            owner_tags=Field("list", item=Field("tag"), default=["owner"]),
            project_tags=Field("list", item=Field("tag"), default=["project"]),
            job_tags=Field("list", item=Field("tag"), default=list(JOB_TAGS),
                           doc="billing labels that name the training job a line paid for (Vertex AI, Azure ML)"),
            token_tags=Field("list", item=Field("str"), default=list(TOKEN_TAGS),
                             doc="a job's labels or annotations that give the tokens it trained on (unit costs)"),
            sample_tags=Field("list", item=Field("str"), default=list(SAMPLE_TAGS),
                              doc="a job's labels or annotations that give the samples it trained on (unit costs)"),
            token_series=Field("list", item=Field("metric"), default=[],
                               doc="Prometheus counters of the tokens a job trained on, one series per job or pod "
                                   "(read by `pull --provider k8s --prometheus`; unit costs)"),
            sample_series=Field("list", item=Field("metric"), default=[],
                                doc="Prometheus counters of the samples a job trained on (as token_series)"),
            series_job_labels=Field("list", item=Field("str"), default=list(SERIES_JOB_LABELS),
                                    doc="the labels of those series that may name the job (its name or "
                                        "namespace/name), the first that names one taken"),
        ),
        teams=Field("map", default={}, item=record(
            lead=Field("str", required=True),
            budget_per_quarter=Field("money", minimum=0),
            gpu_hours_per_quarter=Field("money", minimum=0, doc="GPU-hours the team may use in a quarter"),
            projects=Field("list", item=Field("str"), default=[]),
        )),
        clauses=record_of(clauses),
        outputs=record(
            mask_secrets=Field("bool", default=True, doc="mask access keys, tokens, private keys and other "
                               "credential-shaped text in every output (audit.json, reports, e-mail, gate output)"),
        ),
        waivers=Field("list", default=[], item=record(
            rule=Field("str", required=True),
            resource=Field("str", required=True),
            reason=Field("str", required=True),
            owner=Field("str", required=True),
            expires=Field("date", required=True),
        )),
    )


class _Lines:
    """Line numbers (1-based) of every key and item of a YAML document, by path; each key tagged as text."""

    def __init__(self, node: yaml.Node):
        self.lines: dict[tuple, int] = {}
        self.raw: dict[tuple, str] = {}  # scalars as written: `version: 2026.10` stays "2026.10"
        self.errors: list[InputError] = []  # duplicate keys
        self._walk(node, ())

    def _walk(self, node: yaml.Node, path: tuple) -> None:
        self.lines.setdefault(path, node.start_mark.line + 1)  # a key's own line wins over its value's
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for k, v in node.value:
                if not isinstance(k, yaml.ScalarNode):  # `[a, b]: ...`, `? {x: 1}`: YAML allows it, a policy not
                    kind = "list" if isinstance(k, yaml.SequenceNode) else "mapping"
                    raise InputError(f"a key is a {kind}; every key of a policy is a name (text)",
                                     line=k.start_mark.line + 1)
                key = k.value
                # every key a name, as written: YAML 1.1 reads a team `no` as False, `on` as True and `007` as 7,
                # none of which a tag value ever equals
                k.tag = "tag:yaml.org,2002:str"
                if key in seen:
                    self.errors.append(InputError(f"duplicate key {key!r}", line=k.start_mark.line + 1))
                seen.add(key)
                self.lines[path + (key,)] = k.start_mark.line + 1
                self._walk(v, path + (key,))
        elif isinstance(node, yaml.ScalarNode):
            self.raw[path] = node.value
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                self._walk(v, path + (i,))

    def __call__(self, path: tuple) -> int | None:
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path)


class _NoAliasLoader(NoAliasLoader):
    what = "a policy"


class _RatesLoader(NoAliasLoader):
    what = "a rates file"


def load_policy(path: str | Path) -> Policy:
    path = str(path)
    try:
        text = read_text(path, "policy")
    except FileNotFoundError:
        raise InputError("policy file not found", path=path) from None
    except OSError as e:
        raise InputError(f"cannot read the policy: {e.strerror or e}", path=path) from None
    return parse_policy(text, path)


def parse_policy(text: str, path: str = "<policy>") -> Policy:
    try:
        loader = _NoAliasLoader(text)
    except yaml.reader.ReaderError as e:
        raise control_character(e, text, path) from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise InputError("the policy is empty", path=path)
        lines = _Lines(node)
        data = loader.construct_document(node)
    except RecursionError:
        raise InputError("nested too deeply to be a policy", path=path) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise InputError(f"not valid YAML: {e.problem or e.context}", path=path,
                         line=mark.line + 1 if mark else None) from None
    except InputError as e:
        e.path = path
        raise
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise InputError("a policy is a YAML mapping with keys policy, owner, clauses, ...", path=path, line=1)
    for err in lines.errors:
        err.path = path
    v = Validator(path, lines, collect=True, raw=lines.raw.get)  # every error in the file, not only the first
    doc = v.check(data, policy_schema())
    InputErrors.raise_if_any(lines.errors + v.errors + _meaning_errors(doc, lines, path))
    policy = _build(doc, lines, path)
    policy.rates = _rates(doc, lines, path)
    return policy


def _rates(doc: dict, lines: _Lines, path: str) -> Rates | None:
    """The policy's `rates:`, or its `rates_file:` read and checked as the same mapping."""
    currency = doc.get("currency") or "USD"
    if not CURRENCY.fullmatch(currency):
        raise InputError(f"currency: {currency!r} is not an ISO 4217 code such as USD", path=path,
                         line=lines(("currency",)))
    given, where, locate = doc.get("rates"), path, lines
    if doc.get("rates_file"):
        if given:
            raise InputError("give rates or rates_file, not both", path=path, line=lines(("rates_file",)))
        where = str(Path(path).parent / doc["rates_file"])
        try:
            text = read_text(where, "rates file")
            node = yaml.compose(text, Loader=_RatesLoader)
            data = yaml.load(text, Loader=_RatesLoader)
        except OSError as e:
            raise InputError(f"cannot read the rates file: {e.strerror or e}", path=where) from None
        except InputError as e:  # an alias
            e.path = where
            raise
        except yaml.reader.ReaderError as e:
            raise control_character(e, text, where) from None
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            raise InputError(f"not valid YAML: {e.problem or e.context}", path=where,
                             line=mark.line + 1 if mark else None) from None
        if node is None:
            raise InputError("the rates file is empty", path=where)
        locate = _Lines(node)
        given = Validator(where, locate).check(data, RATES)
        base: tuple = ()
    else:
        base = ("rates",)
    if not given:
        return None
    for code, rate in given["per_unit"].items():
        problem = ("is not an ISO 4217 code such as CAD" if not CURRENCY.fullmatch(code) else
                   "is the policy's own currency" if code == currency else
                   f"has rate {rate}; a rate is more than 0" if rate <= 0 else None)
        if problem:
            raise InputError(f"rates.per_unit: {code!r} {problem}", path=where,
                             line=locate(base + ("per_unit", code)))
    return Rates(given["date"], given["source"], dict(given["per_unit"]),
                 where if doc.get("rates_file") else None)


def address_problem(value: Any) -> str | None:
    """Why `value` is not one e-mail address (None when it is): a lead or owner gets the audit by e-mail, so
    it is one addr-spec, with no line break, no second address and no display name."""
    from email.errors import HeaderParseError
    from email.headerregistry import Address

    text = "" if value is None else str(value)
    if not is_clean(text):
        return "has a line break or a control character"
    if any(sep in text for sep in ",; ") or text.count("@") > 1:
        return "holds more than one address, or a name; give one address like lead@example.com"
    try:
        addr = Address(addr_spec=text)
    except (ValueError, IndexError, HeaderParseError):
        return "is not an email address like lead@example.com"
    if not addr.username or not addr.domain or addr.addr_spec != text or "." not in addr.domain.strip("."):
        return "is not an email address like lead@example.com"
    return None


def _meaning_errors(doc: dict, lines: _Lines, path: str) -> list[InputError]:
    """What the schema cannot say: the addresses of the owner and the leads, the rules waivers name, and a team or
    waiver written with nothing in it (`vision:`, `- `), which the schema reads as absent."""
    errors = []
    teams = doc.get("teams") or {}
    places = [(("owner",), doc.get("owner"))] + [(("teams", name, "lead"), t.get("lead"))
                                                  for name, t in teams.items() if t]
    for where, value in places:
        problem = address_problem(value) if value is not None else None
        if problem:
            errors.append(InputError(f"{fmt_path(where)}: '{one_line(value)}' {problem}", path=path,
                                     line=lines(where)))
    errors += [InputError(f"teams.{name}.lead: is required", path=path, line=lines(("teams", name)))
               for name, t in teams.items() if t is None]
    for i, w in enumerate(doc.get("waivers") or []):
        if w is None:
            errors.append(InputError(f"waivers[{i}]: is empty; a waiver has rule, resource, reason, owner and "
                                     "expires", path=path, line=lines(("waivers", i))))
        if not w or w.get("rule") is None:  # a rule of the wrong kind or left out is the schema's error
            continue
        try:
            get_rule(w["rule"])
        except KeyError:
            hint = did_you_mean(w["rule"], rule_keys())
            errors.append(InputError(f"waivers[{i}].rule: no rule {w['rule']!r}{hint}", path=path,
                                     line=lines(("waivers", i, "rule"))))
    return errors


def _build(doc: dict, lines: _Lines, path: str) -> Policy:
    clauses: dict[str, Clause] = {}
    for name, c in (doc.get("clauses") or {}).items():
        if c is not None:
            opts = {k: v for k, v in c.items() if k not in ("text", "severity", "enabled")}
            clauses[name] = Clause(name, c.get("text") or "", opts,
                                   Severity.parse(c["severity"]) if c.get("severity") else None,
                                   c.get("enabled", True))
    teams = {name: Team(name, t["lead"], t.get("budget_per_quarter"), t.get("projects") or [],
                        t.get("gpu_hours_per_quarter"))
             for name, t in (doc.get("teams") or {}).items()}
    waivers = []
    for i, w in enumerate(doc.get("waivers") or []):
        waivers.append(Waiver(get_rule(w["rule"]).id, w["resource"], w["reason"], w["owner"], w["expires"],
                              lines(("waivers", i))))
    attribution = doc.get("attribution") or {}
    return Policy(
        name=doc["policy"], version=lines.raw.get(("version",), doc["version"]), owner=doc["owner"],
        currency=doc.get("currency") or "USD", teams=teams, clauses=clauses, waivers=waivers,
        team_tags=attribution.get("team_tags") or ["team"],
        owner_tags=attribution.get("owner_tags") or ["owner"],
        project_tags=attribution.get("project_tags") or ["project"], path=path,
        mask_secrets=(doc.get("outputs") or {}).get("mask_secrets", True) is not False,
        job_tags=attribution.get("job_tags") or list(JOB_TAGS),
        token_tags=attribution.get("token_tags") or list(TOKEN_TAGS),
        sample_tags=attribution.get("sample_tags") or list(SAMPLE_TAGS),
        token_series=attribution.get("token_series") or [], sample_series=attribution.get("sample_series") or [],
        series_job_labels=attribution.get("series_job_labels") or list(SERIES_JOB_LABELS))



def _code(value: Any) -> str:
    return "`" + " ".join(str(value).replace("`", "'").split()) + "`"


def _value(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list | tuple):
        return ", ".join(_code(v) for v in value) or "(none)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return _code(value)


def render_markdown(policy: Policy, today: date) -> str:
    """The written policy as Markdown for the runbook: who owns it, the teams and their budgets, every clause
    with its sentence and its numbers (defaults where the policy sets none), and the waivers with their expiry."""
    cur = policy.currency
    out = [f"# {md_escape(policy.name)}", "",
           f"Version {md_escape(policy.version)} · owner {md_escape(policy.owner)} · amounts in {md_escape(cur)}", "",
           "Who owns a resource is read from its tags: team from "
           f"{', '.join(_code(t) for t in policy.team_tags)}, owner from "
           f"{', '.join(_code(t) for t in policy.owner_tags)}, and a project tag "
           f"({', '.join(_code(t) for t in policy.project_tags)}) maps to the team that lists the project. "
           f"What nobody owns goes to {md_escape(policy.owner)}.", ""]
    out += ["## Teams and budgets", ""]
    if policy.teams:
        out += ["| Team | Lead | Budget per quarter | GPU-hours per quarter | Projects |", "|---|---|---:|---:|---|"]
        for t in policy.teams.values():
            budget = f"{t.budget_per_quarter:,.2f} {md_escape(cur)}" if t.budget_per_quarter is not None else "–"
            hours = f"{t.gpu_hours_per_quarter:,.0f}" if t.gpu_hours_per_quarter is not None else "–"
            out.append(f"| {md_escape(t.name)} | {md_escape(t.lead)} | {budget} | {hours} | "
                       f"{', '.join(md_escape(p) for p in t.projects) or '–'} |")
    else:
        out.append("No teams are named: every finding goes to the policy owner.")
    out += ["", "## Clauses", ""]
    by_clause = dict(iter_clauses())
    written = [c for c in policy.clauses if c in by_clause]
    for name in written:
        clause, rules = policy.clauses[name], by_clause[name]
        ids = "; ".join(f"{r.id} {r.name}" for r in rules)
        severity = clause.severity.label if clause.severity else "/".join(dict.fromkeys(r.severity.label
                                                                                        for r in rules))
        out += [f"### {name}", "", f"> {md_escape(clause.text or rules[0].summary())}", "",
                f"Checked by {ids} · severity {severity}" + ("" if clause.enabled else " · **disabled**"), ""]
        options = {k: f for r in rules for k, f in r.options.items()}
        if options:
            out += ["| Setting | Value | Meaning |", "|---|---|---|"]
            for key, f in options.items():
                value = clause.options.get(key)
                shown = f"{_value(f.default)} (default)" if value is None or value == f.default else _value(value)
                out.append(f"| {_code(key)} | {shown} | {md_escape(f.doc)} |")
            out.append("")
    rest = [(c, rules) for c, rules in by_clause.items() if c not in policy.clauses]
    if rest:
        out += ["### Rules without a clause of their own", "",
                "These run with their defaults until the policy sets a clause for them:", ""]
        for c, rules in rest:
            for r in rules:
                opts = ", ".join(f"{_code(k)}: {_value(f.default)}" for k, f in r.options.items())
                out.append(f"- {_code(c)}: {r.id} {r.name}: {md_escape(r.summary())}" + (f" ({opts})" if opts else ""))
        out.append("")
    out += ["## Waivers", ""]
    if policy.waivers:
        out += ["| Rule | Resources | Reason | Owner | Expires | Status |", "|---|---|---|---|---|---|"]
        for w in policy.waivers:
            status = f"**expired** ({(today - w.expires).days} days ago)" if w.expired(today) else \
                f"active ({(w.expires - today).days} days left)"
            out.append(f"| {w.rule} | {_code(w.resource)} | {md_escape(w.reason)} | {md_escape(w.owner)} | "
                       f"{w.expires.isoformat()} | {status} |")
    else:
        out.append("No waivers.")
    out += ["", f"_Rendered by gpu-auditor on {today.isoformat()}; waiver status as of that day._", ""]
    return "\n".join(out)

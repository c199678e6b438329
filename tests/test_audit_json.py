"""audit.json's writer (outputs/audit_json.py) against the standard library: on any JSON-like data, the text it
writes is json.dumps(indent=2, ensure_ascii=False)'s (through text.json_text), byte for byte."""

from __future__ import annotations

import io
import json
from datetime import datetime
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.audit import _exact, _finding, _jsonable, _summary
from auditor.figures import actions
from auditor.model import Finding, Severity
from auditor.outputs import audit_json
from auditor.secret_patterns import mask_deep
from auditor.text import json_text

# any character a string can hold: NUL, quotes and backslashes, C0 and C1 controls, line and paragraph
# separators, bidirectional overrides, lone surrogates, any script, JSON's own punctuation
TEXT = st.one_of(st.text(max_size=8),
                 st.text(st.sampled_from('\x00"\\\n\x1b\x85\u2028\u202e\ud800é漢 {}[],:'), max_size=6),
                 st.sampled_from(["\x00", "\x00\x00", '"\x00', 'a"\x00', "\x00\x00\x00", "[]", "{}"]))
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-10**40, 10**40),
                   st.floats(allow_nan=True, allow_infinity=True), TEXT)
KEY = st.one_of(TEXT, st.integers(-1000, 1000), st.floats(allow_nan=False), st.booleans(), st.none())
VALUE = st.recursive(SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(KEY, inner, max_size=5)), max_leaves=40)
DOC = st.dictionaries(st.one_of(TEXT, st.integers(-5, 5)), st.one_of(
    VALUE, st.lists(VALUE, max_size=4), st.dictionaries(KEY, st.one_of(VALUE, st.lists(VALUE, max_size=3)),
                                                        max_size=4)), max_size=6)


class Label(str):
    """A str subclass (markupsafe.Markup is one)."""


def dumps(value) -> str:
    return json_text(json.dumps(value, indent=2, ensure_ascii=False))


def written(doc) -> str:
    buf = io.StringIO()
    audit_json.write_json(doc, buf)
    return buf.getvalue()


@settings(max_examples=150, deadline=None)
@given(doc=DOC)
def test_a_document_is_written_as_json_dumps_writes_it(doc):
    assert written(doc) == dumps(doc) + "\n"


@settings(max_examples=150, deadline=None)
@given(value=VALUE, depth=st.integers(0, 3))
def test_a_value_is_written_as_json_dumps_writes_it_at_any_indent(value, depth):
    indent = "  " * depth
    assert audit_json._text(value, indent) == json.dumps(value, indent=2, ensure_ascii=False).replace(
        "\n", "\n" + indent)


@pytest.mark.parametrize("value", [
    {"a": "x", "b": {"c": 1}}, ["\x00", [1], "\n", [2]], [[[[]]], [{}], [[1]]],
    {"k": [{"e": {"x": [1, {"y": None}]}}, (), {}]},
    {3: 1, 1.5: 2.0, None: True, False: None, "": ""}, [1, True, 2.5, "é", None], (("t", 1),),
    [Severity.HIGH, 1], {"s": Severity.LOW}, {Severity.HIGH: "x"}, ["a", Label("b")], {"m": Label("\u2028")}])
def test_odd_values_are_written_as_json_dumps_writes_them(value):
    """Keys that are not text, tuples, subclasses (an IntEnum, a str subclass), nested empty containers."""
    for indent in ("", "    "):
        assert audit_json._text(value, indent) == json.dumps(value, indent=2, ensure_ascii=False).replace(
            "\n", "\n" + indent)
    assert written({"findings": [value]}) == dumps({"findings": [value]}) + "\n"


def test_a_finding_shaped_value_is_written_as_json_dumps_writes_it():
    doc = {"findings": [{"rule": "TAG001", "evidence": {"missing_tags": ["owner", "project"], "lines": 3,
                                                        "gb": 1.5, "x": float("nan")}, "waiver": None,
                         "message": "é\u2028\x1b \"q\"", "cost": "1.00"}], "summary": {3: [1, {}], None: []}}
    assert written(doc) == dumps(doc) + "\n"


def test_what_json_cannot_write_is_refused_as_json_refuses_it():
    for value in ({"cost": Decimal(1)}, [Decimal(1)], {"e": {"when": object()}}, Decimal(1)):
        with pytest.raises(TypeError, match="is not JSON serializable"):
            audit_json._text(value, "")
    with pytest.raises(TypeError):
        audit_json._text({object(): 1}, "")


# ---- the audit's values made JSON-able (audit._jsonable), masked as mask_deep masks ----------------------------

SECRETISH = st.sampled_from([
    "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "password=hunter2x", "Bearer abcdefghijkl",
    "ghp_" + "a" * 36, "https://u:pw@host.example.com/x", "high", "monkey business", "i-0abc", "lacks tags owner"])
MASK_KEY = st.one_of(st.sampled_from(["password", "aws_key", "api.key", "token", "max_tokens", "team", "message",
                                      "aws_region", "Authorization", "evidence"]), st.text(max_size=6),
                     st.integers(-3, 3))
MASK_VALUE = st.recursive(
    st.one_of(SCALAR, SECRETISH, st.decimals(allow_nan=False, places=4),
              st.datetimes(min_value=datetime(2000, 1, 1)), st.dates(), st.just(Severity.HIGH)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(MASK_KEY, inner, max_size=6)),
    max_leaves=30)


@settings(max_examples=200, deadline=None)
@given(value=MASK_VALUE)
def test_jsonable_masks_as_mask_deep_masks_its_result(value):
    """Every dict whose keys are shown as they are is encoded by one comprehension (audit._jsonable); the
    result is the same as the entry-by-entry walk's, and masked it is mask_deep of the unmasked result."""
    plain = _jsonable(value, _exact)
    assert _jsonable(value, _exact, masked=True) == mask_deep(plain)
    walked = _walked(value)
    assert plain == walked and json.dumps(plain) == json.dumps(walked)


def _walked(value):
    """_jsonable as written entry by entry: every key made text, every value made JSON-able."""
    if isinstance(value, dict):
        return {k if k.__class__ is str else str(k): _walked(x) for k, x in value.items()}
    if isinstance(value, list | tuple):
        return [_walked(x) for x in value]
    return _jsonable(value, _exact)


# ---- findings and actions encoded field by field (audit._finding, audit._summary) as the walk encodes them -------

TEXT_OR_NONE = st.one_of(st.none(), SECRETISH, st.text(max_size=12))
MONEY = st.one_of(st.none(), st.decimals(allow_nan=False, allow_infinity=False, places=6, min_value=-10**9,
                                         max_value=10**9))
EVIDENCE = st.dictionaries(MASK_KEY, MASK_VALUE, max_size=4)
SUMMARY_VALUE = st.recursive(  # money in the summary is finite, under what an amount holds: written to the cent
    st.one_of(SCALAR, SECRETISH, st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-10**20 + 1,
                                             max_value=10**20 - 1)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(MASK_KEY, inner, max_size=4)),
    max_leaves=10)


@st.composite
def findings(draw):
    """A finding whose every field that can hold what people wrote (an id, a message with a tag in it, a team,
    a path, its evidence and waiver) holds anything, credentials included; its rule's own words are its rule's."""
    return Finding(
        rule=draw(st.sampled_from(["TAG001", "GPU002"])), name="missing-required-tags",
        severity=draw(st.sampled_from(list(Severity))), resource=draw(SECRETISH | st.text(max_size=12)),
        message=draw(SECRETISH | st.text(max_size=30)), entity_type="ResourceSpend",
        provider=draw(TEXT_OR_NONE), account=draw(TEXT_OR_NONE), region=draw(TEXT_OR_NONE),
        owner=draw(TEXT_OR_NONE), team=draw(TEXT_OR_NONE), evidence=draw(EVIDENCE), cost=draw(MONEY),
        monthly_savings=draw(MONEY), currency=draw(st.sampled_from(["USD", "EUR"]) | SECRETISH),
        remediation="Add the missing tags.", clause="tagging", file=draw(TEXT_OR_NONE),
        line=draw(st.none() | st.integers(1, 9)), waiver=draw(st.none() | EVIDENCE), wasted=draw(MONEY),
        counted_under=draw(st.none() | st.sampled_from(["GPU002"]) | SECRETISH),
        still_running=draw(st.none() | st.booleans()), confidence=draw(st.sampled_from(["high", "low"])))


@settings(max_examples=60, deadline=None)
@given(fs=st.lists(findings(), max_size=4), rest=st.dictionaries(st.sampled_from(["spend", "teams", "by_team"]),
                                                                  SUMMARY_VALUE, max_size=2))
def test_findings_and_actions_are_encoded_as_the_walk_encodes_them(fs, rest):
    """audit.json's findings and its summary's actions, written field by field for speed, are what the walk
    (_jsonable) writes, and masked they are mask_deep of that: every field that can hold a credential is masked."""
    for f in fs:
        plain = _finding(f, masked=False)
        assert plain == _jsonable(f.to_dict(), _exact)
        assert _finding(f, masked=True) == mask_deep(plain)
    summary = {**rest, "actions": actions(fs)}
    plain = _summary(summary, masked=False)
    assert plain == _jsonable(summary)
    assert _summary(summary, masked=True) == mask_deep(plain)

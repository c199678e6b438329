"""audit.json's writer (outputs/audit_json.py) against the standard library: on any JSON-like data, the text it
writes is json.dumps(indent=2, ensure_ascii=False)'s (through text.json_text), byte for byte."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.model import Severity
from auditor.outputs import audit_json
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

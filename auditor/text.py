"""Text from input (job names, tags, file names, resource ids), made safe for every output.

A value read from an export, a manifest or a file name can hold line breaks, terminal escapes (ESC), NUL and
other control characters, or bidirectional overrides. Written raw, a line break forges a line (a `::error`
workflow command in CI logs, a header in an e-mail, a line of an error message), ESC retitles or clears the
terminal that shows a report, and most C0 characters make XML unparseable. Every output passes input values
through one of the functions here:

- `one_line`: for a value that must stay on its line (terminal, gate text, annotations, error messages, CSV
  cells, XML attributes, e-mail headers): every control character, line break included, becomes a visible
  escape (`\\n`, `\\x1b`, `\\u202e`), so the reader still sees that it was there.
- `printable`: the same, but line breaks and tabs are kept (multi-line text: a JUnit failure's body).
- `template_value`: every `{{ value }}` of the report and e-mail templates, through `one_line`.
- `md_escape`: a value in Markdown (one line, and no link, HTML or table syntax).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from decimal import Decimal
from operator import itemgetter
from typing import Any

# C0 and C1 controls, DEL, the Unicode line and paragraph separators, bidirectional and other invisible
# format controls (Trojan Source), surrogates (not encodable as UTF-8) and the two XML non-characters.
_UNSAFE = "\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff\ufffe\uffff"
_ONE_LINE = re.compile(f"[{_UNSAFE}]")
_PRINTABLE = re.compile(f"[{_UNSAFE.replace(chr(0) + '-', chr(0) + '-' + chr(8) + chr(11) + '-')}]")
_JSON_RAW = re.compile(f"[{_UNSAFE[len(chr(0) + '-' + chr(0x1f)):]}]")  # json.dumps escapes C0 itself
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_MARKDOWN = "\\`*_{}[]<>()#+!|"


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if 0xDC80 <= ord(ch) <= 0xDCFF:  # a byte that was not UTF-8 (a file name read with surrogate escapes)
        return f"\\x{ord(ch) - 0xDC00:02x}"
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def one_line(value: Any) -> str:
    """`value` as text on one line: control characters and line breaks shown as escapes, never acted on."""
    text = "" if value is None else str(value)
    return text if _printable_ascii(text) else _ONE_LINE.sub(_escape, text)


def template_value(value: Any) -> Any:
    """What every `{{ value }}` of every template (reports, e-mails) prints: text on one line (`one_line`), so a
    value from input starts no line of a report or an e-mail (`::error` in a CI log); markup the templates
    built themselves (`__html__`) and other types as they are."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return one_line(value)
    return value


def printable(value: Any) -> str:
    """`value` as text with its line breaks (LF) and tabs kept, every other control character escaped (CR
    too: a lone CR rewrites the line on a terminal)."""
    text = "" if value is None else str(value)
    return _PRINTABLE.sub(_escape, text)


def json_text(text: str) -> str:
    """JSON text (json.dumps with ensure_ascii=False) with the characters JSON leaves raw that `one_line`
    escapes (C1 controls, bidirectional overrides, line separators) written as \\uXXXX escapes: the same data,
    and `cat audit.json` acts on none of it."""
    if text.isascii() and "\x7f" not in text:  # most of an audit's text: of those characters, ASCII has DEL alone
        return text
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def is_clean(text: str) -> bool:
    """Whether `text` has nothing `one_line` would change."""
    return _printable_ascii(text) or _ONE_LINE.search(text) is None


def _printable_ascii(text: str) -> bool:
    """ASCII without a control character (of the characters one_line escapes, ASCII has C0 and DEL alone): most
    text, known so in C without the scan of the expression (which costs a microsecond a kilobyte)."""
    return text.isascii() and text.isprintable()


def md_escape(value: Any) -> str:
    """Text from exports, tags and policies, made inert in Markdown: on one line (runs of white space, line
    breaks included, become one space), no table broken, no link, image or HTML injected, no control
    character."""
    text = " ".join(("" if value is None else str(value)).split())
    text = one_line(text)
    for ch in _MARKDOWN:
        text = text.replace(ch, "\\" + ch)
    return text


def safe_cell(value: Any) -> str:
    """One line (control characters escaped), and spreadsheet formulas neutralised: a cell that starts with
    = + - @ (or a tab or CR) gets a quote."""
    if value is None:  # most cells of findings.csv at scale (no owner, no waiver): no work
        return ""
    text = one_line(value)
    if text and text[0] in "=+-@\t\r" and not _is_number(text):
        return "'" + text
    return text


def safe_row(values: list[Any]) -> list[str]:
    """A CSV row's cells, each as safe_cell makes it. Most rows of findings.csv have nothing to change: there
    each cell is its text, found so by one search over the row and a look at each cell's first character."""
    cells = ["" if v is None else v if v.__class__ is str else str(v) for v in values]
    if is_clean("".join(cells)) and _FORMULA.isdisjoint(map(_FIRST, cells)):
        return cells
    return [safe_cell(v) for v in values]


_FORMULA = frozenset("=+-@")  # what a formula starts with (a tab or CR, too, which the search finds)
_FIRST = itemgetter(slice(0, 1))  # a text's first character, or ""


def _is_number(text: str) -> bool:
    try:
        Decimal(text)
        return True
    except ArithmeticError:
        return False


def did_you_mean(value: str, known: Iterable[str], otherwise: str = "") -> str:
    """`; did you mean 'X'?` naming the closest of `known` to a mistyped value; `otherwise` when none is close."""
    near = difflib.get_close_matches(str(value), list(known), n=1)
    return f"; did you mean {near[0]!r}?" if near else otherwise

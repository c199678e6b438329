"""The HTML report as a person sees it: rendered by headless Chromium (the `chromium` fixture: Debian's `chromium`,
`apt-get install chromium`, which .ci/run installs; skipped where it is absent, a failure in CI) and driven over
the DevTools protocol, which reports every console message, uncaught exception and browser log entry (a blocked or
missing resource), so a console error fails the test rather than passing unseen."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import time
import urllib.request
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
import websocket
from test_report_trend import last_quarter

from auditor.core import run_audit
from auditor.model import fmt_money
from auditor.outputs.report import render_html
from auditor.policy import load_policy
from auditor.window import parse_quarter

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
SECTIONS = ("Summary", "Where the money went", "The GPU fleet", "Findings", "The policy", "Forecast",
            "Quarter over quarter", "Inputs")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1"]


class Browser:
    """One headless Chromium and one page, over the DevTools protocol."""

    def __init__(self, exe: str, profile: Path):
        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            assert self.proc.poll() is None, "chromium exited at start"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.next_id, self.events = 0, []
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                assert "error" not in msg, msg
                return msg["result"]
            self.events.append(msg)

    def wait_for(self, event: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event for e in self.events):
            assert time.monotonic() < deadline, f"no {event}"
            self.events.append(json.loads(self.ws.recv()))

    def open(self, path: Path, width: int = 800) -> None:
        self.events.clear()
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", url=path.resolve().as_uri())
        self.wait_for("Page.loadEventFired")
        self.call("Runtime.evaluate", expression="1")  # let the events of the load arrive

    def errors(self) -> list[str]:
        """Console errors and assertions, uncaught exceptions and error log entries since the page was opened."""
        out = []
        for e in self.events:
            method, p = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(f"uncaught: {d.get('text', '')} {d.get('exception', {}).get('description', '')}")
            elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
                entry = p["entry"]
                out.append(f"log ({entry['source']}): {entry['text']} {entry.get('url', '')}")
        return out

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def screenshot(self, path: Path) -> bytes:
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        data = base64.b64decode(shot["data"])
        path.write_bytes(data)
        return data

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def browser(chromium, tmp_path_factory):
    b = Browser(chromium, tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.fixture(scope="module")
def demo_doc() -> dict:
    policy, day = load_policy(DEMO / "policy.yml"), date(2026, 10, 15)
    args = ([DEMO / "billing"], DEMO / "inventory.json", parse_quarter("2026-Q3"), day)
    before = last_quarter(run_audit(policy, *args).to_dict())
    audit = run_audit(policy, *args, previous={"path": "last-quarter/audit.json", "sha256": "0" * 64, "doc": before})
    return audit.to_dict()


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_the_observer_sees_console_errors(browser, tmp_path):
    """The check below means something: a page that logs an error, throws and loads a missing image is caught."""
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body><img src='missing.png'><script>console.error('boom');"
                    "throw new Error('kaboom')</script></body></html>", encoding="utf-8")
    browser.open(page)
    errors = "\n".join(browser.errors())
    assert "console: boom" in errors and "kaboom" in errors and "missing.png" in errors, errors


def test_demo_report_renders_without_errors(browser, demo_doc, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_html(demo_doc), encoding="utf-8")
    browser.open(page)
    assert browser.errors() == []
    text = browser.evaluate("document.body.innerText")
    for heading in SECTIONS:
        assert heading in text, heading
    for seen in (fmt_money(demo_doc["summary"]["billed_cost"]), "Resolved since last quarter (1)", "2026-Q4",
                 "Under 10%", "Spot", "Idle and oversized machines", "expired"):
        assert seen in text, seen
    assert browser.evaluate("document.documentElement.scrollWidth") <= 800  # no sideways scrolling
    data = browser.screenshot(tmp_path / "report.png")
    width, height = png_size(data)
    assert width == 800 and height > 3000  # the whole report, every section
    assert len(data) > 100_000  # text and bars, not a blank page


@pytest.mark.parametrize("width", [600, 700])
def test_demo_report_fits_narrow_windows(browser, demo_doc, tmp_path, width):
    page = tmp_path / "report.html"
    page.write_text(render_html(demo_doc), encoding="utf-8")
    browser.open(page, width=width)
    assert browser.errors() == []
    assert browser.evaluate("document.documentElement.scrollWidth") <= width + 1


def test_team_report_renders(browser, demo_doc, tmp_path):
    page = tmp_path / "nlp.html"
    page.write_text(render_html(demo_doc, team="nlp"), encoding="utf-8")
    browser.open(page)
    assert browser.errors() == []
    text = browser.evaluate("document.body.innerText")
    s = demo_doc["summary"]
    assert "team nlp" in text and fmt_money(s["by_team"]["nlp"]) in text and fmt_money(s["billed_cost"]) not in text
    png_size(browser.screenshot(tmp_path / "nlp.png"))


def test_hostile_values_show_as_text_in_the_browser(browser, demo_doc, tmp_path):
    doc = json.loads(json.dumps(demo_doc))
    f = doc["findings"][0]
    f["resource"] = "<script>window.__pwned = 1</script>"
    f["message"] = '" onload="window.__pwned = 2" x="'
    f["team"] = "<img src=x onerror='window.__pwned = 3'>"
    doc["summary"]["breakdown"]["project"][0]["key"] = "<svg onload='window.__pwned = 4'>"
    page = tmp_path / "hostile.html"
    page.write_text(render_html(doc), encoding="utf-8")
    browser.open(page)
    assert browser.errors() == []
    assert browser.evaluate("window.__pwned === undefined") is True
    assert browser.evaluate("document.querySelectorAll('script, img, svg').length") == 0
    text = browser.evaluate("document.body.innerText")
    for shown in ("<script>window.__pwned = 1</script>", '" onload="window.__pwned = 2" x="',
                  "<img src=x onerror='window.__pwned = 3'>", "<svg onload='window.__pwned = 4'>"):
        assert shown in text, shown


def png_pixels(data: bytes) -> set[tuple[int, int, int]]:
    """The colours of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium captures), decoded here."""
    import struct
    import zlib

    width, height = png_size(data)
    depth, kind = data[24], data[25]
    assert depth == 8 and kind in (2, 6), (depth, kind)
    bpp = 3 if kind == 2 else 4
    raw, pos = b"", 8
    while pos < len(data):
        length, tag = struct.unpack(">I4s", data[pos:pos + 8])
        if tag == b"IDAT":
            raw += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(raw)
    stride, prev, colours = width * bpp, bytearray(width * bpp), set()
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 0xFF
            elif f == 2:
                line[x] = (line[x] + b) & 0xFF
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        colours.update(tuple(line[i:i + 3]) for i in range(0, stride, bpp))
        prev = line
    return colours


def element_shot(browser: Browser, selector: str) -> bytes:
    box = browser.evaluate(f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                           ".getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width, r.height]; })()")
    assert box and box[2] > 100 and box[3] > 50, box
    shot = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                        clip={"x": box[0], "y": box[1], "width": box[2], "height": box[3], "scale": 1})
    return base64.b64decode(shot["data"])


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


@pytest.mark.parametrize("team", [None, "nlp"])
def test_weekly_charts_are_drawn(browser, demo_doc, tmp_path, team):
    """The stacked weekly chart shows each team's colour (for a team's report, its own), the utilisation chart
    its bands' colours, and the top findings carry a sparkline."""
    from auditor.outputs import charts

    page = tmp_path / "weekly.html"
    page.write_text(render_html(demo_doc, team=team), encoding="utf-8")
    browser.open(page)
    assert browser.errors() == []
    teams = demo_doc["summary"]["weekly"]["teams"]
    shown = teams if team is None else [team]
    spend = png_pixels(element_shot(browser, "#chart-weekly-spend"))
    for i, _ in enumerate(shown):
        assert rgb(charts.PALETTE[i]) in spend, shown[i]
    if team is not None:
        assert rgb(charts.PALETTE[1]) not in spend  # no other team's bars
    bands = png_pixels(element_shot(browser, "#chart-weekly-bands"))
    view = charts.weekly(demo_doc["summary"], "USD", team)
    measured = {b for b in charts.BAND_COLOURS if any(w["hours"][b] > 0 for w in view["weeks"])}
    assert measured and {rgb(charts.BAND_COLOURS[b]) for b in measured} <= bands
    assert not {rgb(c) for b, c in charts.BAND_COLOURS.items() if b not in measured} & bands  # nlp: none under 10%
    assert browser.evaluate("document.querySelectorAll('table.sparkline').length") >= 1
    text = browser.evaluate("document.body.innerText")
    assert "Week by week" in text and demo_doc["summary"]["weekly"]["weeks"][0]["week"] in text


def test_the_top_says_what_changed_and_evidence_reads_as_figures(browser, demo_doc, tmp_path):
    """As a reader sees it: the summary's spend, GPU compute and savings cards each say their change since last
    quarter (demo_doc is audited against test_report_trend's 2026-Q2), and the findings' evidence shows money and
    percentages as the report does, never a float's long tail (2.4000000000000004) or a bare budget (250000)."""
    page = tmp_path / "report.html"
    page.write_text(render_html(demo_doc), encoding="utf-8")
    browser.open(page)
    assert browser.errors() == []
    trend = demo_doc["trend"]
    for key, figure in (("spend", "billed_cost"), ("gpu", "gpu_cost"), ("savings", "monthly_savings")):
        shown = browser.evaluate(f"(e => e && e.offsetHeight > 0 ? e.innerText : null)"
                                 f"(document.querySelector('[data-change=\"{key}\"]'))")
        delta = Decimal(trend[figure]["change"]["USD"])
        assert shown and shown.startswith(("up " if delta > 0 else "down ") + fmt_money(abs(delta))), (key, shown)
        assert shown.endswith("on 2026-Q2"), shown
    text = browser.evaluate("document.body.innerText")
    assert "mean util pct: 2.4%" in text and "budget: $250,000.00" in text
    assert not re.search(r"\d\.\d{5,}", text) and "budget: 250000" not in text

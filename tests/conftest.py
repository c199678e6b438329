"""Shared fixtures for the test suite."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# --- what some tests need from outside the checkout -----------------------------------------------------------
# The public billing samples and the SARIF schema live beside the repository (../shared), never in it; Chromium,
# Java (for Spark) and Prometheus are system packages. Where one is absent its tests are skipped, saying what is
# missing and where it comes from; GPU_AUDITOR_REQUIRE (a comma-separated list of samples, chromium, java and
# prometheus; .ci/run names all four) makes that a failure instead.


def _missing(message: str, what: str) -> None:
    required = {w.strip() for w in os.environ.get("GPU_AUDITOR_REQUIRE", "").split(",")}
    if what in required:
        pytest.fail(f"{message} (required here: GPU_AUDITOR_REQUIRE names {what})", pytrace=False)
    pytest.skip(message)


def shared_folder(env: str, name: str) -> Path:
    """`$env` if set, else ../shared/<name> beside the repository."""
    return Path(os.environ.get(env) or REPO.parent / "shared" / name).resolve()


@pytest.fixture(scope="session")
def samples() -> Path:
    """The public billing export samples: `$GPU_AUDITOR_SAMPLES/billing`, by default ../shared/samples/billing.
    Each file there is a byte-for-byte copy from a public repository, named with its source and licence in
    SOURCES.md (FOCUS-Sample-Data, finopsfoundation/focus_converters, project-koku/koku, microsoft/finops-toolkit)."""
    folder = shared_folder("GPU_AUDITOR_SAMPLES", "samples") / "billing"
    if not (folder / "SOURCES.md").is_file():
        _missing(f"public billing samples not found at {folder} (the shared/samples/billing folder beside the "
                 "repository, see its SOURCES.md; set GPU_AUDITOR_SAMPLES to the folder that holds billing/)",
                 "samples")
    return folder


@pytest.fixture(scope="session")
def nvidia_smi() -> Path:
    """nvidia-smi's own output on a real H200 (and in h100/ an H100 80GB): `$GPU_AUDITOR_SAMPLES/nvidia-smi`, by
    default ../shared/samples/nvidia-smi (see its SOURCES.md)."""
    folder = shared_folder("GPU_AUDITOR_SAMPLES", "samples") / "nvidia-smi"
    if not (folder / "mig-lgip.txt").is_file():
        _missing(f"nvidia-smi samples not found at {folder}", "samples")
    return folder


@pytest.fixture
def locate(request):
    """For tests parametrized over fixtures and samples alike: a `Path` is used as it is, a `str` names a file in
    the public samples (so the test needs, and is skipped or fails without, the `samples` fixture)."""
    def locate(path: Path | str) -> Path:
        return path if isinstance(path, Path) else request.getfixturevalue("samples") / path
    return locate


@pytest.fixture(scope="session")
def sarif_schema() -> Path:
    """The official SARIF 2.1.0 JSON schema (oasis-tcs/sarif-spec, Schemata/sarif-schema-2.1.0.json):
    `$GPU_AUDITOR_REFERENCE/sarif-schema-2.1.0.json`, by default ../shared/reference/."""
    path = shared_folder("GPU_AUDITOR_REFERENCE", "reference") / "sarif-schema-2.1.0.json"
    if not path.is_file():
        _missing(f"SARIF 2.1.0 schema not found at {path} (oasis-tcs/sarif-spec Schemata/sarif-schema-2.1.0.json; "
                 "set GPU_AUDITOR_REFERENCE to the folder that holds it)", "samples")
    return path


@pytest.fixture(scope="session")
def chromium() -> str:
    """The headless browser tests/test_chromium.py drives: Debian's `chromium` (`apt-get install chromium`)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        _missing("chromium not found on PATH (the browser test needs a headless Chromium: `apt-get install "
                 "chromium` on Debian, `chromium-browser` on Ubuntu)", "chromium")
    return exe


# --- the fast loop: `pytest -m "not slow"` ---------------------------------------------------------------------
# A test is marked slow where it is (large generated files, thousands of documents, property runs, a wheel built and
# installed); one that starts Spark or the browser is slow by the fixture it asks for.
SLOW_FIXTURES = {"spark", "chromium"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


# --- the rule registry, restored after a test that registers throwaway rules ---------------------------------


@pytest.fixture
def rule_registry() -> Iterator[dict]:
    """The rule registry with the whole pack loaded; whatever a test registers is gone afterwards."""
    from auditor import registry as rule_module

    rule_module.all_rules()
    saved = dict(rule_module._REGISTRY)
    retired = dict(rule_module.RETIRED)
    try:
        yield rule_module._REGISTRY
    finally:
        rule_module._REGISTRY.clear()
        rule_module._REGISTRY.update(saved)
        rule_module.RETIRED.clear()
        rule_module.RETIRED.update(retired)


# --- one local Spark session for the --engine spark tests ------------------------------------------------------


@pytest.fixture(scope="session")
def spark():
    java_home = os.environ.get("JAVA_HOME")
    if not (shutil.which("java") or (java_home and (Path(java_home) / "bin" / "java").is_file())):
        _missing("java not found (Spark needs Java 17 or later on PATH or in $JAVA_HOME: `apt-get install "
                 "openjdk-17-jre-headless`)", "java")
    from auditor.tables import spark as engine

    s = engine.session("local[2]")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


# --- AWS through a moto server on loopback (tests/servers/moto_server.py) ---------------------------------------

@pytest.fixture(scope="session")
def moto():
    """One moto server for the session; each test that asks for `aws` starts from an empty one."""
    from servers.moto_server import MotoServer

    server = MotoServer()
    yield server
    server.stop()


@pytest.fixture
def aws(moto, monkeypatch):
    """The moto server, emptied, with the AWS environment of this test pointing at it."""
    moto.reset()
    moto.env(monkeypatch)
    return moto


@pytest.fixture(scope="session")
def prometheus_bin() -> tuple[str, str]:
    """Debian's `prometheus` and `promtool` (tests/test_pull_k8s_shared.py serves recorded DCGM series with them)."""
    prom, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prom or not promtool:
        _missing("prometheus and promtool are not installed (Debian: apt-get install prometheus)", "prometheus")
    return prom, promtool

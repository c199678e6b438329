"""Shared fixtures for the test suite."""

from __future__ import annotations

import compileall
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# --- bytecode caches ------------------------------------------------------------------------------------------
# With PYTHONDONTWRITEBYTECODE set, Python writes no module's compiled form, and every program the suite starts
# (each pytest-xdist worker, each `python -m auditor` a test runs as a subprocess) compiles the package, the rules
# and the test modules from source again: 0.15 s of CPU for each run of the gate alone, 4 s for each worker's
# collection. The suite writes them (into __pycache__, which git ignores) and the programs it starts read them,
# which needs no setting: the package's and the rules' once at the start, the test modules' as pytest imports them.
# So are the report's and the e-mail's templates (auditor/outputs/templates.py keeps them compiled beside them, in
# reports/__pycache__): 0.6 s of CPU for each program a test starts that renders a report, 0.01 s read back.
sys.dont_write_bytecode = False


def pytest_configure(config: pytest.Config) -> None:
    for folder in ("auditor", "rules"):
        compileall.compile_dir(REPO / folder, quiet=2)
    _compile_templates()


def _compile_templates() -> None:
    """Each environment's templates, and those they import or include, compiled (or read back) once."""
    import importlib

    import jinja2.meta

    from auditor.outputs import report

    compose = importlib.import_module("auditor.outputs.mail.compose")
    roots = ((report._env(), ["report.html.j2", "report.md.j2"]), (compose._env(True), ["email.html.j2"]),
             (compose._env(False), ["email.txt.j2"]))
    for env, names in roots:
        while names:
            name = names.pop()
            source = env.loader.get_source(env, name)[0]
            names += [n for n in jinja2.meta.find_referenced_templates(env.parse(source)) if n]
            env.get_template(name)

# --- what some tests need from outside the checkout -----------------------------------------------------------
# The public samples (billing exports, the Azure REST API specification's examples) and the SARIF schema live
# beside the repository (../shared), never in it; Chromium, Java (for Spark) and Prometheus are system packages.
# Every file from ../shared is found through `outside`, every program through its fixture below: where one is
# absent its tests are skipped, saying what is missing and where it comes from; GPU_AUDITOR_REQUIRE (a
# comma-separated list of samples, chromium, java, prometheus, focus and cgroup; .ci/run names them all) makes that a
# failure.


def _missing(message: str, what: str) -> None:
    required = {w.strip() for w in os.environ.get("GPU_AUDITOR_REQUIRE", "").split(",")}
    if what in required:
        pytest.fail(f"{message} (required here: GPU_AUDITOR_REQUIRE names {what})", pytrace=False)
    pytest.skip(message)


# A folder beside the repository: its environment variable, its name under ../shared, and where its files come from.
OUTSIDE = {
    "samples": ("GPU_AUDITOR_SAMPLES", "samples",
                "the public samples (billing exports and Azure REST API examples; each folder's SOURCES.md names their "
                "origin)"),
    "reference": ("GPU_AUDITOR_REFERENCE", "reference",
                  "the reference files (the OASIS SARIF 2.1.0 schema: oasis-tcs/sarif-spec Schemata/)"),
}


def outside(folder: str, *parts: str) -> Path:
    """A file or folder from outside the repository: `$ENV/<parts>` if the folder's variable is set, else
    ../shared/<folder>/<parts> beside the checkout. Where it is absent the test is skipped with the reason (failed
    where GPU_AUDITOR_REQUIRE names samples), never crashed on."""
    env, name, what = OUTSIDE[folder]
    root = Path(os.environ.get(env) or REPO.parent / "shared" / name).resolve()
    path = root.joinpath(*parts)
    if not path.exists():
        _missing(f"{path} not found: {what}, read from ../shared/{name} beside the repository or from ${env}",
                 "samples")
    return path


@pytest.fixture(scope="session")
def samples() -> Path:
    """The public billing export samples: `$GPU_AUDITOR_SAMPLES/billing`, by default ../shared/samples/billing.
    Each file there is a byte-for-byte copy from a public repository, named with its source and licence in
    SOURCES.md (FOCUS-Sample-Data, finopsfoundation/focus_converters, project-koku/koku, microsoft/finops-toolkit)."""
    return outside("samples", "billing", "SOURCES.md").parent


@pytest.fixture(scope="session")
def nvidia_smi() -> Path:
    """nvidia-smi's own output on a real H200 (and in h100/ an H100 80GB): `$GPU_AUDITOR_SAMPLES/nvidia-smi`, by
    default ../shared/samples/nvidia-smi (see its SOURCES.md)."""
    return outside("samples", "nvidia-smi", "mig-lgip.txt").parent


@pytest.fixture
def locate(request):
    """For tests parametrized over fixtures and samples alike: a `Path` is used as it is, a `str` names a file in
    the public samples (so the test needs, and is skipped or fails without, the `samples` fixture)."""
    def locate(path: Path | str) -> Path:
        return path if isinstance(path, Path) else request.getfixturevalue("samples") / path
    return locate


@pytest.fixture(scope="session")
def sarif_schema() -> Path:
    """The official SARIF 2.1.0 JSON schema: `$GPU_AUDITOR_REFERENCE/sarif-schema-2.1.0.json`, by default
    ../shared/reference/."""
    return outside("reference", "sarif-schema-2.1.0.json")


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
# installed); one that starts Spark or the browser is slow by the fixture it asks for. A test marked heavy (whole
# audits or whole exports, about a second or more a test, or many of them) is slow too: the fast loop leaves it
# out, but mutation testing (.ci/mutation.py) and the fresh-clone check run `-m "not slow or heavy"`, for the
# mutants these tests kill and the samples they read.
SLOW_FIXTURES = {"spark", "chromium"}
# Cases of a test that run in the full suite only, where the fast loop runs the same code on the test's other cases
# (the README's test section says which and why): the test's file::function, and which of its parameters are slow.
SLOW_CASES = {
    # every dialect read on the CUR sample in the fast loop; on the Azure, FOCUS and GCP samples too in the full
    "test_csv_dialect.py::test_every_sample_reads_the_same_in_every_dialect":
        lambda p: not p["name"].startswith("aws_cur_legacy/"),
    # CSV, gzip and Parquet parts of the CUR sample read as one scan in the fast loop; the FOCUS sample's in the full
    "test_parts.py::test_parts_read_as_one_scan_equal_the_parts_read_one_by_one":
        lambda p: p["sample"].startswith("focus/"),
    # a signal at every step of publishing: SIGKILL and SIGTERM in the fast loop; SIGINT, which the run handles as
    # it does SIGTERM (scratch.handle_sigterm: both a KeyboardInterrupt), in the full suite
    "test_reliability.py::test_a_signal_at_any_step_leaves_the_old_set_or_the_new":
        lambda p: p["sig"] == signal.SIGINT,
    "test_reliability.py::test_a_handled_signal_at_any_step_of_writing_into_the_working_folder":
        lambda p: p["sig"] == signal.SIGINT,
}


def function_of(nodeid: str) -> str:
    """A test's file and function, without its parameters: `test_x.py::test_y`."""
    module, _, function = nodeid.partition("::")
    return f"{Path(module).name}::{function.split('[', 1)[0]}"


def slow_case(item: pytest.Item) -> bool:
    slow = SLOW_CASES.get(function_of(item.nodeid))
    return slow is not None and slow(item.callspec.params)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        heavy = item.get_closest_marker("heavy") is not None
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or slow_case(item) or heavy:
            item.add_marker(pytest.mark.slow)
    if os.environ.get("GPU_AUDITOR_ONLY_OUTSIDE"):
        keep = [item for item in items if reads_outside(item)]
        config.hook.pytest_deselected(items=[item for item in items if not reads_outside(item)])
        items[:] = keep
    items.sort(key=first_rank)  # stable: the rest keep their order


def first_rank(item: pytest.Item) -> int:
    """Where a test's unit comes among the longest (LONGEST), which are handed out first; len(LONGEST) for the rest."""
    name = function_of(item.nodeid)
    return next((i for i, unit in enumerate(LONGEST) if name == unit or name.startswith(unit + "::")),
                len(LONGEST))


# --- the fresh-clone check (tests/test_fresh_clone.py): GPU_AUDITOR_ONLY_OUTSIDE=1 --------------------------
# On a clone with nothing beside it, every test module is collected (nothing the tests import is missing), and the
# tests that read something from outside the repository run: each must be skipped with its reason, never crash.
# The others need nothing but the repository, and CI runs them on its own clean checkout; the clone does not run
# them again. A test reads from outside through a fixture below or by calling `outside` or `_missing` itself.
OUTSIDE_FIXTURES = {"samples", "nvidia_smi", "locate", "sarif_schema", "chromium", "spark", "prometheus_bin"}


def reads_outside(item: pytest.Item) -> bool:
    if OUTSIDE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    return any(getattr(getattr(module, name, None), "__module__", None) == __name__ for name in ("outside", "_missing"))


# --- one worker per core: `-n auto` (pytest-xdist) in pyproject.toml ------------------------------------------
# The unit a worker takes is a test function with all its parameters: they run on one worker, in their order (the
# README's commands in tests/test_readme.py run in sequence), and a module fixture is built at most once per worker.
# A whole file is too coarse: tests/test_reliability.py alone would be the run's last minutes. The files whose
# module or session fixtures start a program or build an environment stay whole on one worker, so that it is done
# once, not once per worker: the browser, Prometheus, the built wheel (built_wheel: the installed wheel's tests
# and the Action's and GitLab job's runs share one unit), the Action's virtual environment, and the generated
# quarters' audits (15 s of CPU: each seed's made once a session, tests/test_generated_quarters.py).
# Spark's three files are one unit: its JVM starts once a run, not once a worker (its start and the first audits
# that warm its JIT are 20 to 25 s of CPU each time), and that unit goes first (LONGEST), so that the other worker
# takes the rest meanwhile. `-n 0` runs everything in this process.
ONE_WORKER = {"test_chromium.py": "chromium", "test_pull_k8s_shared.py": "prometheus", "test_wheel.py": "wheel",
              "test_integrations.py": "wheel", "test_unit_series.py": "prometheus-series",
              "test_generated_quarters.py": "quarters"}


# The units that take longest on 2 cores (a minute to three each), longest first: handed out before the thousands of
# short ones (in the order collected, not by their number of tests, xdist's default), so that no worker starts one
# of them while the other is running out of work.
LONGEST = ["test_spark.py", "test_spark_churn.py", "test_spark_uri.py", "test_integrations.py",
           "test_reliability.py::test_a_gzip_bomb_is_named_with_its_file_and_line", "test_fresh_clone.py",
           "test_benchmarks_harness.py::test_issue_15_shapes_high_churn_and_many_parts",
           "test_properties.py", "test_wheel.py", "test_generated_quarters.py"]


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # the units in the order collected: LONGEST first

    class ByFunction(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module, _, function = nodeid.partition("::")
            name = Path(module).name
            if name.startswith("test_spark"):
                return "spark"
            return ONE_WORKER.get(name) or f"{module}::{function.split('[', 1)[0]}"

    return ByFunction(config, log)


# --- this checkout as a wheel, built once -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> Path:
    """This checkout built as a wheel (`pip wheel --no-deps`, in an environment that cannot see the checkout's own
    Python settings), once for the tests that install it as users do: tests/test_wheel.py, the Action's runs and the
    GitLab job in tests/test_integrations.py (one unit in ONE_WORKER: 5 s of CPU a build)."""
    dist = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_REQUIRE"))}
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
                           "-w", str(dist), str(REPO)], cwd=dist, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [wheel] = dist.glob("gpu_auditor-*.whl")
    return wheel


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

    # The JIT's first tier only, and one GC thread: a test's Spark jobs are short, and the optimising compiler's
    # and the parallel collector's threads took CPU from the other worker without paying it back.
    s = engine.session("local[2]", conf={"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"})
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


# --- the demo audit, run once per session ----------------------------------------------------------------------


@dataclass(frozen=True)
class DemoRun:
    """The README's demo audit as the CLI ran it: its exit code, what it printed, and the folder it wrote."""
    exit_code: int
    stdout: str
    stderr: str
    folder: Path

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> DemoRun:
    """The README's demo audit (2026-Q3, as of 2026-10-15, with its inventory) run by the CLI once for the whole
    session: `audit -q --policy ... --out FOLDER fixtures/demo/billing`. Many tests read what it wrote and printed
    instead of running the same audit again; a test that writes beside it works on a copy (`demo_copy`)."""
    from click.testing import CliRunner

    from auditor.cli import cli

    demo = REPO / "fixtures" / "demo"
    out = tmp_path_factory.mktemp("demo-session") / "demo-report"
    result = CliRunner().invoke(cli, ["audit", "-q", "--policy", str(demo / "policy.yml"), "--inventory",
                                      str(demo / "inventory.json"), "--quarter", "2026-Q3", "--as-of", "2026-10-15",
                                      "--out", str(out), str(demo / "billing")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return DemoRun(result.exit_code, result.stdout, result.stderr, out)


@pytest.fixture(scope="session")
def demo_folder(demo_run) -> Path:
    """The folder of the session's demo audit (demo_run): its audit.json, report.html, report.md, findings.csv,
    jobs.csv and actions.csv. Read it; never write into it."""
    return demo_run.folder


@pytest.fixture
def demo_copy(demo_folder, tmp_path) -> Path:
    """A copy of the session's demo audit folder of this test's own, to write into (an outbox, a re-render)."""
    return Path(shutil.copytree(demo_folder, tmp_path / "demo-report"))


@pytest.fixture(scope="session")
def demo_audit_result():
    """The same demo audit run in process, once for the session: `run_audit` of fixtures/demo (2026-Q3, today
    2026-10-15, with the inventory), the `Audit` itself. Read it; never change it."""
    from datetime import date

    from auditor.core import run_audit
    from auditor.policy import load_policy
    from auditor.window import parse_quarter

    demo = REPO / "fixtures" / "demo"
    return run_audit(load_policy(demo / "policy.yml"), [demo / "billing"], demo / "inventory.json",
                     parse_quarter("2026-Q3"), date(2026, 10, 15))

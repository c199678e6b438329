"""Run the command line as a user without privileges, so that permission tests can fail.

The suite runs as root in CI, and root reads files whatever their mode: a test of an unreadable file would
pass whether or not the auditor handles it. As root, `run_as_nobody` runs the command as uid and gid 65534
(`nobody`): `python -m auditor` under `setpriv` (or `runuser`) where that user can start this Python and
import the auditor; else (the checkout or the Python installation under /root, which `nobody` cannot enter) it
forks, drops privileges in the child and runs the CLI there in-process, with everything a run loads imported
first. Not as root, the current user is
already unprivileged, and the CLI runs as it is. The files a test makes must lie in a folder that user can
reach: `open_folder()`.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

NOBODY = 65534


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str


def open_folder() -> Path:
    """A fresh folder under the system temp folder that the unprivileged user can list and write (pytest's
    tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="gpu-auditor-perm-"))
    folder.chmod(0o777)
    return folder


@cache  # once per process: what it loads stays loaded
def _load_everything() -> None:
    """Import and read, before privileges are dropped, what a run may load lazily: the child may not be able to
    read the Python installation or the checkout (under /root, private to root)."""
    import email.headerregistry  # noqa: F401 - imported inside functions of the auditor
    import encodings.utf_8_sig  # noqa: F401 - codecs are imported when first used
    import fcntl  # noqa: F401
    import importlib
    import mmap  # noqa: F401
    import pkgutil
    import traceback  # noqa: F401

    import auditor
    from auditor.outputs.report import _env
    from auditor.providers.catalog import load_catalog
    from auditor.registry import all_rules

    for m in pkgutil.walk_packages(auditor.__path__, "auditor."):
        cloud = m.name.rsplit(".", 1)[-1] in ("aws", "gcp", "azure", "k8s") and ".live." in m.name
        if not cloud and not m.name.endswith("__main__") and ".tables.spark" not in m.name:  # SDKs, Spark: unused
            importlib.import_module(m.name)
    all_rules()
    load_catalog()
    for name in ("report.html.j2", "report.md.j2"):
        _env().get_template(name)


@cache
def _switch() -> list[str] | None:
    """A command prefix that runs a program as `nobody`, if one can start this Python and import the auditor."""
    for prefix in (["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"],
                   ["runuser", "-u", "nobody", "--"]):
        if shutil.which(prefix[0]) and subprocess.run([*prefix, sys.executable, "-c", "import auditor.cli"],
                                                      cwd="/", capture_output=True).returncode == 0:
            return prefix
    return None


def run_as_nobody(*args: object) -> Run:
    from click.testing import CliRunner

    import auditor.cli as cli_module

    argv = [str(a) for a in args]
    if os.geteuid() != 0:
        result = CliRunner().invoke(cli_module.cli, argv)
        return Run(result.exit_code, result.stdout, result.stderr)
    scratch = open_folder()  # the run's temporary files, removed below whatever the run leaves
    try:
        return _run(argv, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(argv: list[str], scratch: Path) -> Run:
    from click.testing import CliRunner

    import auditor.cli as cli_module

    if _switch():
        proc = subprocess.run([*_switch(), sys.executable, "-m", "auditor", *argv], cwd="/", capture_output=True,
                              text=True, timeout=300, env={**os.environ, "TMPDIR": str(scratch)})
        return Run(proc.returncode, proc.stdout, proc.stderr)
    _load_everything()
    read, write = os.pipe()
    gc.freeze()  # the child must not collect what it inherits (DuckDB's objects): their destructors crash there
    pid = os.fork()
    if pid == 0:  # the child: drop privileges for good, run, report back, and leave without cleanup
        code = 0
        try:
            gc.disable()
            os.close(read)
            os.chdir("/")  # the test's working folder may be private to root: imports would not find modules
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            tempfile.tempdir = str(scratch)  # the child leaves by os._exit: its scratch folder stays there
            result = CliRunner().invoke(cli_module.cli, argv)
            payload = [result.exit_code, result.stdout, result.stderr]
        except BaseException as e:  # noqa: BLE001 - anything goes back to the test as a failure
            payload = [99, "", f"the unprivileged child failed: {type(e).__name__}: {e}"]
        try:
            with os.fdopen(write, "w") as fh:
                json.dump(payload, fh)
        finally:
            os._exit(code)
    gc.unfreeze()
    os.close(write)
    with os.fdopen(read) as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    exit_code, stdout, stderr = json.loads(data)
    return Run(exit_code, stdout, stderr)

"""The jinja environments of the report and e-mail templates (reports/, shipped as `auditor.reports`), with the
templates' compiled form kept beside them as Python keeps its modules': in `__pycache__`, written where that
folder is writable and Python writes bytecode (not under PYTHONDONTWRITEBYTECODE), read wherever it is there.
Compiling the report's and the e-mail's templates is 0.4 s of CPU a run; reading them back, a few milliseconds.
A compiled template is used only for the same source (jinja keeps its checksum), jinja and Python version."""

from __future__ import annotations

import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2


class _BesideTheTemplates(jinja2.FileSystemBytecodeCache):
    """A bytecode cache that never stops a run: a folder it cannot read or write is not used for that."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except OSError:
            pass

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if sys.dont_write_bytecode:
            return
        try:
            Path(self.directory).mkdir(exist_ok=True)
            super().dump_bytecode(bucket)
        except OSError:
            pass


def compiled_folder() -> Path:
    return Path(str(files("auditor.reports"))) / "__pycache__"


def environment(name: str, **options: Any) -> jinja2.Environment:
    """An environment over the templates with `options`. `name` tells its compiled templates from another
    environment's: two that set other options compile the same template (charts.html.j2) to other code."""
    cache = _BesideTheTemplates(str(compiled_folder()), f"jinja2-{name}-%s.cache")
    return jinja2.Environment(loader=jinja2.PackageLoader("auditor.reports", "."), bytecode_cache=cache,
                              **options)

"""Input files: their content digest, which names a file in audit.json and the snapshot manifest alike, and their
names as outputs show them and as DuckDB opens them (a name that is not UTF-8)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from auditor.scratch import Scratch


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def shown(path: str | os.PathLike[str]) -> str:
    """A file's name as every message, key and output holds it: its own, or, where it is not UTF-8 (a latin-1
    `coût.csv` on a UTF-8 system, which Python reads with surrogate escapes), with each byte that is not written
    `\\xNN` (`co\\xfbts.csv`): text any output holds on one line, the same for the same file, and what
    text.one_line shows of the name itself."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


_links: dict[str, str] = {}
_link_folder: Scratch | None = None


def readable(path: str | os.PathLike[str]) -> str:
    """The name DuckDB is given to open a file: its own, or, where it is not UTF-8 (DuckDB takes only UTF-8
    names), a symbolic link to it in a scratch folder of this run, made once a file."""
    global _link_folder
    text = os.fspath(path)
    if shown(text) == text:
        return text
    if text not in _links:
        if _link_folder is None:
            _link_folder = Scratch()
        raw = os.fsencode(os.path.abspath(text))
        name = hashlib.sha256(raw).hexdigest()[:16] + "".join(Path(shown(text)).suffixes)  # .csv.gz kept
        link = os.path.join(_link_folder.name, name)
        os.symlink(raw, link)
        _links[text] = link
    return _links[text]

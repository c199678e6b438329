"""Input files and folders, listed with every path that cannot be read named, never skipped.

A billing folder with a subfolder the auditor may not list would give a report missing a month; a symbolic
link to nowhere would drop a file without a word. So a folder is walked here, each file the caller wants is
opened once to prove it can be read, and everything that stands in the way (a folder or file without read
permission, a dangling or looping symbolic link, a link back to a folder above it, something that is no
file) is collected and reported together, one line each: the input is refused, never read in part.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from auditor.errors import InputError, InputErrors


def _why(e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return "a symbolic link that loops (it leads back to itself)"
    if e.errno == errno.ENOENT:
        return "no such file or folder"
    return e.strerror or type(e).__name__


def _link_problem(path: Path) -> str | None:
    """What is wrong with a symbolic link that leads nowhere, or None when it leads somewhere."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ENOENT:
            try:
                to = os.readlink(path)
            except OSError:
                to = "?"
            return f"a symbolic link to {to}, which does not exist"
        return _why(e)
    return None


def check_file(path: Path, what: str = "file") -> Path:
    """A file named directly, proved readable: an InputError naming it (one line) otherwise."""
    if not os.path.lexists(path):
        raise InputError("no such file or folder", path=str(path))
    if path.is_symlink() and (problem := _link_problem(path)):
        raise InputError(f"cannot read the {what}: {problem}", path=str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise InputError(f"cannot read the {what}: {_why(e)}", path=str(path)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"cannot read the {what}: not a regular file", path=str(path))
    finally:
        os.close(fd)
    return path


def kind_of(path: Path, what: str = "file", open_file: bool = True) -> str:
    """"folder" or "file" for a path named directly (a file proved readable); an InputError naming it when it
    is neither, or cannot be reached (a folder on the way without permission, a dangling or looping link)."""
    try:
        st = os.stat(path)
    except OSError as e:
        if e.errno == errno.ENOENT and os.path.islink(path):
            raise InputError(f"cannot read the {what}: {_link_problem(path)}", path=str(path)) from None
        if e.errno == errno.ENOENT:
            raise InputError("no such file or folder", path=str(path)) from None
        raise InputError(f"cannot read the {what}: {_why(e)}", path=str(path)) from None
    if stat.S_ISDIR(st.st_mode):
        return "folder"
    if open_file:
        check_file(path, what)
    return "file"


def files_under(folder: Path, wanted: Callable[[Path], bool], what: str = "file", open_files: bool = True
                ) -> list[Path]:
    """The files under `folder` (recursively, following links to files and folders) that `wanted` accepts,
    sorted, each proved readable. Every folder that cannot be listed and every wanted file or link that cannot
    be read is an error; all of them are raised together (InputErrors), one line each. With `open_files` False
    a file's own permission is left to its reader (the gate names each unreadable manifest and judges the
    rest); folders and links are still checked here."""
    errors: list[InputError] = []
    found: list[Path] = []
    above: set[tuple[int, int]] = set()  # the folders on the way down to the one being listed

    def walk(d: Path) -> None:
        try:
            st = os.stat(d)
            key = (st.st_dev, st.st_ino)
            if key in above:
                errors.append(InputError("cannot read the folder: a symbolic link back to a folder above it "
                                         "(a loop)", path=str(d)))
                return
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            errors.append(InputError(f"cannot read the folder: {_why(e)}", path=str(d)))
            return
        above.add(key)
        try:
            visit(entries)
        finally:
            above.discard(key)

    def visit(entries: list[os.DirEntry]) -> None:
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir()  # follows a link
                is_link = entry.is_symlink()
            except OSError as e:
                errors.append(InputError(f"cannot read: {_why(e)}", path=str(path)))
                continue
            if is_dir:
                if is_link and _leads_above(path):
                    errors.append(InputError("cannot read the folder: a symbolic link back to a folder above it "
                                             "(a loop)", path=str(path)))
                else:
                    walk(path)
                continue
            if not wanted(path):
                continue
            if is_link and (problem := _link_problem(path)):
                errors.append(InputError(f"cannot read the {what}: {problem}", path=str(path)))
                continue
            try:
                if open_files:
                    check_file(path, what)
            except InputError as e:
                errors.append(e)
                continue
            found.append(path)

    walk(folder)
    InputErrors.raise_if_any(errors)
    return sorted(found)


def _leads_above(link: Path) -> bool:
    """Whether a link to a folder leads to the folder it is in, or to one above it."""
    real, here = os.path.realpath(link), os.path.realpath(link.parent)
    return here == real or here.startswith(real.rstrip(os.sep) + os.sep)


def outside_inputs(out: Path, inputs: list[Path], what: str, option: str) -> None:
    """Refuse an output folder inside (or the same as) an input folder: the next run that reads the folder
    would read what this one writes as billing (the report's CSVs refused, a FOCUS export counted again)."""
    written = Path(os.path.realpath(out))
    for given in inputs:
        folder = Path(os.path.realpath(given))
        if os.path.isdir(folder) and (written == folder or folder in written.parents):  # never raises
            raise InputError(f"is inside the billing folder {given}, where the next run would read the {what} as "
                             f"billing: give {option} a folder outside it", path=str(out))


def read_text(path: str | Path, what: str) -> str:
    """A text file a user writes (a policy, a manifest, an inventory): UTF-8, with or without the byte order mark
    Windows editors write; else one line naming the line where it stops being UTF-8. (OSError is the caller's.)"""
    data = Path(path).read_bytes()
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"the {what} is UTF-16 text; save it as UTF-8", path=str(path), line=1)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        start = data.rfind(b"\n", 0, e.start) + 1
        raise InputError(f"the {what} is not UTF-8 text: byte 0x{data[e.start]:02x}, the line's byte "
                         f"{e.start - start + 1} (Latin-1 or Windows-1252?); save it as UTF-8", path=str(path),
                         line=data.count(b"\n", 0, e.start) + 1) from None


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's keys, each once (json.loads' object_pairs_hook): of a key given twice, Python keeps the
    last without a word, where YAML policies refuse it."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} twice in one object")
        out[key] = value
    return out

"""Writing outputs: whole or not at all, and never through a symbolic link nobody asked to follow.

Every file gpu-auditor writes (the report, the gate's output, the e-mail outbox, a pulled snapshot) is
written to a temporary name beside its target and renamed into place, so a failed or interrupted run never
leaves half a file. A path the user gives (`--out`, `--output`, `--outbox`) is checked first: where the path,
or a folder on the way to it, is a symbolic link, the write is refused, unless the user asks to follow links
(`--follow-symlinks`). In CI, a checked-out repository can plant `audit-report -> /etc`; gpu-auditor, often run
as root there, would otherwise write wherever that points. Folders at or above the working directory are not
checked: they are where the user already is.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from auditor.errors import InputError

_UMASK = os.umask(0)
os.umask(_UMASK)


def first_symlink(path: Path) -> Path | None:
    """The first symbolic link on the way to `path` (the path itself included), as the OS would walk it;
    the working directory and the folders above it are not looked at."""
    cwd = Path.cwd()
    above = {cwd, *cwd.parents}
    parts = Path(os.path.join(cwd, path)).parts
    current = Path(parts[0])
    for part in parts[1:]:
        if part == ".":
            continue
        current = current.parent if part == ".." else current / part
        if part != ".." and current not in above and current.is_symlink():
            return current
    return None


def target(path: Path, follow_symlinks: bool = False) -> Path:
    """Where to write `path`: itself, or with `follow_symlinks` the real path it leads to. A symbolic link on
    the way is refused (one line naming it and where it points) unless links are to be followed."""
    path = Path(path)
    if follow_symlinks:
        return Path(os.path.realpath(path))
    link = first_symlink(path)
    if link is not None:
        try:
            to = f" (to {os.readlink(link)})"
        except OSError:
            to = ""
        itself = link == Path(os.path.join(Path.cwd(), path))
        message = f"is a symbolic link{to}" if itself else f"goes through a symbolic link: {link}{to}"
        raise InputError(f"{message}; refusing to write through it (give the real path, or add --follow-symlinks "
                         "to write where it points)", path=str(path))
    return path


def write_file(path: Path, data: str | bytes, mode: int | None = 0o666) -> None:
    """Write `data` to `path` through a temporary file beside it and a rename. `mode` is masked by the umask
    as for any new file; None keeps the temporary file's 0600 (messages, state)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        if mode is not None:
            os.chmod(tmp, mode & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_files(folder: Path, files: dict[str, str | bytes | Callable[[TextIO], None]],
                what: str = "report") -> list[Path]:
    """Write several files into `folder` as one (text, bytes, or a function that streams the text into a file):
    each to a temporary name, then all renamed into place; on a
    failure (or Ctrl-C between two renames) the previous files are put back as they were. An OSError becomes
    one line naming the folder."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the output folder: {e.strerror}", path=str(folder)) from None
    temps: list[tuple[str, Path]] = []
    backups: list[tuple[str, Path]] = []  # the previous files, kept until every new file is in place
    replaced: list[Path] = []
    try:
        for name, data in files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
            temps.append((tmp, folder / name))
            if callable(data):  # a writer that streams the file (audit.json, findings.csv: every finding)
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as text:
                    data(text)
            else:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a report is as readable as any file
        for _, final in temps:
            if final.exists() and not final.is_symlink():
                backup = f"{tempfile.mkdtemp(prefix=f'.{final.name}.old.', dir=folder)}/{final.name}"
                os.link(final, backup)
                backups.append((backup, final))
        for tmp, final in temps:
            os.replace(tmp, final)  # a symbolic link at `final` is replaced, never written through
            replaced.append(final)
    except BaseException as e:
        for backup, final in backups:  # put the previous files back as they were
            if final in replaced:
                os.replace(backup, final)
        for final in replaced:
            if not any(f == final for _, f in backups) and final.exists():
                final.unlink()
        if isinstance(e, OSError):
            raise InputError(f"cannot write the {what}: {e.strerror}; the previous {what} is left as it was",
                             path=str(folder)) from None
        raise
    finally:
        for tmp, _ in temps + backups:
            if os.path.exists(tmp):
                os.unlink(tmp)
        for backup, _ in backups:
            os.rmdir(os.path.dirname(backup))
    return [folder / n for n in files]


def replace_folder(staging: Path, out: Path) -> None:
    """Put a folder written under a temporary name (`staging`, beside `out`) in place of `out`."""
    if out.exists() or out.is_symlink():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.rename(out, old)
        os.rename(staging, out)
        if old.is_symlink():
            old.unlink()
        else:
            shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(staging, out)

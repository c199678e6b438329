"""Writing outputs: whole or not at all, as a set, only as regular files, and never through a symbolic link
nobody asked to follow.

A run's outputs (the report's files, a pulled snapshot) are published as one set: written into a hidden folder
beside the target (`.OUT.gpu-auditor-XXXX`), which then takes the target's place in one step, the two folders
exchanged by the kernel (Linux `renameat2(RENAME_EXCHANGE)`; a plain rename where there is no target yet). At
every instant the target holds either the previous complete set or the new complete one, whatever signal
arrives. What the target held besides the set (a user's notes, the e-mail outbox) goes into the new folder too
(files as hard links, folders moved). The hidden folder holds a lock (flock) while its run lives; a run killed
with SIGKILL leaves it behind, and the next run that writes beside it removes it (a folder it had carried over
is first moved back). Where the target cannot be exchanged (it is the working folder or above it, a mount
point, its parent takes no new folder, a file system without the call), the files are renamed into it one by
one, with SIGINT and SIGTERM held off until the last rename, and put back on an error.

A single file (the gate's output, the outbox's messages) is written to a temporary name beside it and renamed.
An existing output path that is not a regular file (a device such as /dev/null, a named pipe, a socket, a
folder) is refused: a rename would replace it. A path the user gives (`--out`, `--output`, `--outbox`) is
checked first: where the path, or a folder on the way to it, is a symbolic link, the write is refused, unless
the user asks to follow links (`--follow-symlinks`). In CI, a checked-out repository can plant
`audit-report -> /etc`; gpu-auditor, often run as root there, would otherwise write wherever that points.
Folders at or above the working directory are not checked: they are where the user already is.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import shutil
import signal
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TextIO

from auditor.errors import InputError

_UMASK = os.umask(0)
os.umask(_UMASK)

STAGING = ".gpu-auditor-"  # a hidden folder beside its target: `.{target}.gpu-auditor-XXXX`
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
published: list[Path] = []  # the sets this process has published (an interrupt after one does not undo it)
_CANNOT_EXCHANGE = {errno.ENOSYS, errno.EINVAL, errno.EXDEV, errno.EBUSY, errno.ENOTSUP, errno.EPERM}

Data = str | bytes | Callable[[TextIO], None]


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


def target(path: Path, follow_symlinks: bool = False, folder: bool = False) -> Path:
    """Where to write `path`: itself, or with `follow_symlinks` the real path it leads to. A symbolic link on
    the way is refused (one line naming it and where it points) unless links are to be followed; so is a path
    that exists and is not a regular file (or, with `folder`, not a folder)."""
    path = Path(path)
    if follow_symlinks:
        path = Path(os.path.realpath(path))
    elif (link := first_symlink(path)) is not None:
        try:
            to = f" (to {os.readlink(link)})"
        except OSError:
            to = ""
        itself = link == Path(os.path.join(Path.cwd(), path))
        message = f"is a symbolic link{to}" if itself else f"goes through a symbolic link: {link}{to}"
        raise InputError(f"{message}; refusing to write through it (give the real path, or add --follow-symlinks "
                         "to write where it points)", path=str(path))
    _refuse_special(path, folder)
    return path


def _refuse_special(path: Path, folder: bool = False) -> None:
    """An existing `path` that is not what gpu-auditor writes (a regular file; with `folder`, a folder) is
    refused in one line: a rename would replace a device, a pipe or a folder, and an open would block on a pipe."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:  # absent (or unreachable: the write will say why)
        return
    if stat.S_ISLNK(mode) or (stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode)):
        return
    kind = next((k for test, k in _KINDS if test(mode)), "a file")
    if folder:
        raise InputError(f"is {kind}, not a folder; the outputs are written into a folder", path=str(path))
    raise InputError(f"is {kind}; gpu-auditor writes only regular files (give a file's path, or - for standard "
                     "output)", path=str(path))


def _write(path: str | Path, data: Data, fd: int | None = None) -> None:
    """One file's content: text, bytes, or a function that streams the text into the file."""
    if fd is None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    if callable(data):  # a writer that streams the file (audit.json, findings.csv: every finding)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as text:
            data(text)
    else:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)


def write_file(path: Path, data: str | bytes, mode: int | None = 0o666, what: str = "file") -> None:
    """Write `data` to `path` through a temporary file beside it and a rename. `mode` is masked by the umask
    as for any new file; None keeps the temporary file's 0600 (messages, state). An OSError (a full disk, a
    name too long) becomes one line naming the path; the previous file is left as it was."""
    _refuse_special(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        _write(tmp, data, fd)
        if mode is not None:
            os.chmod(tmp, mode & ~_UMASK)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise InputError(f"cannot write the {what}: {e.strerror}", path=str(path)) from None
        raise


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held off (delivered when the block ends): a step of several renames is not cut."""
    held = {signal.SIGINT, signal.SIGTERM}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@cache
def _renameat2():
    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # not Linux, or a C library without it
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


def _exchange(a: Path, b: Path) -> None:
    """Swap two paths in one step (renameat2 with RENAME_EXCHANGE): at no instant is either missing."""
    call = _renameat2()
    if call is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS), str(b))
    at_cwd, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE
    if call(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), exchange) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(b))


class Staging:
    """A hidden folder beside `out`, locked (flock) while its run lives: where a set is written before it is
    published (`publish`) in place of `out`. Removed on close, unless published as `out`."""

    def __init__(self, out: Path, carry: bool = True):
        self.out = out
        self.carry = carry
        parent = out.parent
        remove_leftovers(out)
        while True:
            self.path = Path(tempfile.mkdtemp(prefix=_prefix(out, carry), dir=parent))
            self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
            fcntl.flock(self._fd, fcntl.LOCK_EX)  # waits for a run that took it for a leftover, then removed it
            try:
                if os.stat(self.path).st_ino == os.fstat(self._fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(self._fd)
        self.carried: list[str] = []  # folders of `out` moved into this one
        self.published = False

    def publish(self) -> None:
        """Put this folder in place of `out` in one step; what `out` held besides the set comes along."""
        out = self.out
        with signals_held():  # the folders carried over and the exchange: all of them, or none
            if not out.exists():
                try:
                    os.rename(self.path, out)
                    self._published()
                    return
                except OSError as e:
                    if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):  # made meanwhile: exchanged below
                        raise
            if self.carry:
                self._carry()
            _exchange(self.path, out)
            self._published()  # `self.path` is now the previous set, removed by close()

    def _published(self) -> None:
        self.published = True
        published.append(self.out)

    def _carry(self) -> None:
        """The entries of `out` that are not part of the new set, into this folder: files (and links, pipes)
        as hard links (copies where the file system has none), folders moved; leftovers of old runs dropped."""
        new = {p.name for p in self.path.iterdir()}
        os.chmod(self.path, stat.S_IMODE(os.stat(self.out).st_mode))
        for entry in os.scandir(self.out):
            if entry.name in new or _is_temp(entry.name, new):
                continue
            source, dest = os.path.join(self.out, entry.name), self.path / entry.name
            if entry.is_dir(follow_symlinks=False):
                os.rename(source, dest)
                self.carried.append(entry.name)
            else:
                try:
                    os.link(source, dest, follow_symlinks=False)
                except OSError:
                    shutil.copy2(source, dest, follow_symlinks=False)

    def close(self) -> None:
        """Remove the folder: the previous set once published; otherwise the unpublished new one, with the
        folders carried into it moved back first."""
        try:
            with signals_held():  # an interrupt now would leave the folder to the next run
                if not self.published:
                    for name in self.carried:
                        os.rename(self.path / name, self.out / name)
                shutil.rmtree(self.path, ignore_errors=True)
        finally:
            os.close(self._fd)


def _prefix(out: Path, carry: bool) -> str:
    """The name of a hidden folder beside `out` starts with this: `c` where folders of `out` may be carried into
    it (a report's set has none of its own), `s` where its folders are the set's own (a snapshot's)."""
    return f".{out.name}{STAGING}{'c' if carry else 's'}"


def _is_temp(name: str, names: set[str]) -> bool:
    """A temporary file (or backup folder) an earlier run of the file-by-file write left for one of `names`."""
    return any(name.startswith(f".{n}.") for n in names)


def remove_leftovers(out: Path) -> list[Path]:
    """Remove the hidden folders of runs that died while writing beside `out` (their lock free), after moving
    back into `out` any folder they had carried over; what was removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(out.parent))
    except OSError:
        return removed
    for entry in entries:
        carried = entry.name.startswith(_prefix(out, carry=True))
        if not (carried or entry.name.startswith(_prefix(out, carry=False))) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # taken: its run is gone
            for inner in os.scandir(entry.path):
                if carried and inner.is_dir(follow_symlinks=False) and out.is_dir() and \
                        not (out / inner.name).exists():
                    os.rename(inner.path, out / inner.name)  # a folder carried over: back where it was
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
        except OSError:  # held by a live run (BlockingIOError), or gone meanwhile
            continue
        finally:
            os.close(fd)
    return removed


def _exchangeable(out: Path) -> bool:
    """Whether `out` may be swapped for a new folder: not the working folder or one above it."""
    cwd = os.path.realpath(os.getcwd())
    real = os.path.realpath(out)
    return not (cwd == real or cwd.startswith(real.rstrip(os.sep) + os.sep))


def write_files(folder: Path, files: Mapping[str, Data], what: str = "report") -> list[Path]:
    """Write several files into `folder` as one set (text, bytes, or a function that streams the text into a
    file): all of them, published in one step, or none, the previous set left as it was. An OSError becomes
    one line naming the folder."""
    _refuse_special(folder, folder=True)
    for name in files:
        _refuse_special(folder / name)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the output folder: {e.strerror}", path=str(folder)) from None
    try:
        if _exchangeable(folder):
            try:
                return _write_set(folder, files)
            except OSError as e:
                if e.errno not in _CANNOT_EXCHANGE | {errno.EACCES, errno.EROFS} or not folder.is_dir():
                    raise
            # the folder cannot be exchanged (a mount point, a parent without write permission): file by file
        return _write_in_place(folder, files)
    except OSError as e:
        if not folder.exists() and e.errno in (errno.EACCES, errno.EROFS, errno.ENOENT, errno.EPERM):
            raise InputError(f"cannot create the output folder: {e.strerror}", path=str(folder)) from None
        raise InputError(f"cannot write the {what}: {e.strerror}; the previous {what} is left as it was",
                         path=str(folder)) from None


def _write_set(folder: Path, files: Mapping[str, Data]) -> list[Path]:
    staging = Staging(folder)
    try:
        os.chmod(staging.path, 0o777 & ~_UMASK)  # as a new folder is made (mkdtemp makes 0700)
        for name, data in files.items():
            _write(staging.path / name, data)
            os.chmod(staging.path / name, 0o666 & ~_UMASK)  # a report is as readable as any file
        staging.publish()
    finally:
        staging.close()
    return [folder / n for n in files]


def _write_in_place(folder: Path, files: Mapping[str, Data]) -> list[Path]:
    """Each file to a temporary name in `folder`, then all renamed into place with SIGINT and SIGTERM held off;
    on a failure the previous files are put back as they were."""
    folder.mkdir(exist_ok=True)
    for entry in os.scandir(folder):  # temporary files of a run killed here
        if _is_temp(entry.name, set(files)):
            shutil.rmtree(entry.path, ignore_errors=True) if entry.is_dir(follow_symlinks=False) \
                else os.unlink(entry.path)
    temps: list[tuple[str, Path]] = []
    backups: list[tuple[str, Path]] = []  # the previous files, kept until every new file is in place
    replaced: list[Path] = []
    try:
        for name, data in files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
            temps.append((tmp, folder / name))
            _write(tmp, data, fd)
            os.chmod(tmp, 0o666 & ~_UMASK)
        with signals_held():
            for _, final in temps:
                if final.exists() and not final.is_symlink():
                    backup = f"{tempfile.mkdtemp(prefix=f'.{final.name}.old.', dir=folder)}/{final.name}"
                    os.link(final, backup)
                    backups.append((backup, final))
            try:
                for tmp, final in temps:
                    os.replace(tmp, final)  # a symbolic link at `final` is replaced, never written through
                    replaced.append(final)
            except BaseException:
                for backup, final in backups:  # put the previous files back as they were
                    if final in replaced:
                        os.replace(backup, final)
                for final in replaced:
                    if not any(f == final for _, f in backups) and final.exists():
                        final.unlink()
                raise
    finally:
        with signals_held():  # an interrupt now would leave temporary files to the next run
            for tmp, _ in temps + backups:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            for backup, _ in backups:
                os.rmdir(os.path.dirname(backup))
    return [folder / n for n in files]

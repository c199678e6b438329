"""The outbox, the ledger of what was sent: each message an `.eml` file with a JSON state file beside it.
A message's key is a hash of the audit's fingerprint and the recipient; a key whose state says `sent` is
never sent again, and whatever is not sent stays for `--resend`.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy as email_policy
from email.message import EmailMessage
from pathlib import Path
from typing import IO, Any

from auditor.atomic import target, write_file
from auditor.errors import InputError

SENT, PENDING, DRAFT, FAILED = "sent", "pending", "draft", "failed"


def slug(value: str, limit: int = 40) -> str:
    """A file-name part that cannot leave its folder: letters, digits, `_` and `-` only (no dots, no
    slashes), never empty."""
    text = unicodedata.normalize("NFKD", str(value)).encode("ascii", "ignore").decode()
    text = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-_")[:limit].strip("-_")
    return text or "x"


@dataclass
class Entry:
    """One message in the outbox: `<stem>.eml` and its state `<stem>.json`."""

    folder: Path
    stem: str
    state: dict[str, Any]

    @property
    def eml(self) -> Path:
        return self.folder / f"{self.stem}.eml"

    @property
    def state_file(self) -> Path:
        return self.folder / f"{self.stem}.json"

    @property
    def sent(self) -> bool:
        return self.state.get("status") == SENT

    def save(self) -> None:
        write_file(self.state_file, json.dumps(self.state, indent=2, ensure_ascii=False) + "\n", mode=None)


class Outbox:
    """A folder of messages and their states. Held with an exclusive lock while in use, so two runs cannot
    send the same message at once."""

    def __init__(self, folder: Path, create: bool = True, follow_symlinks: bool = False):
        folder = target(folder, follow_symlinks, folder=True)
        self.folder = folder
        if not create and not folder.is_dir():
            raise InputError("no outbox here", path=str(folder))
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cannot create the outbox: {e.strerror}", path=str(folder)) from None
        self._lock: IO[str] | None = None

    def __enter__(self) -> Outbox:
        import fcntl

        try:
            lock = open(self.folder / ".lock", "w")  # held until __exit__
        except OSError as e:
            raise InputError(f"cannot use the outbox: {e.strerror}", path=str(self.folder)) from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise InputError("another gpu-auditor email is using this outbox", path=str(self.folder)) from None
        self._lock = lock
        return self

    def __exit__(self, *exc) -> None:
        if self._lock:
            self._lock.close()

    def entries(self) -> list[Entry]:
        out = []
        for file in sorted(self.folder.glob("*.json")):
            try:
                state = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise InputError(f"cannot read this outbox state file: {e}", path=str(file)) from None
            if isinstance(state, dict) and "key" in state and (file.with_suffix(".eml")).is_file():
                out.append(Entry(self.folder, file.stem, state))
        return out

    def put(self, msg: EmailMessage, state: dict[str, Any], label: str) -> Entry:
        """Queue a message, unless its key was already sent (then the sent entry comes back unchanged)."""
        known = {e.state["key"]: e for e in self.entries()}
        entry = known.get(state["key"])
        if entry is None:
            entry = Entry(self.folder, f"{slug(label)}-{state['key'][:12]}", {})
            if entry.eml.resolve().parent != self.folder.resolve():  # belt and braces; slug() allows no path
                raise InputError(f"message file name {entry.stem!r} leaves the outbox", path=str(self.folder))
        elif entry.sent:
            return entry
        entry.state = {**state, "attempts": entry.state.get("attempts", 0), "errors": entry.state.get("errors", []),
                       "eml": entry.eml.name}
        write_file(entry.eml, msg.as_bytes(policy=email_policy.SMTP), mode=None)
        entry.save()
        return entry


def now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def left(outbox: Outbox) -> list[Entry]:
    return [e for e in outbox.entries() if not e.sent]

"""The whole job of `gpu-auditor email`: queue an audit's messages in the outbox and send them, or send
what an outbox has left.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from auditor.outputs.mail.compose import compose_all, load_audit
from auditor.outputs.mail.outbox import DRAFT, PENDING, Entry, Outbox, left
from auditor.outputs.mail.smtp import ENV, Outcome, Retry, SmtpSettings, deliver
from auditor.policy import Policy
from auditor.secret_patterns import mask_deep
from auditor.text import one_line


@dataclass
class Run:
    """What one `gpu-auditor email` did: every message of the audit (or of the outbox), what each send
    attempt ended in, and warnings."""

    outbox: Path
    entries: list[Entry]
    outcomes: list[Outcome] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def left(self) -> list[Entry]:
        return [e for e in self.entries if not e.sent]


def send_audit(audit_path: Path, policy: Policy, outbox: Path, settings: SmtpSettings | None,
               sender: str | None = None, retry: Retry | None = None,
               progress: Callable[[Outcome], None] | None = None,
               env: Mapping[str, str] | None = None, follow_symlinks: bool = False) -> Run:
    """Queue the audit's messages in the outbox and, unless `settings` is None (a dry run), send them."""
    env = os.environ if env is None else env
    audit, _ = load_audit(audit_path)
    if policy.mask_secrets and (audit.get("policy") or {}).get("mask_secrets", True):
        audit = mask_deep(audit)
    warnings = []
    if audit.get("policy", {}).get("name") != policy.name:
        warnings.append(f"the audit was run under policy {one_line(audit.get('policy', {}).get('name'))!r}, "
                        f"not {one_line(policy.name)!r}; teams and leads come from {policy.path or 'the policy'}")
    drafts = compose_all(audit, policy, sender or env.get(ENV + "FROM"), DRAFT if settings is None else PENDING)
    with Outbox(outbox, follow_symlinks=follow_symlinks) as box:
        entries = [box.put(d.msg, d.state, d.label) for d in drafts]  # an already sent one stays as it was
        outcomes = [] if settings is None else deliver(box, entries, settings, retry, progress)
    return Run(outbox, entries, outcomes, warnings)


def resend(outbox: Path, settings: SmtpSettings, retry: Retry | None = None,
           progress: Callable[[Outcome], None] | None = None, follow_symlinks: bool = False) -> Run:
    """Send whatever the outbox holds that was not sent yet (failed, pending, or drafts of a dry run)."""
    with Outbox(outbox, create=False, follow_symlinks=follow_symlinks) as box:
        entries = left(box)
        return Run(outbox, entries, deliver(box, entries, settings, retry, progress))

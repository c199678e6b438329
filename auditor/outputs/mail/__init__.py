"""Email the audit: one message per recipient (each team lead about their team, the policy owner a summary of
every team plus all that no team owns), queued in an outbox folder and delivered over SMTP.

`route` says who gets what, `compose` builds the messages, `outbox` keeps them and their state (the ledger that
never sends one audit to one inbox twice), `smtp` delivers them, `send` is the whole job.
"""

from auditor.outputs.mail.compose import audit_fingerprint, compose, compose_all, load_audit, message_key, subject
from auditor.outputs.mail.outbox import Entry, Outbox, slug
from auditor.outputs.mail.route import Letter, Section, route
from auditor.outputs.mail.send import Run, resend, send_audit
from auditor.outputs.mail.smtp import ENV, Outcome, Retry, SmtpSettings, deliver, smtp_settings

__all__ = ["ENV", "Entry", "Letter", "Outbox", "Outcome", "Retry", "Run", "Section", "SmtpSettings",
           "audit_fingerprint", "compose", "compose_all", "deliver", "load_audit", "message_key", "resend", "route",
           "send_audit", "slug", "smtp_settings", "subject"]

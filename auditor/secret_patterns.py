"""The one list of what a secret looks like, and masking it.

Tags, labels, job names and descriptions are written by people, and people paste credentials into them: an
access key in a tag, a token in a job's environment-turned-label, a connection string in a description. An
audit report travels by e-mail and a gate's output lands in CI logs, so every output masks what looks like a
credential (`mask`, `mask_deep`), unless the policy turns it off (`outputs: {mask_secrets: false}`).

Masking happens at the output boundary: the rules read the real values, and fingerprints (SHA-256 digests,
which reveal nothing) are computed from them, so a finding keeps its fingerprint whether masking is on or off
and across audits made before and after it (baselines, --previous and waivers keep matching).

The same names are used by `auditor/providers/redact.py` (credential parameters of URLs, removed as billing
data is read) and by `gpu-auditor pull` (messages of failed sources).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache, partial
from typing import Any

MASK = "[masked:{}]"

# Parameter and key names whose value is a credential (URL parameters, connection strings, key=value text).
# RE2 (DuckDB) and Python `re` read this alike: redact.py uses it in SQL.
SECRET_PARAMS = ("sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|"
                 "x-goog-credential|awsaccesskeyid|token|access_token|refresh_token|id_token|auth_token|password|"
                 "passwd|secret|client_secret|api_key|apikey|accountkey|sharedaccesskey|sharedaccesssignature")

# A key or tag name that says its value is a credential: ends in one of these words (`aws_secret_access_key`,
# `DB_PASSWORD`, `slack-token`, `api.key`), not merely contains one (`max_tokens`, `token_count` are not).
_KEYISH = (r"[A-Za-z0-9_.-]*?(?:secret|secret[_.-]?access[_.-]?key|password|passwd|pwd|passphrase|token|"
           r"api[_.-]?key|access[_.-]?key|private[_.-]?key|secret[_.-]?key|client[_.-]?secret|credentials?|creds|"
           r"sig|signature|accountkey|sharedaccesskey|sharedaccesssignature|connection[_.-]?string)")
KEYISH = re.compile(rf"(?i)^{_KEYISH}$")
_KEY_40 = re.compile(r"(?i)key|secret|aws|cred")
_SECRET_40 = re.compile(r"[A-Za-z0-9/+]{40}")
_ALREADY = r"(?!\[masked:|REDACTED\b|\*\*\*)"

# (kind, pattern): the part a pattern's group `keep` matches stays (a name before `=`, a URL's scheme).
_PATTERNS = (
    ("private-key", r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY"
                    r"(?: BLOCK)?-----|$)"),
    ("aws-access-key-id", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    ("aws-session-token", r"\b(?:FwoGZXIvYXdz|IQoJb3JpZ2lu)[A-Za-z0-9/+=]{20,}"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ("gitlab-token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("slack-token", r"\bxox[abposrce]-[A-Za-z0-9-]{10,}"),
    ("slack-webhook", r"hooks\.slack\.com/services/[A-Za-z0-9_/-]+"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("google-oauth-token", r"\bya29\.[0-9A-Za-z_.-]{8,}"),
    ("stripe-key", r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,}"),
    ("openai-key", r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}"),
    ("huggingface-token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
    ("url-password", r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@\"']+:)[^/\s@\"']+(?=@)"),
    ("authorization", r"(?i)(?P<keep>\bauthorization[\"']?\s*[:=]\s*[\"']?(?:bearer\s+|basic\s+|token\s+)?)"
                      + _ALREADY + r"[^\s\"',;}]+"),
    ("bearer-token", r"(?i)(?P<keep>\bbearer\s+)" + _ALREADY + r"[A-Za-z0-9._~+/=-]{8,}"),
    # a 40-character AWS secret access key after a name that says key, secret or aws (`aws_key: wJalr...`)
    ("aws-secret-access-key", r"(?i)(?P<keep>(?<![A-Za-z0-9])[A-Za-z0-9_.-]*(?:key|secret|aws|cred)[A-Za-z0-9_.-]*"
                              r"[\"']?\s*[:=]\s*[\"']?)(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
    # `password=...`, `"client_secret": "..."`, `AccountKey=...;`, `sig=...&`: a credential-named assignment
    ("secret", rf"(?i)(?P<keep>(?<![A-Za-z0-9])(?:{_KEYISH}|{SECRET_PARAMS})[\"']?\s*[:=]\s*[\"']?)"
                   + _ALREADY + r"[^\s\"',;&}<>]+"),
)
# What a text must hold (lower-cased) for a pattern to be tried at all: most values (ids, names, numbers, times)
# hold none, and are passed over with a few substring tests instead of twenty regular expressions.
_WORDS = ("secret", "passw", "pwd", "passphrase", "token", "key", "credential", "creds", "sig", "connection")
_TRIGGERS = {
    "private-key": ("-----begin",), "aws-access-key-id": ("akia", "asia", "agpa", "aida", "aroa", "aipa", "anpa",
                                                          "anva", "apka", "abia", "acca"),
    "aws-session-token": ("fwogzxivyxdz", "iqojb3jpz2lu"), "github-token": ("gh", "github_pat_"),
    "gitlab-token": ("glpat-",), "slack-token": ("xox",), "slack-webhook": ("hooks.slack.com",),
    "google-api-key": ("aiza",), "google-oauth-token": ("ya29.",), "stripe-key": ("_live_", "_test_"),
    "openai-key": ("sk-",), "huggingface-token": ("hf_",), "npm-token": ("npm_",), "jwt": ("eyj",),
    "url-password": ("://",), "authorization": ("authorization",), "bearer-token": ("bearer",),
    "aws-secret-access-key": ("key", "secret", "aws", "cred"), "secret": _WORDS,
}
PATTERNS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (kind, _TRIGGERS[kind], re.compile(p)) for kind, p in _PATTERNS)


SHORT = 8  # text shorter than this is never masked (a credential is longer; `pwd=abc` is not one)


def mask(text: Any) -> Any:
    """`text` with every credential-shaped part replaced by `[masked:KIND]`; anything not text is returned as
    it is."""
    if not isinstance(text, str) or len(text) < SHORT:
        return text
    return mask_text(text)


def literal_trie(words: Iterable[str]) -> str:
    """A regular expression matching exactly `words`, written as their tree of shared prefixes
    (`a(?:kia|sia|ws)`): Python's engine tries every word of a plain alternation at each character, but only one
    branch here (an audit's 645,000 texts: 0.80 CPU s searched, 0.43 as a tree)."""
    tree: dict[str, dict] = {}
    for word in words:
        node = tree
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def pattern(node: dict[str, dict]) -> str:
        branches = [re.escape(ch) + pattern(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return pattern(tree)


_ANY_TRIGGER = re.compile(literal_trie({t for ts in _TRIGGERS.values() for t in ts}))


@lru_cache(maxsize=1 << 16)  # an audit repeats its values (teams, owners, accounts) many times
def _masked(kind: str, m: re.Match[str]) -> str:
    """A match masked as a secret of its kind, keeping its "keep" group."""
    return (m.group("keep") if "keep" in m.re.groupindex else "") + MASK.format(kind)


@lru_cache(maxsize=1 << 16)  # an audit's findings repeat their values: 16,000 findings, 280,000 texts, 49,000 distinct
def mask_text(text: str) -> str:
    """mask() of text of SHORT characters or more."""
    lower = text.lower()
    if not _ANY_TRIGGER.search(lower):
        return text
    for kind, triggers, pattern in PATTERNS:
        if any(t in lower for t in triggers):
            text = pattern.sub(partial(_masked, kind), text)
            lower = text.lower()
    return text


MASKED_SECRET = MASK.format("secret")


def mask_deep(value: Any) -> Any:
    """Every string of a JSON-like document masked (keys too); a value under a credential-named key (a tag
    `aws_secret_access_key: ...`) is masked whole. (audit.py masks an audit's large parts the same way as it
    encodes them, without this second walk.)"""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {mask(k): MASKED_SECRET if secret_entry(k, v) else mask_deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_deep(v) for v in value]
    return value


def secret_entry(key: Any, value: Any) -> bool:
    """Whether `value`, under `key` in a document, is a credential to mask whole: text under a credential-named
    key, or 40 characters shaped like an AWS secret key under a key that names a key, secret or AWS."""
    if not (isinstance(key, str) and isinstance(value, str)) or not _key_kind(key) or not value.strip() or \
            value.startswith(("[masked:", "REDACTED")):
        return False
    kind = _key_kind(key)
    return kind == 2 or (kind == 1 and _SECRET_40.fullmatch(value) is not None)


@lru_cache(maxsize=1 << 12)  # a document repeats its keys
def masked_key(key: str) -> tuple[str, bool]:
    """A document's key as shown (masked), and whether a value under it may be a credential (secret_entry)."""
    return mask(key), _key_kind(key) != 0


@lru_cache(maxsize=1 << 12)
def _key_kind(key: str) -> int:
    """2: a credential-named key (its value is masked whole); 1: a key that names a key, secret, AWS or
    credentials (a 40-character value under it is masked); 0: neither."""
    if KEYISH.match(key):
        return 2
    return 1 if _KEY_40.search(key) else 0

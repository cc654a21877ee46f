"""API keys: `cb_<key_id>_<secret>`, stored as the sha256 of the secret only.

The full key is shown once, at creation. A key has one role (read < write < admin) and a
list of projects it may touch ("*" for every project).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import NotFoundError, ValidationError
from ..model import check_id
from ..store.base import ApiKeyRecord, Store

__all__ = [
    "ALL_PROJECTS",
    "KEY_PREFIX",
    "ROLES",
    "CreatedKey",
    "create_key",
    "hash_secret",
    "list_keys",
    "parse_key",
    "revoke_key",
    "role_allows",
    "verify_key",
]

KEY_PREFIX = "cb_"
ROLES = ("read", "write", "admin")
ALL_PROJECTS = "*"
_KEY_RE = re.compile(r"^cb_([0-9a-f]{16})_([A-Za-z0-9_\-]{20,100})$")


@dataclass(frozen=True, slots=True)
class CreatedKey:
    """A new key: `key` is the only time the secret is visible."""

    key: str
    record: ApiKeyRecord


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def role_allows(role: str, needed: str) -> bool:
    """Whether a key's role covers the role an operation needs."""
    return ROLES.index(role) >= ROLES.index(needed)


def parse_key(token: str) -> tuple[str, str] | None:
    """(key_id, secret) of a well-formed key, else None."""
    m = _KEY_RE.fullmatch(token.strip())
    return (m.group(1), m.group(2)) if m else None


def create_key(
    store: Store, *, projects: Sequence[str], role: str = "read", name: str | None = None
) -> CreatedKey:
    """Create a key for `projects` with `role`; returns it with its secret (shown once)."""
    if role not in ROLES:
        raise ValidationError("role", f"must be one of {', '.join(ROLES)} (got {role!r})")
    if not projects:
        raise ValidationError("projects", "name at least one project (or '*' for all)")
    for i, p in enumerate(projects):
        if p != ALL_PROJECTS:
            check_id(f"projects[{i}]", p)
    if name is not None and (not name.strip() or len(name) > 200):
        raise ValidationError("name", "must be 1-200 characters")
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    record = ApiKeyRecord(
        key_id=key_id,
        key_hash=hash_secret(secret),
        name=name,
        role=role,
        projects=tuple(dict.fromkeys(projects)),
        created_at=time.time(),
    )
    store.create_api_key(record)
    return CreatedKey(key=f"{KEY_PREFIX}{key_id}_{secret}", record=record)


def list_keys(store: Store) -> list[ApiKeyRecord]:
    return store.list_api_keys()


def revoke_key(store: Store, key_id: str) -> ApiKeyRecord:
    """Revoke a key (idempotent); NotFoundError for an unknown key id."""
    if not store.revoke_api_key(key_id, time.time()):
        record = store.get_api_key(key_id)
        if record is None:
            raise NotFoundError("api key", key_id)
        return record
    record = store.get_api_key(key_id)
    assert record is not None
    return record


def verify_key(store: Store, token: str) -> ApiKeyRecord | None:
    """The live record of a presented key, or None (malformed, unknown, wrong, revoked)."""
    parsed = parse_key(token)
    if parsed is None:
        return None
    record = store.get_api_key(parsed[0])
    if record is None or record.revoked_at is not None:
        return None
    if not hmac.compare_digest(record.key_hash, hash_secret(parsed[1])):
        return None
    return record

"""API keys: `cb_<key_id>_<secret>`, stored as the sha256 of the secret only.

The full key is shown once, at creation. A key has one role (read < write < admin) and a
list of projects it may touch ("*" for every project).

Verified keys are remembered in-process for `VERIFIED_KEY_TTL_S` (1 s), so a busy client
does not cost a database read per request. The presented secret is still checked against
the remembered hash on every request. `revoke_key` forgets the key in this process at
once; a revocation made by another process (the CLI, another worker) takes effect here
within the TTL.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import NotFoundError, ValidationError

if TYPE_CHECKING:  # the command line reads ROLES: it does not load the model or the store
    from ..store.base import ApiKeyRecord, Store

__all__ = [
    "ALL_PROJECTS",
    "KEY_PREFIX",
    "ROLES",
    "VERIFIED_KEY_TTL_S",
    "CreatedKey",
    "create_key",
    "hash_secret",
    "key_agent",
    "list_keys",
    "parse_key",
    "recall_key",
    "revoke_key",
    "role_allows",
    "verify_key",
]

KEY_PREFIX = "cb_"
ROLES = ("read", "write", "admin")
ALL_PROJECTS = "*"
_KEY_RE = re.compile(r"^cb_([0-9a-f]{16})_([A-Za-z0-9_\-]{20,100})$")
VERIFIED_KEY_TTL_S = 1.0
_VERIFIED_MAX = 10_000


class _VerifiedKeys:
    """Live key records recently read from a store, by (store, key id), for a short TTL.

    `epoch` moves on every revocation, so a lookup that started before a revocation cannot
    put the record it read back into the cache after the revocation forgot it."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self.epoch = 0
        self._entries: dict[tuple[int, str, str], tuple[float, ApiKeyRecord]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(store: Store, key_id: str) -> tuple[int, str, str]:
        return (id(store), str(getattr(store, "url", "")), key_id)

    def get(self, store: Store, key_id: str) -> ApiKeyRecord | None:
        k = self._key(store, key_id)
        with self._lock:
            entry = self._entries.get(k)
            if entry is None:
                return None
            if entry[0] <= time.monotonic():
                del self._entries[k]
                return None
            return entry[1]

    def put(self, store: Store, record: ApiKeyRecord, epoch: int) -> None:
        now = time.monotonic()
        with self._lock:
            if epoch != self.epoch or record.revoked_at is not None:
                return
            if len(self._entries) >= _VERIFIED_MAX:
                for k in [k for k, (until, _) in self._entries.items() if until <= now]:
                    del self._entries[k]
                if len(self._entries) >= _VERIFIED_MAX:
                    self._entries.clear()
            self._entries[self._key(store, record.key_id)] = (now + self.ttl_s, record)

    def forget(self, key_id: str) -> None:
        """Drop `key_id` for every store (the revoking store object may be another one)."""
        with self._lock:
            self.epoch += 1
            for k in [k for k in self._entries if k[2] == key_id]:
                del self._entries[k]


_verified = _VerifiedKeys(VERIFIED_KEY_TTL_S)


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


def key_agent(key_id: str) -> str:
    """The agent a key writes as when the request names none: `key:<key id>`, the same on
    every path (REST events, MCP over HTTP, the SDK's edge provenance), so one key is one
    agent in timelines, agent filters and the consensus merge."""
    return f"key:{key_id}"


def parse_key(token: str) -> tuple[str, str] | None:
    """(key_id, secret) of a well-formed key, else None."""
    m = _KEY_RE.fullmatch(token.strip())
    return (m.group(1), m.group(2)) if m else None


def create_key(
    store: Store, *, projects: Sequence[str], role: str = "read", name: str | None = None
) -> CreatedKey:
    """Create a key for `projects` with `role`; returns it with its secret (shown once)."""
    from ..model import check_id
    from ..store.base import ApiKeyRecord

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
    _verified.forget(key_id)
    try:
        return _revoke(store, key_id)
    finally:
        _verified.forget(key_id)  # and any lookup that raced with the revocation


def _revoke(store: Store, key_id: str) -> ApiKeyRecord:
    if not store.revoke_api_key(key_id, time.time()):
        record = store.get_api_key(key_id)
        if record is None:
            raise NotFoundError("api key", key_id)
        return record
    record = store.get_api_key(key_id)
    assert record is not None
    return record


def _matches(record: ApiKeyRecord, secret: str) -> bool:
    return hmac.compare_digest(record.key_hash, hash_secret(secret))


def recall_key(store: Store, token: str) -> ApiKeyRecord | None:
    """The record of a presented key if it was verified in this process within the TTL and
    the secret matches; None means "not known here": call `verify_key`."""
    parsed = parse_key(token)
    if parsed is None:
        return None
    record = _verified.get(store, parsed[0])
    if record is None or not _matches(record, parsed[1]):
        return None
    return record


def verify_key(store: Store, token: str) -> ApiKeyRecord | None:
    """The live record of a presented key, or None (malformed, unknown, wrong, revoked)."""
    parsed = parse_key(token)
    if parsed is None:
        return None
    epoch = _verified.epoch
    record = store.get_api_key(parsed[0])
    if record is None or record.revoked_at is not None:
        return None
    if not _matches(record, parsed[1]):
        return None
    _verified.put(store, record, epoch)
    return record

"""Who is calling and what they may touch: principals, project visibility, rate limits.

A project the key is not scoped to is answered exactly like a project that does not exist
(404), so a key never learns whether another project exists.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import NotFoundError
from ..store.base import ApiKeyRecord, Store
from .errors import AuthenticationError, PermissionDeniedError, RateLimitedError
from .keys import ALL_PROJECTS, recall_key, role_allows, verify_key

__all__ = [
    "LOCAL_PRINCIPAL",
    "Principal",
    "RateLimiter",
    "authenticate",
    "hidden_project",
    "local_principal",
    "presented_token",
    "principal_of",
]


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of one request: a verified key, or the local user in --no-auth mode."""

    key_id: str | None
    role: str
    projects: frozenset[str] | None  # None: every project

    @classmethod
    def from_key(cls, record: ApiKeyRecord) -> Principal:
        everything = ALL_PROJECTS in record.projects
        return cls(record.key_id, record.role, None if everything else frozenset(record.projects))

    def sees(self, project_id: str) -> bool:
        return self.projects is None or project_id in self.projects

    def check(
        self, project_id: str, needed: str, operation: str = "this operation", instead: str = ""
    ) -> None:
        """Raise 404 for an invisible project, 403 when the role is too weak: the message
        names the `operation`, the role of key it needs and what the key may do `instead`."""
        if not self.sees(project_id):
            raise hidden_project(project_id)
        if not role_allows(self.role, needed):
            article = "an" if needed[:1] in "aeiou" else "a"
            hint = f"; {instead}" if instead else ""
            raise PermissionDeniedError(
                f"{operation} needs {article} {needed} key; this key has role {self.role!r}{hint}"
            )


LOCAL_PRINCIPAL = Principal(key_id=None, role="admin", projects=None)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def local_principal(client: Any) -> Principal:
    """The caller of a server without keys (--no-auth): loopback clients only, whatever
    address the server was bound to (`uvicorn --host 0.0.0.0 --factory ...` included).
    No client address means a Unix socket, which only local processes reach."""
    host = None if client is None else client[0]
    if host is not None and not _is_loopback(str(host)):
        raise PermissionDeniedError(
            f"authentication is off (--no-auth): only loopback clients are served, not "
            f"{host}; serve with API keys to accept other clients"
        )
    return LOCAL_PRINCIPAL


def hidden_project(project_id: str) -> NotFoundError:
    # The same answer whether the project exists or not, with the way to the key's own.
    return NotFoundError(
        "project",
        project_id,
        message=f"project {project_id!r} not found (or not visible to this key; "
        "GET /v1/whoami lists the projects it may use)",
    )


def presented_token(authorization: str | None, api_key: str | None) -> str:
    """The key of a request from its `Authorization: Bearer` or `X-API-Key` header."""
    token = api_key
    if token is None and authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise AuthenticationError("the Authorization header must be 'Bearer <api key>'")
        token = value.strip()
    if not token:
        raise AuthenticationError(
            "missing API key: send 'Authorization: Bearer cb_...' (create one with "
            "'ctxbase keys create')"
        )
    return token


def principal_of(record: ApiKeyRecord | None) -> Principal:
    if record is None:
        raise AuthenticationError("invalid or revoked API key")
    return Principal.from_key(record)


def authenticate(store: Store, authorization: str | None, api_key: str | None) -> Principal:
    """The principal of a request from its `Authorization: Bearer` or `X-API-Key` header."""
    token = presented_token(authorization, api_key)
    return principal_of(recall_key(store, token) or verify_key(store, token))


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class RateLimiter:
    """A token bucket per key: `rate` requests per second, bursts up to `burst`."""

    rate: float
    burst: int
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    limited: int = 0

    def try_take(self, key: str) -> bool:
        """Spend one token of `key` if there is one; a refusal is not counted here."""
        return self._spend(key) is None

    def take(self, key: str) -> None:
        """Spend one token of `key`, or raise RateLimitedError with the wait needed."""
        wait = self._spend(key)
        if wait is None:
            return
        with self._lock:
            self.limited += 1
        raise RateLimitedError(
            f"rate limit of {self.rate:g} requests/s (burst {self.burst}) exceeded; "
            f"retry in {wait:.2f} s",
            retry_after=wait,
        )

    def _spend(self, key: str) -> float | None:
        """None when a token was spent, else the seconds until one is available."""
        if self.rate <= 0:
            return None
        now = time.monotonic()
        with self._lock:
            b = self._buckets.get(key)
            if b is None:
                b = self._buckets[key] = _Bucket(float(self.burst), now)
            b.tokens = min(float(self.burst), b.tokens + (now - b.at) * self.rate)
            b.at = now
            if b.tokens >= 1.0:
                b.tokens -= 1.0
                return None
            return (1.0 - b.tokens) / self.rate

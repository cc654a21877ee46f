"""Verified API keys are remembered for at most VERIFIED_KEY_TTL_S; revocation here is
immediate, revocation by another process takes effect within the TTL."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from ctxbase.errors import CtxbaseError, StorageError
from ctxbase.serve.auth import authenticate
from ctxbase.serve.keys import VERIFIED_KEY_TTL_S, create_key, revoke_key
from ctxbase.store.sqlite import SQLiteStore


def _auth(store: SQLiteStore, key: str) -> bool:
    try:
        authenticate(store, f"Bearer {key}", None)
    except CtxbaseError:
        return False
    return True


def test_revocation_in_this_process_is_immediate(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "k.db"))
    try:
        created = create_key(store, projects=["a"], role="read")
        assert _auth(store, created.key)
        revoke_key(store, created.record.key_id)
        assert not _auth(store, created.key)
    finally:
        store.close()


def test_revocation_by_another_process_applies_within_the_ttl(tmp_path: Path) -> None:
    path = str(tmp_path / "k.db")
    store = SQLiteStore(path)
    try:
        created = create_key(store, projects=["a"], role="read")
        assert _auth(store, created.key)  # now remembered
        other = sqlite3.connect(path)  # another process's write, as far as we can tell
        other.execute(
            "UPDATE api_keys SET revoked_at=? WHERE key_id=?", (time.time(), created.record.key_id)
        )
        other.commit()
        other.close()
        time.sleep(VERIFIED_KEY_TTL_S + 0.2)
        assert not _auth(store, created.key)
        # A wrong secret for a remembered key id is refused too.
        fresh = create_key(store, projects=["a"], role="read")
        assert _auth(store, fresh.key)
        assert not _auth(store, fresh.key[:-2] + ("AA" if not fresh.key.endswith("AA") else "BB"))
    finally:
        store.close()


def test_malformed_tokens_are_refused(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "k.db"))
    try:
        for token in ("", "cb_", "not-a-key", "cb_zz_"):
            assert not _auth(store, token)
    finally:
        store.close()
    with pytest.raises(StorageError):  # a closed store says so
        store.list_api_keys()

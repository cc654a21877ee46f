"""A forget while another connection reads: the WAL, whose older frames still hold the
forgotten rows, cannot be emptied at once; it is emptied once the reader lets go, not left
for later writes to overwrite frame by frame."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import ctxbase

SECRET = "the launch code is tango-4471-zulu"


def _held(path: Path) -> bool:
    files = [Path(f"{path}{x}") for x in ("", "-wal")]
    return any(f.exists() and SECRET.encode() in f.read_bytes() for f in files)


def test_the_wal_is_emptied_once_a_busy_reader_lets_go(tmp_path: Path) -> None:
    db = tmp_path / "busy.db"
    cb = ctxbase.open(str(db), project="p", embedder="hash")
    try:
        cb.record("user_message", session_id="doomed", text=SECRET)
        for n in range(30):
            cb.record("user_message", session_id="kept", text=f"note {n}")
        cb.wait_for_embeddings()
        reader = sqlite3.connect(str(db))
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM events").fetchone()  # a snapshot held open
        cb.forget(session_id="doomed")
        wal = Path(f"{db}-wal")
        assert wal.exists() and wal.stat().st_size > 0  # could not be emptied yet
        reader.rollback()
        reader.close()
        deadline = time.monotonic() + 20
        while (wal.exists() and wal.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not wal.exists() or wal.stat().st_size == 0
        assert not _held(db)
        assert [e.text for e in cb.last_events("kept", 1)] == ["note 29"]
    finally:
        cb.close()

"""Writers of one SQLite file queue for its write lock across processes
(store/sqlite_write_lock.py): a waiter is woken when the holder lets go, gives up at its
timeout without keeping the lock, and the lock's file goes when the last process closes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ctxbase.errors import StorageError
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.sqlite_write_lock import FileWriteLock

SRC = str(Path(__file__).resolve().parents[2] / "src")


@contextmanager
def _holder(url: str, seconds: float) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the file's write lock for `seconds`: it prints "held" when
    it has it and "let go <time>" when it has let go (the time read just before); killed
    when the block ends."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from ctxbase.store.sqlite_write_lock import FileWriteLock
        lock = FileWriteLock({url!r})
        lock.acquire(10, database="db")
        print("held", flush=True)
        time.sleep({seconds})
        before = time.time()  # read before the release: a waiter gets in at once after it
        lock.release()
        print("let go", before, flush=True)
        time.sleep(30)  # keeps its descriptor open until killed
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _let_go(holder: subprocess.Popen[str]) -> str:
    """The holder's next line: "let go <time>" once it has let go."""
    assert holder.stdout is not None
    return holder.stdout.readline()


def test_a_waiter_gets_the_lock_once_the_other_process_lets_go(tmp_path: Path) -> None:
    url = str(tmp_path / "a.db")
    with _holder(url, 1.0) as holder:
        lock = FileWriteLock(url)
        lock.acquire(20, database="a.db")
        got = time.time()
        line = _let_go(holder).split()
        assert line[:2] == ["let", "go"] and float(line[2]) <= got
        lock.release()


def test_a_waiter_gives_up_at_its_timeout_and_does_not_keep_the_lock(tmp_path: Path) -> None:
    url = str(tmp_path / "a.db")
    with _holder(url, 1.5) as holder:
        lock = FileWriteLock(url)
        with pytest.raises(StorageError, match="another process held the write lock"):
            lock.acquire(0.2, database="a.db")
        assert _let_go(holder).startswith("let go")
        # the wait given up took the lock when the holder let go, and let go of it at once:
        # a third process gets it
        with _holder(url, 0.0):
            pass
        # and the process that gave up takes it again when it asks
        lock.acquire(5, database="a.db")
        lock.release()


def test_a_later_writer_of_the_process_takes_over_a_wait_given_up(tmp_path: Path) -> None:
    url = str(tmp_path / "a.db")
    with _holder(url, 1.0) as holder:
        lock = FileWriteLock(url)
        with pytest.raises(StorageError):
            lock.acquire(0.1, database="a.db")
        lock.acquire(20, database="a.db")  # the same wait goes on, now for this writer
        assert _let_go(holder).startswith("let go")
        lock.release()


def test_the_lock_file_goes_when_no_process_holds_or_awaits_it(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    lock_file = tmp_path / "a.db-lock"
    store = SQLiteStore(str(path))
    store.touch_index("p")  # a write
    assert lock_file.exists()
    with _holder(str(path), 30.0):  # another process holding the lock (killed after)
        store.close()
        assert lock_file.exists()  # in use there: left for it
    again = SQLiteStore(str(path))
    again.touch_index("p")
    again.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db"]


def test_a_writer_waiting_on_a_removed_lock_file_queues_on_the_new_one(tmp_path: Path) -> None:
    """The file removed (its last user closing) while a process waited on it: the waiter
    takes the file that is there now, so a writer arriving later waits for it."""
    url = str(tmp_path / "a.db")
    lock = FileWriteLock(url)
    lock.acquire(5, database="a.db")
    lock.release()
    os.remove(f"{url}-lock")  # what a last user's close does
    with _holder(url, 1.0) as holder:  # makes and locks a new file
        lock.acquire(20, database="a.db")  # the old descriptor's lock would be free at once
        assert _let_go(holder).startswith("let go")
        lock.release()


def test_store_writes_of_two_processes_queue_and_both_land(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    SQLiteStore(path).close()
    code = textwrap.dedent(
        f"""
        import ctxbase
        cb = ctxbase.open({path!r}, embedder="none", anchoring=False)
        for n in range(60):
            cb.record("tool_result", session_id="other", text=f"line {{n}}")
        cb.close()
        """
    )
    other = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC})
    import ctxbase

    cb = ctxbase.open(path, embedder="none", anchoring=False)
    try:
        for n in range(60):
            cb.record("tool_result", session_id="mine", text=f"line {n}")
        assert other.wait(60) == 0
        assert len(cb.last_events("other", 100)) == 60
        assert len(cb.last_events("mine", 100)) == 60
    finally:
        cb.close()
    assert not (tmp_path / "a.db-lock").exists()

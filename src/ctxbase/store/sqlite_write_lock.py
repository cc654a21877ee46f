"""The write lock of one SQLite file, fair between threads and between processes.

SQLite alone makes a writer that finds the file locked sleep and try again, with sleeps
growing to 100 ms. A process that writes in many short transactions (an ingest) takes
the lock back within microseconds of letting it go, so another process's writer misses
nearly every gap: a one-row `record()` waited seconds, and the ingest lost time to the
other writer's sleeps too.

So writers queue before SQLite's lock. Threads of one process queue on a lock of that
process; processes queue on `flock` of an empty file beside the database
(`<database>-lock`). A process waiting there sleeps in the kernel and is woken the
moment the holder lets go. A store closing removes the file when no process holds or
awaits it, as SQLite removes its `-wal` and `-shm`; a process that had it open takes the
file that is there at its next write. SQLite's own lock (BEGIN IMMEDIATE)
still guards every write: where the file cannot be made (a read-only directory), or a
process does not use it, writes stay correct and only lose the queue.
"""

from __future__ import annotations

import errno
import os
import threading
import time

from ..errors import StorageError

try:
    import fcntl
except ImportError:  # no flock (Windows): SQLite's own lock alone
    fcntl = None  # type: ignore[assignment]

__all__ = ["FileWriteLock", "file_write_lock", "release_file_write_lock"]


class _KernelWait:
    """One blocking `flock` in a thread of its own, so its caller can give up at a
    deadline. Given up, it lets go of the lock as soon as it gets it, unless a later
    writer of the process took it over meanwhile."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._guard = threading.Lock()
        self._finished = threading.Event()
        self._holding = False
        self._abandoned = False
        self._error: OSError | None = None
        threading.Thread(target=self._run, name="ctxbase-sqlite-write-wait", daemon=True).start()

    def _run(self) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError as exc:
            with self._guard:
                self._error = exc
                self._finished.set()
            return
        with self._guard:
            if self._abandoned:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            else:
                self._holding = True
            self._finished.set()

    def wait(self, timeout: float) -> bool:
        """True once the lock is held; False at the timeout (the wait goes on, given up)."""
        self._finished.wait(max(timeout, 0.0))
        with self._guard:
            if self._error is not None:
                raise self._error
            if self._holding:
                return True
            if not self._finished.is_set():
                self._abandoned = True
            return False

    def take_over(self) -> bool:
        """Wait on in place of a writer that gave up; False if it is over already."""
        with self._guard:
            if self._finished.is_set():
                return False
            self._abandoned = False
            return True


class FileWriteLock:
    """The write lock of one database file in this process (see the module)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = f"{url}-lock"
        self._threads = threading.RLock()
        self._depth = 0  # re-entered by the thread holding it
        self._fd: int | None = None
        self._unusable = False  # the file cannot be made here: SQLite's lock alone
        self._wait: _KernelWait | None = None
        self.users = 0  # stores of this process open on the file

    def acquire(self, timeout: float, *, database: str) -> None:
        """Take the lock, waiting up to `timeout` seconds (a StorageError after)."""
        deadline = time.monotonic() + timeout
        if not self._threads.acquire(timeout=timeout):
            raise StorageError(
                f"database is locked: another writer of {database!r} in this process held it "
                f"for over {timeout:g} s"
            )
        self._depth += 1
        if self._depth > 1:
            return
        try:
            held = self._lock_file(deadline)
        except BaseException:
            self._depth -= 1
            self._threads.release()
            raise
        if not held:
            self._depth -= 1
            self._threads.release()
            raise StorageError(
                f"database is locked: another process held the write lock of {database!r}"
                f" for over {timeout:g} s (a long ingest, forget or migration?);"
                " try again when it is done"
            )

    def release(self) -> None:
        self._depth -= 1
        try:
            if self._depth == 0 and self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()

    def _lock_file(self, deadline: float) -> bool:
        while True:
            fd = self._open()
            if fd is None:
                return True
            wait = self._wait
            if wait is not None and not wait.take_over():
                wait = self._wait = None
            if wait is None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    wait = self._wait = _KernelWait(fd)
            if wait is not None:
                if not wait.wait(deadline - time.monotonic()):
                    return False
                self._wait = None
            if self._still_the_file(fd):
                return True
            # Removed (or replaced) by a process closing the database while this one
            # waited on it: queue on the file that is there now.
            fcntl.flock(fd, fcntl.LOCK_UN)
            self._drop_fd()

    def _open(self) -> int | None:
        if fcntl is None:
            return None
        if self._fd is None and not self._unusable:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            except OSError as exc:
                if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                    raise StorageError(f"cannot open the write lock {self.path!r}: {exc}") from exc
                self._unusable = True
        return self._fd

    def _still_the_file(self, fd: int) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def _drop_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        """The last store of this process on the file closed: remove the file unless
        another process holds or awaits it (it removes it when it closes)."""
        with self._threads:
            fd = self._fd
            if fd is None or self._wait is not None:
                return  # a wait given up may still hold the descriptor: keep it
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._drop_fd()
                return
            try:
                if self._still_the_file(fd):
                    os.remove(self.path)
            except OSError:
                pass  # removed meanwhile, or a directory that refuses: left as it is
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                self._drop_fd()


_locks: dict[tuple[int, str], FileWriteLock] = {}
_locks_guard = threading.Lock()


def file_write_lock(url: str) -> FileWriteLock:
    """The lock of `url` in this process, counted as used by one more store. Keyed by
    process too: a child of a fork must not share its parent's lock or descriptor."""
    with _locks_guard:
        key = (os.getpid(), url)
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = FileWriteLock(url)
        lock.users += 1
        return lock


def release_file_write_lock(lock: FileWriteLock) -> None:
    """One store fewer on the file; the last one closes the lock (FileWriteLock.close)."""
    with _locks_guard:
        lock.users -= 1
        last = lock.users == 0
        if last and _locks.get((os.getpid(), lock.url)) is lock:
            del _locks[(os.getpid(), lock.url)]
    if last:
        lock.close()

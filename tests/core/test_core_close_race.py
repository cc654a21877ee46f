"""Closing a SQLite store while other threads read and write through it.

sqlite3 crashes the whole process (a segmentation fault, not an exception) when a connection
is closed while another thread runs a statement on it, so the race runs in a child process
and the test reads its exit code.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

RACE = textwrap.dedent(
    """
    import os, sys, threading, time
    from ctxbase.errors import StorageError
    from ctxbase.store.sqlite import SQLiteStore

    folder, rounds = sys.argv[1], int(sys.argv[2])
    refused = 0
    for i in range(rounds):
        store = SQLiteStore(os.path.join(folder, f"s{i}.db"))
        stop = threading.Event()

        def hammer(k: int) -> None:
            global refused
            n = 0
            while not stop.is_set():
                try:
                    with store._write() as conn:
                        put = "INSERT OR REPLACE INTO meta VALUES (?, ?)"
                        conn.execute(put, (f"k{k}", "x" * 999))
                        conn.execute(put, (f"j{k}{n % 50}", "y"))
                    store._fetch_all("SELECT * FROM meta")
                    n += 1
                except StorageError:
                    refused += 1
                    return

        threads = [threading.Thread(target=hammer, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.005)
        store.close()
        stop.set()
        for t in threads:
            t.join()
        try:
            store.schema_version()
        except StorageError:
            pass
        else:
            raise SystemExit("a closed store still answered")
    print("refused", refused)
    """
)


def test_close_waits_for_operations_in_flight(tmp_path: Path) -> None:
    script = tmp_path / "race.py"
    script.write_text(RACE)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), "120"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    # the workers were stopped by the closed store, not by the loop's stop flag alone
    assert int(done.stdout.split()[-1]) > 0

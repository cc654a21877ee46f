"""`migrate-data` from a backup taken before a hard forget: what was forgotten stays gone,
the command says how much it left out, and the row-count check passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ctxbase.cli import main


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("live_on", ["sqlite", "postgres"])
def test_migrate_data_leaves_out_what_the_destination_forgot(
    tmp_path: Path, capsys: Any, live_on: str, project_id: str, request: pytest.FixtureRequest
) -> None:
    live = str(tmp_path / "live.db") if live_on == "sqlite" else request.getfixturevalue("pg_url")
    bak = str(tmp_path / "bak.db")
    base = ("--db", live, "--project", project_id, "--embedder", "none", "-q")
    for session, text in (
        ("s1", "the walrus launch code is 42"),
        ("s1", "noted the walrus launch code"),
        ("s2", "keep this note about gardening tomatoes"),
    ):
        assert _run(capsys, *base, "capture", "--session", session, "--text", text)[0] == 0
    if live_on == "sqlite":
        shutil.copy(live, bak)  # closed: nothing left in a WAL
    else:  # the backup taken by a copy out of PostgreSQL
        code, _, err = _run(capsys, "--project", project_id, "-q", "migrate-data",
                            "--from", live, "--to", bak)  # fmt: skip
        assert code == 0, err
    assert _run(capsys, *base, "forget", "--session", "s1")[0] == 0

    code, out, err = _run(
        capsys, "--project", project_id, "-q", "migrate-data", "--from", bak, "--to", live
    )
    assert code == 0, (out, err)
    assert "differs" not in out and err == ""
    assert "left out 6 row(s) the destination has forgotten" in out  # session, 2 events,
    assert "events 2" in out and "items 2" in out  # their 2 items, the NEXT edge
    rows = {line.split()[0]: line for line in out.splitlines() if " source " in line}
    assert "(2 left out: forgotten there)" in rows["events"]
    assert "(3 of its own: forgotten there)" in rows["tombstones"]  # 2 events, 1 session

    assert _run(capsys, *base, "events", "s1")[0] == 3  # the session is not back
    code, out, _ = _run(capsys, *base, "events", "s2", "--json")
    assert code == 0 and [e["text"] for e in json.loads(out)] == [
        "keep this note about gardening tomatoes"
    ]
    code, out, _ = _run(capsys, *base, "search", "walrus", "--json")
    assert code == 0 and json.loads(out) == []
    # Again: the same rows left out, nothing else changes.
    code, out, _ = _run(
        capsys, "--project", project_id, "-q", "migrate-data", "--from", bak, "--to", live
    )
    assert code == 0 and "left out 6 row(s)" in out

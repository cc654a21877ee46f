"""`ctxbase compact-archived --older-than` end to end on a real SQLite file: it says what it
did (progress on stderr), a second run compacts nothing, a bad duration is refused before
the database opens, and --all-projects takes every project."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxbase
from ctxbase.cli import main


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _archive(db: Path, project: str, sessions: int) -> None:
    with ctxbase.open(str(db), project=project, embedder=None) as cb:
        for n in range(sessions):
            cb.record("user_message", session_id=f"s{n}", text=f"We decided on plan {n}.")
            cb.archive_session(f"s{n}")
        cb.record("user_message", session_id="live", text="still going")


def test_compact_archived_says_what_it_did(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "c.db"
    _archive(db, "shop", 25)
    base = ("--db", str(db), "--project", "shop", "compact-archived")

    code, out, _ = _run(capsys, *base, "--older-than", "30d")
    assert code == 0 and "compacted 0 archived session(s)" in out
    assert "archived less than 30d ago, left: 25" in out

    code, out, err = _run(capsys, *base, "--older-than", "0")
    assert code == 0
    assert "compacted 25 archived session(s) in project 'shop': 25 turn(s) hidden" in out
    assert "  compacted s0" in out and "and 5 more" in out
    assert "compact: 25/25 sessions" in err  # progress, on stderr

    code, out, _ = _run(capsys, *base, "--older-than", "0s", "--json")
    report = json.loads(out)
    assert code == 0 and report["compacted"] == [] and len(report["already_compacted"]) == 25
    with ctxbase.open(str(db), project="shop", embedder=None) as cb:
        assert [e.type for e in cb.last_events("s3")] == ["session_summary"]
        assert [e.type for e in cb.last_events("live")] == ["user_message"]


def test_compact_archived_refuses_bad_input(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "none.db"
    code, _, err = _run(capsys, "--db", str(db), "compact-archived", "--older-than", "soon")
    assert code == 2 and "--older-than" in err
    assert not db.exists()
    code, _, err = _run(capsys, "--db", str(db), "compact-archived", "--older-than", "1d")
    assert code == 3  # a database that is not there has nothing to compact


def test_compact_archived_in_every_project(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "all.db"
    _archive(db, "a", 1)
    _archive(db, "b", 2)
    code, out, _ = _run(
        capsys, "--db", str(db), "compact-archived", "--older-than", "0", "--all-projects"
    )
    assert code == 0 and "compacted 3 archived session(s) in every project" in out
    # session ids repeat between projects: each is named with its project
    assert "  compacted s0 (project 'a')\n" in out and "  compacted s0 (project 'b')\n" in out
    code, out, _ = _run(
        capsys, "--db", str(db), "compact-archived", "--older-than", "0", "--all-projects",
        "--json",
    )  # fmt: skip
    report = json.loads(out)
    assert code == 0 and set(report["projects"]) == {"a", "b"}
    assert report["projects"]["a"]["already_compacted"] == ["s0"]  # run again: done before
    assert report["projects"]["b"]["already_compacted"] == ["s0", "s1"]
    code, _, err = _run(
        capsys, "--db", str(db), "--project", "a", "compact-archived", "--older-than", "0",
        "--all-projects",
    )  # fmt: skip
    assert code == 2 and "--project: does not apply with --all-projects" in err


def test_serve_refuses_a_bad_archive_retention(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "s.db"
    code, _, err = _run(capsys, "--db", str(db), "serve", "--archive-retention", "monthly")
    assert code == 2 and "--archive-retention" in err


def test_a_soft_forget_and_restore_of_a_compacted_session_undo_each_other(
    tmp_path: Path, capsys: Any
) -> None:
    db = tmp_path / "c.db"
    _archive(db, "shop", 1)
    base = ("--db", str(db), "--project", "shop")
    assert _run(capsys, *base, "compact-archived", "--older-than", "0")[0] == 0
    code, out, _ = _run(capsys, *base, "forget", "--soft", "--session", "s0")
    assert code == 0 and "hidden 1 item(s)" in out  # the summary: all that showed
    code, out, _ = _run(capsys, *base, "restore", "--session", "s0")
    assert code == 0 and "restored 1 item(s)" in out
    with ctxbase.open(str(db), project="shop", embedder=None) as cb:
        assert [e.type for e in cb.last_events("s0")] == ["session_summary"]  # as before
    # asked again, with nothing else hidden: the compacted turns come back beside it
    code, out, _ = _run(capsys, *base, "restore", "--session", "s0")
    assert code == 0 and "restored 1 item(s)" in out
    with ctxbase.open(str(db), project="shop", embedder=None) as cb:
        assert [e.type for e in cb.last_events("s0")] == ["user_message", "session_summary"]

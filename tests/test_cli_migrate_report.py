"""`migrate-data` says what it did and refuses what it cannot do: a project the source does
not hold is not found (3), a copy into the source's own database is bad input (2), a re-run
says it wrote nothing, and a backup does not bring back a project forgotten whole."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from ctxbase.cli import main


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _capture(capsys: Any, db: str, project: str, session: str, text: str) -> None:
    base = ("--db", db, "--project", project, "--embedder", "none", "-q")
    assert _run(capsys, *base, "capture", "--session", session, "--text", text)[0] == 0


def _migrate(capsys: Any, project: str | None, src: str, dst: str) -> tuple[int, str, str]:
    named = ("--project", project) if project else ()
    return _run(capsys, *named, "-q", "migrate-data", "--from", src, "--to", dst)


def test_a_re_run_into_a_destination_written_to_since_keeps_and_reports_its_rows(
    tmp_path: Path, capsys: Any
) -> None:
    src, dst = str(tmp_path / "src.db"), str(tmp_path / "dst.db")
    _capture(capsys, src, "p", "s", "the walrus code is 42")
    assert _migrate(capsys, "p", src, dst)[0] == 0
    _capture(capsys, dst, "p", "s", "said to the destination")
    _capture(capsys, src, "p", "s", "said to the source")
    code, out, err = _migrate(capsys, "p", src, dst)
    assert code == 0 and err == "" and "differs" not in out, (out, err)
    assert "the destination holds 3 other row(s) of the project that the source does not" in out
    assert "(events 1, relations 1, items 1)" in out  # its search unit and NEXT edge
    rows = {line.split()[0]: line.split() for line in out.splitlines() if " source " in line}
    assert rows["events"][1:7] == ["source", "2", "written", "1", "destination", "3"]


def test_a_re_run_forgets_there_what_the_source_forgot_and_says_so(
    tmp_path: Path, capsys: Any
) -> None:
    src, dst = str(tmp_path / "src.db"), str(tmp_path / "dst.db")
    _capture(capsys, src, "p", "gone", "the vaultkey is 1234")
    _capture(capsys, src, "p", "kept", "keep this one")
    assert _migrate(capsys, "p", src, dst)[0] == 0
    base = ("--db", src, "--project", "p", "--embedder", "none", "-q")
    assert _run(capsys, *base, "forget", "--session", "gone")[0] == 0
    code, out, err = _migrate(capsys, "p", src, dst)
    assert code == 0 and err == "" and "differs" not in out, (out, err)
    assert "that the source has forgotten since an earlier copy" in out
    rows = {line.split()[0]: line for line in out.splitlines() if " source " in line}
    assert "(1 forgotten here: forgotten in the source)" in rows["events"]
    found = _run(capsys, "--db", dst, "--project", "p", "--embedder", "none", "search", "vaultkey")
    assert "vaultkey" not in found[1]


def test_a_project_the_source_does_not_hold_is_not_found(tmp_path: Path, capsys: Any) -> None:
    src, dst = str(tmp_path / "backup.db"), str(tmp_path / "new.db")
    _capture(capsys, src, "p2", "s", "hello")
    _capture(capsys, src, "p7", "s", "hello")
    for project in (None, "nope"):  # no --project: "default", which it does not hold
        code, out, err = _migrate(capsys, project, src, dst)
        assert code == 3 and out == ""
        assert f"not found in {src} (its projects: p2, p7; choose one with --project)" in err
        assert repr(project or "default") in err
    assert not os.path.exists(dst)  # refused before a destination was made


@pytest.mark.parametrize("on", ["sqlite", "postgres"])
def test_a_re_run_says_it_wrote_nothing(
    tmp_path: Path, capsys: Any, on: str, project_id: str, request: pytest.FixtureRequest
) -> None:
    src = str(tmp_path / "src.db")
    dst = str(tmp_path / "dst.db") if on == "sqlite" else request.getfixturevalue("pg_url")
    _capture(capsys, src, project_id, "s", "the walrus code is 42")
    code, out, _ = _migrate(capsys, project_id, src, dst)
    assert code == 0 and f"copied 4 new row(s) of project {project_id}\n" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if " source " in line}
    assert rows["events"][1:6] == ["source", "1", "written", "1", "destination"]
    code, out, _ = _migrate(capsys, project_id, src, dst)
    assert code == 0 and "differs" not in out
    assert f"copied nothing: all 4 row(s) of project {project_id} were already there" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if " source " in line}
    assert rows["events"][3:5] == ["written", "0"]
    _capture(capsys, src, project_id, "s", "and the next one")
    code, out, _ = _migrate(capsys, project_id, src, dst)
    # the event, its search unit and its NEXT edge; the project and session were there
    assert code == 0 and "copied 3 new row(s) of project" in out and "(4 already there)" in out


def test_a_database_is_not_copied_into_itself(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "same.db"
    _capture(capsys, str(db), "p", "s", "hello")
    os.symlink(db, tmp_path / "link.db")
    other_path = str(tmp_path / "sub" / ".." / "same.db")
    (tmp_path / "sub").mkdir()
    for target in (str(db), other_path, str(tmp_path / "link.db")):
        code, out, err = _migrate(capsys, "p", str(db), target)
        assert code == 2 and out == "", (target, out)
        assert err == (
            f"error: --to: {target} is the --from database itself: a project cannot be "
            "copied into itself\n"
        )


def test_the_same_postgresql_database_is_not_copied_into_itself(
    capsys: Any, pg_url: str, project_id: str, tmp_path: Path
) -> None:
    lite = str(tmp_path / "l.db")
    _capture(capsys, lite, project_id, "s", "hello")
    assert _migrate(capsys, project_id, lite, pg_url)[0] == 0
    code, out, err = _migrate(capsys, project_id, pg_url, pg_url)
    assert code == 2 and out == ""
    # a URL may carry a password: the message does not repeat it
    assert err == (
        "error: --to: this URL is the --from database itself: a project cannot be copied "
        "into itself\n"
    )


@pytest.mark.parametrize("live_on", ["sqlite", "postgres"])
def test_a_backup_does_not_bring_back_a_project_forgotten_whole(
    tmp_path: Path, capsys: Any, live_on: str, project_id: str, request: pytest.FixtureRequest
) -> None:
    live = str(tmp_path / "live.db") if live_on == "sqlite" else request.getfixturevalue("pg_url")
    bak = str(tmp_path / "bak.db")
    base = ("--db", live, "--project", project_id, "--embedder", "none", "-q")
    _capture(capsys, live, project_id, "s1", "the walrus code is 42")
    code, out, _ = _run(capsys, *base, "assemble", "walrus code", "--role", "coder", "--json")
    assert code == 0, out
    if live_on == "sqlite":
        shutil.copy(live, bak)
    else:
        assert _migrate(capsys, project_id, live, bak)[0] == 0
    assert _run(capsys, *base, "forget", "--whole-project", "--yes")[0] == 0

    code, out, err = _migrate(capsys, project_id, bak, live)
    assert code == 0 and err == "" and "differs" not in out
    assert (
        f"copied nothing of project {project_id}: the destination forgot the whole project" in out
    )
    rows = {line.split()[0]: line for line in out.splitlines() if " source " in line}
    assert "(1 left out: forgotten there)" in rows["traces"]
    assert "(1 left out: forgotten there)" in rows["projects"]
    code, out, _ = _run(capsys, "--db", live, "projects")
    assert code == 0 and project_id not in out
    assert _run(capsys, *base, "events", "s1")[0] == 3

    # Captured into again: the project is back, with the new message only. Its rows are
    # the destination's own (written since the forget), not rows of the backup "already
    # there", and the count check passes.
    _capture(capsys, live, project_id, "s2", "a fresh start")
    code, out, err = _migrate(capsys, project_id, bak, live)
    assert code == 0 and err == "" and "differs" not in out, (out, err)
    assert "already there" not in out
    assert (
        f"copied nothing of project {project_id}: the destination forgot the whole project "
        "(forget --whole-project) and was written to since: what it forgot stays out, its 4 "
        "row(s) written since are its own"
    ) in out
    rows = {line.split()[0]: line for line in out.splitlines() if " source " in line}
    for table in ("projects", "sessions", "events", "items"):
        assert (
            "(1 left out: forgotten there; 1 of its own: written since a forget there)"
            in (rows[table])
        ), rows[table]
    assert (
        "the destination held 4 row(s) of its own, of the project, written to again after its "
        "whole-project forget there (projects 1, sessions 1, events 1, items 1)"
    ) in out
    assert _run(capsys, *base, "events", "s1")[0] == 3
    code, out, _ = _run(capsys, *base, "events", "s2")
    assert code == 0 and "a fresh start" in out


def test_a_re_run_carries_rows_the_source_changed_in_place(tmp_path: Path, capsys: Any) -> None:
    """A document ingested again with new text (its entity and search units rewritten under
    their ids) and a `kb unpin`: the re-run replaces the destination's rows, says so, and
    the destination answers as the source does."""
    src, dst = str(tmp_path / "src.db"), str(tmp_path / "dst.db")
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "doc.md").write_text("# Ops\n\nThe zqxskua runbook.\n")
    base = ("--db", src, "--project", "m", "--embedder", "hash", "-q")
    assert _run(capsys, *base, "ingest", str(repo))[0] == 0
    assert _run(capsys, *base, "kb", "tag", "v1")[0] == 0
    assert _run(capsys, *base, "kb", "pin", "v1")[0] == 0
    assert _migrate(capsys, "m", src, dst)[0] == 0
    (repo / "doc.md").write_text("# Ops\n\nThe zqxtern runbook.\n")
    assert _run(capsys, *base, "ingest", str(repo))[0] == 0
    assert _run(capsys, *base, "kb", "unpin")[0] == 0

    code, out, err = _migrate(capsys, "m", src, dst)

    assert code == 0 and err == "" and "differs" not in out, (out, err)
    assert "replaced " in out and "row(s) the source changed since" in out
    there = ("--db", dst, "--project", "m", "--embedder", "hash", "-q")
    for word, found in (("zqxtern", True), ("zqxskua", False)):
        code, out, _ = _run(capsys, *there, "search", word, "--preset", "keyword")
        assert code == 0 and ("doc.md" in out) == found, (word, out)
    here, there_ = (_run(capsys, *b, "kb", "list")[1] for b in (base, there))
    assert here == there_


def test_a_re_run_reports_rows_that_differ_and_takes_them_with_source_wins(
    tmp_path: Path, capsys: Any
) -> None:
    """A change with no time to tell which side is newer (events hidden in the source) is
    kept, counted per table and named on stderr with exit 1; --source-wins takes it."""
    src, dst = str(tmp_path / "src.db"), str(tmp_path / "dst.db")
    _capture(capsys, src, "p", "s", "the walrus code is 42")
    assert _migrate(capsys, "p", src, dst)[0] == 0
    base = ("--db", src, "--project", "p", "--embedder", "none", "-q")
    assert _run(capsys, *base, "forget", "--soft", "--session", "s")[0] == 0

    code, out, err = _migrate(capsys, "p", src, dst)

    assert code == 1, (out, err)
    assert (
        "error: 2 row(s) differ from the source; kept the destination's (events 1, items 1)" in err
    )
    assert "--source-wins" in err
    assert "<-- differs" in next(ln for ln in out.splitlines() if ln.startswith("events"))
    code, out, err = _run(capsys, "--project", "p", "-q", "migrate-data", "--from", src,
                          "--to", dst, "--source-wins")  # fmt: skip
    assert code == 0 and err == "", (out, err)
    assert "replaced 2 row(s)" in out
    assert _migrate(capsys, "p", src, dst)[0] == 0

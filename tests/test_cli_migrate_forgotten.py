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


def test_migrate_data_leaves_out_a_forgotten_repository(tmp_path: Path, capsys: Any) -> None:
    """A backup taken before `forget --repo` brings back neither where the repository
    lived nor its knowledge-base tag; the repository stays forgotten (a second forget says
    so), and the other repository's tag is kept without it."""
    live, bak = str(tmp_path / "live.db"), str(tmp_path / "bak.db")
    base = ("--db", live, "--project", "p", "--embedder", "hash", "-q")
    for name in ("anc", "asm"):
        root = tmp_path / name
        root.mkdir()
        (root / f"{name}.py").write_text(f'def {name}_zqx():\n    """{name} tool."""\n')
        assert _run(capsys, *base, "ingest", str(root), "--repo", name)[0] == 0
    assert _run(capsys, *base, "kb", "tag", "v1")[0] == 0
    assert _run(capsys, *base, "kb", "tag", "v1anc", "--repo", "anc")[0] == 0
    shutil.copy(live, bak)
    assert _run(capsys, *base, "forget", "--repo", "anc")[0] == 0

    code, out, err = _run(capsys, "--project", "p", "-q", "migrate-data", "--from", bak,
                          "--to", live)  # fmt: skip
    assert code == 0 and "differs" not in out and err == "", (out, err)
    rows = {line.split()[0]: line for line in out.splitlines() if " source " in line}
    assert "(2 left out: forgotten there)" in rows["state"]  # where anc lived, v1anc
    code, out, _ = _run(capsys, *base, "kb", "list", "--json")
    tags = {t["name"]: t for t in json.loads(out)}
    assert code == 0 and set(tags) == {"v1"} and tags["v1"]["repos"] == ["asm"]
    code, out, err = _run(capsys, *base, "entities", "--repo", "anc", "--json")
    assert (code, json.loads(out)) == (0, [])  # forgotten whole there: no typo, nothing held
    code, out, err = _run(capsys, *base, "forget", "--repo", "anc")
    assert code == 0 and json.loads(out)["already_forgotten"] == ["anc"]
    assert "already forgotten in project 'p': repo 'anc'" in err


def test_migrate_data_leaves_out_the_forgotten_life_of_a_session_used_again(
    tmp_path: Path, capsys: Any
) -> None:
    """A session forgotten and then written to again: the backup's rows of its first life
    (the events, and the trace assembled then, older than the forget) are left out and
    counted so; what the destination wrote since is its own, and the command ends 0."""
    live, bak = str(tmp_path / "live.db"), str(tmp_path / "bak.db")
    base = ("--db", live, "--project", "p", "--embedder", "none", "-q")
    for text in ("the walrus launch code is 42", "noted the walrus launch code"):
        assert _run(capsys, *base, "capture", "--session", "s1", "--text", text)[0] == 0
    assert _run(capsys, *base, "assemble", "--role", "coder", "--session", "s1", "walrus")[0] == 0
    shutil.copy(live, bak)
    assert _run(capsys, *base, "forget", "--session", "s1")[0] == 0
    assert _run(capsys, *base, "capture", "--session", "s1", "--text", "a fresh start")[0] == 0
    assert _run(capsys, *base, "assemble", "--role", "coder", "--session", "s1", "fresh")[0] == 0

    code, out, err = _run(capsys, "--project", "p", "-q", "migrate-data", "--from", bak,
                          "--to", live)  # fmt: skip
    assert code == 0 and "differs" not in out and err == "", (out, err)
    rows = {line.split()[0]: line for line in out.splitlines() if " source " in line}
    both = "(1 left out: forgotten there; 1 of its own: written since a forget there)"
    assert both in rows["traces"]
    assert "(2 left out: forgotten there; 1 of its own" in rows["events"]
    assert "held 3 row(s) of its own, of sessions written to again" in out
    code, out, _ = _run(capsys, *base, "events", "s1", "--json")
    assert code == 0 and [e["text"] for e in json.loads(out)] == ["a fresh start"]

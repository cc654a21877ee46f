"""`ctxbase kb tag|list|pin|unpin` and `search --kb-version` on a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxbase.cli import main


def _run(capsys: Any, db: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["--db", str(db), "--embedder", "none", "-q", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_tag_pin_search_unpin(tmp_path: Path, capsys: Any) -> None:
    db, doc = tmp_path / "kb.db", tmp_path / "shop" / "docs" / "refunds.md"
    doc.parent.mkdir(parents=True)
    doc.write_text("# Refunds\n\nThe refund window is fourteen days.\n", encoding="utf-8")
    assert _run(capsys, db, "ingest", str(tmp_path / "shop"))[0] == 0
    code, out, _ = _run(capsys, db, "kb", "tag", "v1.2")
    assert code == 0 and out.startswith("v1.2: ") and "shop" in out
    doc.write_text("# Refunds\n\nThe refund window is thirty days.\n", encoding="utf-8")
    assert _run(capsys, db, "ingest", str(tmp_path / "shop"))[0] == 0
    search = ("search", "refund window", "-k", "3")
    assert "thirty" in _run(capsys, db, *search)[1]

    code, out, _ = _run(capsys, db, "kb", "pin", "v1.2", "--json")
    assert code == 0 and json.loads(out)["tag"] == "v1.2" and json.loads(out)["missing"] == 0
    out = _run(capsys, db, *search)[1]
    assert "fourteen" in out and "thirty" not in out
    out = _run(capsys, db, *search, "--kb-version", "latest")[1]
    assert "thirty" in out and "fourteen" not in out
    code, out, _ = _run(capsys, db, "kb", "list")
    assert code == 0 and out.startswith("* v1.2 ")

    code, out, _ = _run(capsys, db, "kb", "unpin")
    assert code == 0 and "unpinned v1.2" in out
    assert "thirty" in _run(capsys, db, *search)[1]
    assert json.loads(_run(capsys, db, "kb", "list", "--json")[1])[0]["pinned"] is False


def test_unknown_versions_and_bad_names(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "kb.db"
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    assert _run(capsys, db, "ingest", str(tmp_path / "shop"))[0] == 0
    code, _, err = _run(capsys, db, "kb", "pin", "v9")
    assert code == 3 and "'v9' not found" in err
    assert _run(capsys, db, "kb", "tag", "latest")[0] == 2
    code, _, err = _run(capsys, db, "kb", "tag", "v1", "--repo", "nope")
    assert code == 3 and "repository 'nope' not found" in err and "its repositories: shop" in err
    assert _run(capsys, db, "search", "alpha", "--kb-version", "v9")[0] == 3
    assert _run(capsys, db, "kb", "tag", "v1")[0] == 0
    code, _, err = _run(capsys, db, "kb", "tag", "v1")
    assert code == 2 and "already recorded" in err


def _loud(capsys: Any, db: Path, *argv: str) -> tuple[int, str, str]:
    """As `_run`, without -q: the notes a person reads on stderr."""
    code = main(["--db", str(db), "--embedder", "none", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_new_pin_says_it_replaces_the_old_one(tmp_path: Path, capsys: Any) -> None:
    """One version is pinned per project: pinning v2 drops v1's pin, which once went unsaid."""
    db = tmp_path / "kb.db"
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    assert _run(capsys, db, "ingest", str(tmp_path / "shop"))[0] == 0
    assert _run(capsys, db, "kb", "tag", "v1")[0] == 0
    assert _run(capsys, db, "kb", "tag", "v2")[0] == 0
    code, out, _ = _run(capsys, db, "kb", "pin", "v1")
    assert code == 0 and "replaces" not in out
    code, out, _ = _run(capsys, db, "kb", "pin", "v2")
    assert code == 0 and out.startswith("pinned v2: ")
    assert "replaces the pin on v1 (one version is pinned per project)" in out
    code, out, _ = _run(capsys, db, "kb", "pin", "v1", "--json")
    assert code == 0 and json.loads(out)["replaced"] == "v2"
    code, out, _ = _run(capsys, db, "kb", "pin", "v1", "--json")  # the same pin again
    assert code == 0 and json.loads(out)["replaced"] is None


def test_a_pinned_search_that_finds_nothing_says_the_project_is_pinned(
    tmp_path: Path, capsys: Any
) -> None:
    db, doc = tmp_path / "kb.db", tmp_path / "shop" / "a.md"
    doc.parent.mkdir()
    doc.write_text("# A\n\nalpha\n", encoding="utf-8")
    assert _run(capsys, db, "ingest", str(tmp_path / "shop"))[0] == 0
    assert _run(capsys, db, "kb", "tag", "v1")[0] == 0
    doc.write_text("# A\n\nalpha\n\nZebracorn was added after v1.\n", encoding="utf-8")
    assert _run(capsys, db, "ingest", str(tmp_path / "shop"))[0] == 0
    assert _run(capsys, db, "kb", "pin", "v1")[0] == 0
    search = ("search", "Zebracorn", "--preset", "keyword")
    code, out, err = _loud(capsys, db, *search)
    assert (code, out) == (0, "")
    assert err == (
        "no match for 'Zebracorn' in project 'default'\n"
        "note: project 'default' is pinned at v1 (kb pin): what was ingested since is not "
        "searched; --kb-version latest looks past it\n"
    )
    assert _run(capsys, db, *search) == (0, "", "")  # -q: no note
    code, out, err = _loud(capsys, db, *search, "--kb-version", "latest")
    assert code == 0 and "Zebracorn" in out and err == ""
    code, out, err = _loud(capsys, db, *search, "--kb-version", "v1")  # asked for: no note
    assert (code, out, err) == (0, "", "no match for 'Zebracorn' in project 'default'\n")
    code, out, err = _loud(capsys, db, "search", "alpha", "--preset", "keyword")
    assert code == 0 and "alpha" in out and err == ""  # something found: no note
    assert _run(capsys, db, "kb", "unpin")[0] == 0
    code, out, err = _loud(capsys, db, "search", "nothingmatcheshere", "--preset", "keyword")
    # not pinned: no note of the pin, only the empty answer's line
    assert (code, out, err) == (0, "", "no match for 'nothingmatcheshere' in project 'default'\n")


def test_a_pin_says_which_tagged_units_are_hidden_and_how_to_bring_them_back(
    tmp_path: Path, capsys: Any
) -> None:
    db, doc = tmp_path / "kb.db", tmp_path / "shop" / "refunds.md"
    doc.parent.mkdir(parents=True)
    doc.write_text("# Refunds\n\nThe refund window is fourteen days.\n", encoding="utf-8")
    assert _run(capsys, db, "ingest", str(tmp_path / "shop"))[0] == 0
    assert _run(capsys, db, "kb", "tag", "v1")[0] == 0
    units = json.loads(_run(capsys, db, "entities", "--json")[1])
    (section,) = [e["id"] for e in units if e["type"] == "section"]
    assert _run(capsys, db, "forget", "--soft", "--entity", section)[0] == 0
    code, out, _ = _run(capsys, db, "kb", "pin", "v1")
    assert code == 0 and "1 units of v1 are hidden (forget --soft)" in out
    assert "no longer stored" not in out

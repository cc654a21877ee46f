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
    assert _run(capsys, db, "kb", "tag", "v1", "--repo", "nope")[0] == 3
    assert _run(capsys, db, "search", "alpha", "--kb-version", "v9")[0] == 3
    assert _run(capsys, db, "kb", "tag", "v1")[0] == 0
    code, _, err = _run(capsys, db, "kb", "tag", "v1")
    assert code == 2 and "already recorded" in err

"""`ctxbase entities` and `ctxbase trace` say what they leave out and show what is known."""

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


def _ingested(tmp_path: Path) -> list[str]:
    pkg = tmp_path / "shop"
    pkg.mkdir()
    for name in ("orders", "billing", "cache"):
        (pkg / f"{name}.py").write_text(f"def {name}_total(x):\n    return x + 1\n")
    db = str(tmp_path / "kb.db")
    with ctxbase.open(db, project="lib", embedder=None) as cb:
        assert cb.ingest(str(pkg)).repo == "shop"
    return ["--db", db, "--project", "lib"]


def test_a_cut_entity_list_says_how_many_there_are(tmp_path: Path, capsys: Any) -> None:
    base = _ingested(tmp_path)
    code, out, err = _run(capsys, *base, "entities", "--json")
    assert code == 0 and err == ""
    listed = json.loads(out)
    total = len(listed)
    assert total > 3
    # ingested units carry their repository as a field of their own, as search hits do
    code_units = [e for e in listed if e["type"] == "code"]
    assert code_units and {e["repo"] for e in code_units} == {"shop"}
    code, out, err = _run(capsys, *base, "entities", "--limit", "2")
    assert code == 0 and len(out.splitlines()) == 2
    assert err.strip() == f"2 of {total} shown (--limit)"
    assert " shop " in out.splitlines()[0]
    code, out, err = _run(capsys, *base, "entities", "--type", "code", "--limit", "1")
    assert err.strip() == f"1 of {len(code_units)} shown (--limit)"
    code, out, err = _run(capsys, *base, "entities", "--limit", str(total))
    assert len(out.splitlines()) == total and err == ""


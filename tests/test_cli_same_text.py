"""`ctxbase search` shows the copies folded into a hit, and `ctxbase forget` (hard or
--soft) names the copies still saying what it forgot, on stderr and in the JSON report;
`ctxbase feedback` on the hit rates the copy with it and names it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxbase.cli import main

PIN = "my card PIN is 4321, remember it"


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_search_and_forget_name_the_copy(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "c.db"), "--project", "p", "--embedder", "hash"]
    ids = []
    for session in ("s1", "s2"):
        code, out, _ = _run(capsys, *base, "capture", "--session", session, "--text", PIN)
        assert code == 0
        ids.append(out.strip())
    code, out, _ = _run(capsys, *base, "search", "card PIN", "--preset", "keyword", "--json")
    (hit,) = json.loads(out)
    shown = hit["owner_id"]
    (copy,) = [i for i in ids if i != shown]
    assert code == 0 and hit["duplicates"] == [copy]
    code, out, _ = _run(capsys, *base, "search", "card PIN", "--preset", "keyword")
    assert code == 0 and out.splitlines()[1].split() == ["same", "text", "also", "in:", copy]
    note = f"note: 1 other event(s) say the same and stay visible: {copy}"
    code, out, err = _run(capsys, *base, "forget", "--event", shown, "--soft")
    assert code == 0 and note in err
    code, out, err = _run(capsys, *base, "restore", "--event", shown)
    assert code == 0 and "say the same" not in err
    code, out, err = _run(capsys, *base, "forget", "--event", shown)
    assert code == 0 and note in err
    assert json.loads(out)["same_text_still_visible"] == [copy]


def test_feedback_on_the_hit_rates_the_copy(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "w.db"), "--project", "p", "--embedder", "hash"]
    ids = []
    for session in ("s1", "s2"):
        code, out, _ = _run(capsys, *base, "capture", "--session", session, "--text", PIN)
        ids.append(out.strip())
    code, out, _ = _run(capsys, *base, "search", "card PIN", "--preset", "keyword", "--json")
    shown = json.loads(out)[0]["owner_id"]
    (copy,) = [i for i in ids if i != shown]
    code, out, _ = _run(capsys, *base, "feedback", shown, "wrong")
    assert code == 0 and f"the same text, rated with it: {copy}" in out
    code, out, _ = _run(capsys, *base, "search", "card PIN", "--preset", "keyword", "--json")
    assert code == 0 and json.loads(out) == []
    code, out, _ = _run(capsys, *base, "feedback", shown, "neutral", "--json")
    assert code == 0 and json.loads(out)["same_text"] == [copy]
    code, out, _ = _run(capsys, *base, "search", "card PIN", "--preset", "keyword", "--json")
    assert [h["owner_id"] for h in json.loads(out)] == [shown]

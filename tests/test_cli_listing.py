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


def test_trace_diff_shows_what_changed_between_two_contexts(tmp_path: Path, capsys: Any) -> None:
    db = str(tmp_path / "t.db")
    with ctxbase.open(db, project="p", embedder="hash") as cb:
        cb.record("user_message", session_id="s", text="the orders query is slow")
        a = cb.assemble_context(agent_role="coder", user_intent="why is orders slow?")
        cb.record("assistant_message", session_id="s", text="orders needs an index on created_at")
        b = cb.assemble_context(agent_role="coder", user_intent="why is orders slow?")
    code, out, err = _run(capsys, "--db", db, "trace", a.context_id, "--diff", b.context_id)
    assert code == 0, err
    assert a.context_id in out and b.context_id in out
    assert "orders needs an index on created_at" in out  # the prompt diff's new line
    code, out, _ = _run(capsys, "--db", db, "trace", a.context_id, "--diff", b.context_id, "--json")
    diff = json.loads(out)
    assert (diff["before_id"], diff["after_id"]) == (a.context_id, b.context_id)
    assert diff["is_empty"] is False and diff["added"]
    code, _, err = _run(capsys, "--db", db, "trace", a.context_id, "--diff", "ctx_nope")
    assert code == 3 and "ctx_nope" in err


def test_a_limit_of_zero_and_an_unknown_type_say_so(tmp_path: Path, capsys: Any) -> None:
    base = _ingested(tmp_path)
    code, out, err = _run(capsys, *base, "entities", "--limit", "0")
    assert code == 2 and out == "" and "--limit: must be >= 1 (got 0)" in err
    # a --type no item can have is bad input naming the known types, not silence
    code, out, err = _run(capsys, *base, "search", "total", "--type", "nonsense")
    assert code == 2 and out == ""
    assert "error: --type: unknown type 'nonsense'; known types:" in err
    assert "code" in err and "user_message" in err
    code, out, err = _run(capsys, *base, "search", "total", "--type", "code")
    assert code == 0 and "orders_total" in out and "unknown type" not in err
    # an unknown event type names the known ones, as the CLI can use them
    code, out, err = _run(capsys, *base, "capture", "--session", "s1", "--type", "bogus",
                          "--text", "hi")  # fmt: skip
    assert code == 2 and "unknown event type 'bogus'; known types: assistant_message" in err


def test_empty_listings_say_so_on_stderr(tmp_path: Path, capsys: Any) -> None:
    """No entities, no knowledge-base versions: a line saying so, exit 0, not silence."""
    db = str(tmp_path / "e.db")
    with ctxbase.open(db, project="p", embedder=None) as cb:
        cb.record("user_message", session_id="s", text="nothing to anchor here")
    base = ["--db", db, "--project", "p", "--embedder", "none"]
    code, out, err = _run(capsys, *base, "entities")
    assert (code, out) == (0, "")
    assert err.strip() == (
        "no entities in project 'p' (an ingest or an anchored message makes them)"
    )
    code, out, err = _run(capsys, *base, "entities", "--json")
    assert code == 0 and json.loads(out) == [] and err.startswith("no entities in project 'p'")
    code, out, err = _run(capsys, *base, "kb", "list")
    assert (code, out) == (0, "")
    assert err.strip() == "no versions recorded in project 'p' ('ctxbase kb tag NAME' records one)"


def test_events_json_gives_each_event_its_marks_as_the_library_does(
    tmp_path: Path, capsys: Any
) -> None:
    db = str(tmp_path / "ev.db")
    with ctxbase.open(db, project="p", embedder=None) as cb:
        plain = cb.record("user_message", session_id="s", text="the budget is 5k").id
        wrong = cb.record("user_message", session_id="s", text="the budget is 9k").id
        cb.feedback(wrong, "wrong")
        read = {e.id: e.marks for e in cb.last_events("s")}
    code, out, err = _run(capsys, "--db", db, "--project", "p", "events", "s", "--json")
    assert code == 0 and err == ""
    listed = {e["id"]: e for e in json.loads(out)}
    assert listed[plain]["marks"] == read[plain] == []
    assert listed[wrong]["marks"] == read[wrong] == ["wrong"]
    assert all("merged_id" not in e for e in listed.values())  # read by their own ids

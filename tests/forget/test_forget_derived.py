"""What capture anchoring made from a message goes with it: a hard forget removes the
entities anchored from it and the mentions no other event names, a soft delete hides them
(restore brings them back, a purge forgets them), and ingested or user entities stay."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ctxbase import ContextBase
from ctxbase.cli import main
from ctxbase.model import Relation

SECRET = (
    "The system must store the payroll in table hr_salaries_secret; ask @mallory before "
    "touching /api/v1/payroll/export or payroll_dump.py"
)
MENTIONED = {"hr_salaries_secret", "mallory", "/api/v1/payroll/export", "payroll_dump.py"}


def _owners(cb: ContextBase, query: str) -> set[str]:
    return {str(c.item.owner_id) for c in cb.search(query, preset="keyword").results}


def _names(cb: ContextBase, type: str) -> set[str]:
    return {e.name for e in cb.list_entities(type=type)}


def _mentions(cb: ContextBase, event_id: str) -> list[Relation]:
    return cb.store.list_relations(cb.project, [event_id], direction="out", types=["MENTIONS"])


def _captured(cb: ContextBase) -> tuple[str, str]:
    """The secret message and another one that also names @mallory, anchored."""
    secret = cb.record("user_message", session_id="s20", text=SECRET)
    other = cb.record("user_message", session_id="s21", text="Please ping @mallory about lunch")
    cb.flush()
    assert _names(cb, "mention") >= MENTIONED
    assert len(_names(cb, "requirement")) == 1
    return secret.id, other.id


def test_forget_removes_the_mentions_only_the_message_named(cb: ContextBase) -> None:
    # a table the user made and one capture anchoring made: only the latter is the message's
    kept = cb.upsert_entity(
        "mention", "ledger_archive", "table ledger_archive", properties={"kind": "table"}
    )
    secret, other = _captured(cb)
    cb.store.upsert_relations(
        [Relation(project_id=cb.project, from_id=secret, type="MENTIONS", to_id=kept.id,
                  source="human")]
    )  # fmt: skip
    report = cb.forget(event_ids=[secret])
    # the requirement and the three mentions no other event names
    assert report.removed["events"] == 1 and report.removed["entities"] == 4
    assert _names(cb, "mention") == {"mallory", "ledger_archive"}
    assert _names(cb, "requirement") == set()
    assert not _owners(cb, "hr_salaries_secret payroll_dump")
    mallory = {e.id for e in cb.list_entities(type="mention", name="mallory")}
    assert mallory <= _owners(cb, "mallory") and other in _owners(cb, "mallory")
    # the other event still reaches mallory
    links = _mentions(cb, other)
    assert {r.to_id for r in links} == mallory


def test_forget_session_removes_what_its_messages_made(cb: ContextBase) -> None:
    _captured(cb)
    report = cb.forget(session_id="s21")  # the other message: mallory is still named by s20
    assert report.removed.get("entities", 0) == 0
    report = cb.forget(session_id="s20")
    assert report.removed["entities"] == 5 and _names(cb, "mention") == set()


def test_soft_delete_hides_what_was_made_from_the_message(cb: ContextBase) -> None:
    secret, other = _captured(cb)
    ctx = cb.assemble_context(agent_role="coder", user_intent="payroll table", session_id="s21")
    assert "hr_salaries_secret" in json.dumps(ctx.trace)
    assert cb.soft_delete([secret]) == 5  # the message, its requirement, three mentions
    assert _names(cb, "requirement") == set()
    assert _names(cb, "mention") == {"mallory"}
    assert not _owners(cb, "hr_salaries_secret payroll_dump system must store")
    again = cb.assemble_context(agent_role="coder", user_intent="payroll table", session_id="s21")
    assert "hr_salaries_secret" not in json.dumps(again.messages)
    # a hide can be undone: the stored trace keeps what it showed until a hard forget, and
    # a read of it shows what is hidden now as hidden
    assert "hr_salaries_secret" in json.dumps(cb.store.get_trace(cb.project, ctx.context_id))
    assert "hr_salaries_secret" not in json.dumps(cb.get_trace(ctx.context_id))
    # mallory goes once every event naming it is hidden, and comes back with one of them
    assert cb.soft_delete([other]) == 2 and _names(cb, "mention") == set()
    assert cb.restore([other]) == 2 and _names(cb, "mention") == {"mallory"}
    assert cb.restore([secret]) == 5
    assert _names(cb, "mention") >= MENTIONED and len(_names(cb, "requirement")) == 1


def test_purge_forgets_what_was_hidden_with_the_message(cb: ContextBase) -> None:
    secret, _ = _captured(cb)
    made = [r.to_id for r in _mentions(cb, secret)]
    cb.soft_delete([secret])
    time.sleep(0.3)
    report = cb.purge_soft_deleted(0.1)
    assert report.removed["events"] == 1 and report.removed["entities"] == 4
    left = cb.store.get_entities(cb.project, made, include_inactive=True)
    assert [(e.name, e.active) for e in left] == [("mallory", True)]


def test_cli_forget_scenario(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "cb.db"), "--project", "shop", "--embedder", "hash"]
    assert main([*base, "capture", "--session", "s20", "--text", SECRET]) == 0
    secret = capsys.readouterr().out.strip()
    text = "mallory signs off the release"
    assert main([*base, "capture", "--session", "s21", "--text", f"@{text}"]) == 0
    capsys.readouterr()
    assert main([*base, "forget", "--event", secret]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["removed"]["events"] == 1 and report["removed"]["entities"] == 4
    assert main([*base, "search", "hr_salaries_secret"]) == 0
    assert "hr_salaries_secret" not in capsys.readouterr().out
    assert main([*base, "entities"]) == 0
    listed = capsys.readouterr().out
    assert "mallory" in listed and "hr_salaries_secret" not in listed
    assert "payroll" not in listed
    assert main([*base, "search", "mallory"]) == 0
    assert text in capsys.readouterr().out

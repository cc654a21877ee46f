"""What takes no memory slot for saying nothing: another session's question like the intent
that nothing answered there (an answered one stays, with its answer), and a bare mention
(a name anchored from ordinary words) whose turn memory does not hold (one a turn or a
statement of memory says merges into it; a typed entity with a definition stays)."""

from __future__ import annotations

import time
from typing import Any

from ctxbase import ContextBase
from ctxbase.assemble.asked_before import (
    FOLLOWING,
    answer_in,
    asks_again,
    drop_unanswered,
    settled,
)
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.gatherer import Gatherer
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.memory_candidate import entity_cand, event_cand, label_day
from ctxbase.assemble.policy_loading import load_default_policies
from ctxbase.model import Event

ASKED = "上次那个SQL是什么来着?"
INTENT = "上次那个SQL是什么?"
ANSWER = "是 SELECT id, total FROM orders WHERE day = ?"


def _gatherer(cb: ContextBase, intent: str, session: str | None = "now") -> Gatherer:
    policy = load_default_policies().default
    return Gatherer(cb, cb.project, policy, session_id=session, intent=intent, exclude=set())


def _event(cb: ContextBase, event_id: str) -> Event:
    (found,) = cb.store.get_events(cb.project, [event_id])
    return found


def _asked_in(g: Gatherer, cb: ContextBase, event_id: str, score: float = 0.8) -> None:
    ev = _event(cb, event_id)
    assert g.add(event_cand(ev, score, "semantic_recall", "semantic_recall: search hit"), ev)


def _reasons(g: Gatherer, owner_id: str) -> list[tuple[str, str]]:
    return [(d["reason"], d["detail"]) for d in g.dropped if d["id"] == owner_id]


def _ev(type_: str, text: str, **metadata: Any) -> Event:
    return Event(project_id="p", session_id="s", type=type_, text=text, metadata=metadata)


# -- another session's question like the intent ----------------------------------------


def test_asks_again_reads_letters_and_digits() -> None:
    assert asks_again(ASKED, INTENT)  # a filler word more
    assert asks_again("上次那个 SQL 是什么？", INTENT)  # width, spaces, punctuation aside
    assert asks_again("上次那个SQL是什么", INTENT)  # no question mark, nothing more said
    assert asks_again("What was that SQL again?", "what was that sql")
    assert not asks_again("Which SQL did we write for the report?", INTENT)
    assert not asks_again("What was the SQL for the refunds report?", "How slow was it?")
    assert not asks_again("???", "???")  # no letter to compare
    # a statement that says more than the intent is no question asked again
    assert not asks_again("订单缓存方案A", "订单缓存方案")


def test_answer_in_looks_until_the_next_user_message() -> None:
    said = _ev("assistant_message", "是 SELECT 1")
    call = _ev("tool_invocation", "run_sql(sql='SELECT 1')")
    result = _ev("tool_result", "1 row")
    failed = _ev("tool_result", "error: no such table", error="no such table")
    again = _ev("user_message", "hello?")
    assert answer_in([said]) is said
    assert answer_in([call, result, said]) is result  # a call's result carries content
    assert answer_in([call, failed, again, said]) is None  # a failed run answers nothing
    assert answer_in([_ev("assistant_message", "  "), again]) is None
    assert settled([call, again], complete=False) and settled([call], complete=True)
    assert not settled([call, failed], complete=False)


def test_an_unanswered_question_of_another_session_takes_no_slot(cb: ContextBase) -> None:
    asked = cb.capture("user_message", session_id="a", text=ASKED)
    cb.capture("user_message", session_id="a", text="算了, 先看看报表")  # asked on, no answer
    lone = cb.capture("user_message", session_id="b", text=INTENT.replace("?", "呢?"))
    other = cb.capture("user_message", session_id="c", text="Which SQL did we write?")
    cb.flush()
    g = _gatherer(cb, INTENT)
    for event_id in (asked, lone, other):
        _asked_in(g, cb, event_id)
    drop_unanswered(g)
    assert asked not in g.cands and lone not in g.cands  # the session ended: no answer
    assert other in g.cands  # another question: not the intent again
    ((reason, detail),) = _reasons(g, asked)
    assert reason == "unanswered"
    assert detail == "another session's question like the intent; nothing answered it in 'a'"
    # the intent's own session is the history's: its questions are not this rule's
    mine = _gatherer(cb, INTENT, session="a")
    _asked_in(mine, cb, asked)
    drop_unanswered(mine)
    assert asked in mine.cands


def test_an_answered_question_brings_its_answer(cb: ContextBase) -> None:
    asked = cb.capture("user_message", session_id="a", text=ASKED)
    call = cb.capture("tool_invocation", session_id="a", text="run_sql(sql='SELECT 1')")
    failed = cb.capture("tool_result", session_id="a", text="error", metadata={"error": "timeout"})
    answer = cb.capture("assistant_message", session_id="a", text=ANSWER)
    cb.flush()
    assert call and failed
    g = _gatherer(cb, INTENT)
    _asked_in(g, cb, asked, score=0.7)
    drop_unanswered(g)
    assert asked in g.cands and not _reasons(g, asked)
    brought = g.cands[answer]
    assert brought.unit == asked and brought.score == 0.7  # right after it, at its score
    assert brought.reasons == [
        f"semantic_recall: the answer to {asked}, a question like the intent"
    ]


def test_a_retracted_answer_answers_nothing(cb: ContextBase) -> None:
    cm = ContextManager(cb)
    sid = cm.create_session("alice")
    asked = cm.add_message(sid, "user", ASKED)
    answer = cm.add_message(sid, "assistant", ANSWER)
    cm.expire_message(sid, answer)
    cb.flush()
    g = _gatherer(cb, INTENT)
    _asked_in(g, cb, asked)
    drop_unanswered(g)
    assert asked not in g.cands and answer not in g.cands
    assert _reasons(g, asked) == [
        (
            "unanswered",
            f"another session's question like the intent; its answer in {sid!r}, "
            f"{answer}, cannot enter",
        )
    ]


def test_a_long_run_of_calls_does_not_settle_it(cb: ContextBase) -> None:
    asked = cb.capture("user_message", session_id="a", text=ASKED)
    for n in range(FOLLOWING):
        cb.capture("tool_invocation", session_id="a", text=f"search(q='sql {n}')")
    cb.flush()
    g = _gatherer(cb, INTENT)
    _asked_in(g, cb, asked)
    drop_unanswered(g)
    assert asked in g.cands  # not known to be unanswered: it stays


def _assemble(cb: ContextBase, intent: str, session: str) -> Any:
    cb.capture("user_message", session_id=session, text=intent)
    cb.flush()
    return cb.assemble_context(agent_role="coder", user_intent=intent, session_id=session)


def _memory(ctx: Any) -> str:
    found = [m["content"] for m in ctx.messages if "Retrieved context" in m["content"]]
    return found[0] if found else ""


def test_assembly_leaves_the_unanswered_question_out_and_keeps_the_answered(
    cb: ContextBase,
) -> None:
    now = time.time()
    bare = cb.capture("user_message", session_id="a", text=ASKED, ts=now - 300)
    cb.capture("user_message", session_id="a", text="算了", ts=now - 290)
    cb.capture("user_message", session_id="d", text="上次那个SQL是什么", ts=now - 200)
    answer = cb.capture("assistant_message", session_id="d", text=ANSWER, ts=now - 190)
    cb.flush()
    cb.wait_for_embeddings()
    ctx = _assemble(cb, INTENT, "b")
    memory = _memory(ctx)
    assert ASKED not in memory
    assert any(d["id"] == bare and d["reason"] == "unanswered" for d in ctx.trace["dropped"])
    # the answered one shows, its answer right after it
    blocks = memory.removesuffix("\n</quoted_data>").split("\n\n")
    i = next(n for n, b in enumerate(blocks) if b.endswith("\n上次那个SQL是什么"))
    assert blocks[i + 1] == f"[message {answer}, {label_day(now - 190)}]\n{ANSWER}"


REVENUE = "What was the SQL for the monthly revenue report?"
NEVER_MIND = "Never mind, let's talk about the logo colours."


def test_the_message_after_an_unanswered_question_goes_with_it(cb: ContextBase) -> None:
    """It is indexed with the question's words (context terms), so it matched them; unless
    its own words are about the intent, it does not take the slot the question gave up."""
    asked = cb.capture("user_message", session_id="d1", text=REVENUE)
    after = cb.capture("user_message", session_id="d1", text=NEVER_MIND)
    cb.flush()
    g = _gatherer(cb, "What was the SQL for the monthly revenue report again?")
    _asked_in(g, cb, asked)
    _asked_in(g, cb, after, score=0.6)
    drop_unanswered(g)
    assert asked not in g.cands and after not in g.cands
    ((reason, detail),) = _reasons(g, after)
    assert reason == "unanswered" and detail.startswith(f"follows {asked}, a question like")
    assert "its own share none with the intent" in detail
    # a next message that is about the intent by its own words stays
    asked2 = cb.capture("user_message", session_id="d2", text=REVENUE)
    on_topic = cb.capture(
        "user_message", session_id="d2", text="The revenue report SQL is in the wiki."
    )
    cb.flush()
    g = _gatherer(cb, "What was the SQL for the monthly revenue report again?")
    _asked_in(g, cb, asked2)
    _asked_in(g, cb, on_topic, score=0.6)
    drop_unanswered(g)
    assert asked2 not in g.cands and on_topic in g.cands


def test_assembly_gives_no_slot_to_what_follows_an_unanswered_question(cb: ContextBase) -> None:
    """The trial's example, hash embedder: the near question and the identical one."""
    fill = [
        "The CI pipeline runs on every push to main.",
        "Our staging cluster has three nodes.",
        "Invoices are generated on the first of each month.",
    ]
    for n, text in enumerate(fill):
        cb.capture("user_message", session_id=f"f{n}", text=text)
    asked = cb.capture("user_message", session_id="d1", text=REVENUE)
    after = cb.capture("user_message", session_id="d1", text=NEVER_MIND)
    cb.flush()
    for session, intent in (("d8", f"{REVENUE[:-1]} again?"), ("d9", REVENUE)):
        ctx = _assemble(cb, intent, session)
        assert NEVER_MIND not in _memory(ctx)
        why = {d["id"]: (d["reason"], d["detail"]) for d in ctx.trace["dropped"]}
        assert why[after][0] == "unanswered" and why[after][1].startswith(f"follows {asked}")
    assert why[asked] == ("the intent", "asks exactly the intent (session 'd1')")


# -- bare mentions ------------------------------------------------------------------------


def _mention(cb: ContextBase, name: str) -> str:
    found = [e.id for e in cb.store.list_entities(cb.project, type="mention") if e.name == name]
    assert found, cb.store.list_entities(cb.project, type="mention")
    return found[0]


def _entity_in(g: Gatherer, cb: ContextBase, entity_id: str, score: float = 0.8) -> None:
    (e,) = cb.store.get_entities(cb.project, [entity_id])
    assert g.add(entity_cand(e, score, "semantic_recall", "semantic_recall: search hit"))


def test_a_bare_mention_whose_turn_is_not_in_memory_takes_no_slot(cb: ContextBase) -> None:
    turn = cb.capture("user_message", session_id="a", text="Ops said the archive table got big.")
    cb.flush()
    archive = _mention(cb, "archive")
    assert cb.store.get_entities(cb.project, [archive])[0].text == "table archive"
    g = _gatherer(cb, "how big is the archive?")
    _entity_in(g, cb, archive)
    g.drop_repeats()
    assert archive not in g.cands
    assert _reasons(g, archive) == [
        ("bare mention", "a bare name ('table archive'); no item in memory says it")
    ]
    # its turn in memory says it: the turn shows, at the better of the two scores
    g = _gatherer(cb, "how big is the archive?")
    _entity_in(g, cb, archive, score=0.9)
    _asked_in(g, cb, turn, score=0.5)
    g.drop_repeats()
    assert archive not in g.cands and g.cands[turn].score == 0.9
    assert _reasons(g, archive) == [("duplicate", f"a bare name; {turn} in memory says it")]


def test_a_statement_saying_the_name_holds_it_and_a_definition_stays(cb: ContextBase) -> None:
    cb.capture(
        "user_message",
        session_id="a",
        text="We must move rows older than a year into the archive table.",
    )
    cb.flush()
    archive = _mention(cb, "archive")
    (req,) = cb.store.list_entities(cb.project, type="requirement")
    defined = cb.upsert_entity(
        "table",
        "orders_archive",
        "CREATE TABLE orders_archive (id INT, total NUMERIC)",
        project=cb.project,
    )
    g = _gatherer(cb, "archive table")
    _entity_in(g, cb, archive)
    _entity_in(g, cb, req.id, score=0.6)
    _entity_in(g, cb, defined.id)
    g.drop_repeats()
    assert archive not in g.cands
    assert _reasons(g, archive) == [("duplicate", f"a bare name; {req.id} in memory says it")]
    assert req.id in g.cands and defined.id in g.cands  # what says more stays


def test_assembly_shows_no_bare_mention_of_a_turn_memory_lacks(cb: ContextBase) -> None:
    policy = """
version: 1
inherit_presets: false
policies:
  - name: all
    match: {default: true}
    top_k: 1
    strategies:
      - {name: semantic_recall, top_k: 1, min_score: 0.0, search_preset: hybrid}
"""
    cb.capture("user_message", session_id="a", text="Ops said the archive table got big.")
    cb.flush()
    cb.wait_for_embeddings()
    archive = _mention(cb, "archive")
    ctx = Assembler(cb, policy).assemble(agent_role="coder", user_intent="archive table")
    assert "table archive" not in _memory(ctx)
    dropped = [d for d in ctx.trace["dropped"] if d["id"] == archive]
    assert [d["reason"] for d in dropped] == ["bare mention"], ctx.trace["dropped"]

"""A fact stated by a message that is hidden or rated wrong is no known fact any more (on
SQLite and PostgreSQL): it leaves the state and the assembled prompt as a recorded change,
a fact a later message set again keeps that value, and `restore` (or a rating that is not
false) brings the withdrawn value back."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.assemble.facts import RuleFactExtractor
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.withheld import HIDDEN, RATED_WRONG


def _prompt(cm: ContextManager, sid: str) -> str:
    return "\n".join(m["content"] for m in cm.get_prompt_messages(sid, user_input="那时间呢"))


def test_a_hidden_message_takes_its_fact_out_and_restore_brings_it_back(
    cb: ContextBase,
) -> None:
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session("alice")
    said = cm.add_message(sid, "user", "预算控制在7万以内")
    assert cm.get_state(sid, "budget")["amount"] == 70000
    assert "budget <= 70000 CNY" in _prompt(cm, sid)
    assert cb.soft_delete([said]) == 1
    assert cm.get_state(sid, "budget") is None
    assert "70000" not in _prompt(cm, sid)
    last = cm.state_history(sid, "budget")[-1]
    assert last.deleted and last.cause == f"{HIDDEN}: message {said} retracted"
    assert cb.restore([said]) == 1
    assert cm.get_state(sid, "budget")["amount"] == 70000
    assert "budget <= 70000 CNY" in _prompt(cm, sid)
    # the value brought back names its message: hiding it again finds it again
    assert f"(from {said})" in (cm.state_history(sid, "budget")[-1].cause or "")
    cb.soft_delete([said])
    assert cm.get_state(sid, "budget") is None


def test_a_hidden_correction_goes_back_to_the_value_before_it(cb: ContextBase) -> None:
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session("alice")
    cm.add_message(sid, "user", "用户预算5万")
    later = cm.add_message(sid, "user", "把预算控制在3万以内")
    cb.soft_delete([later])
    assert cm.get_state(sid, "budget") == {"op": "=", "amount": 50000, "currency": "CNY"}
    prompt = _prompt(cm, sid)
    assert "30000" not in prompt and "budget = 50000 CNY" in prompt
    cb.restore([later])
    assert cm.get_state(sid, "budget")["amount"] == 30000


def test_a_fact_a_later_message_set_is_not_touched(cb: ContextBase) -> None:
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session("alice")
    first = cm.add_message(sid, "user", "预算控制在7万以内")
    cm.add_message(sid, "user", "预算其实是9万")
    before = cm.state_history(sid, "budget")
    cb.soft_delete([first])
    assert cm.get_state(sid, "budget")["amount"] == 90000
    cb.feedback(first, "wrong", note="预算其实是9万")
    assert cm.state_history(sid, "budget") == before  # no change recorded
    cb.restore([first])
    assert cm.get_state(sid, "budget")["amount"] == 90000


def test_a_wrong_rating_takes_the_fact_out_and_neutral_brings_it_back(cb: ContextBase) -> None:
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session("u1")
    said = cm.add_message(sid, "user", "预算控制在7万以内，我喜欢蓝色")
    assert cm.get_state(sid, "budget") is not None
    cb.feedback(said, "wrong", note="预算其实是9万")
    assert cm.get_state(sid, "budget") is None
    assert "preference:蓝色" not in cb.get_facts(scope_id="u1", scope="user")
    prompt = _prompt(cm, sid)
    # the correction alone stands: no "known" value contradicts it
    assert "budget <= 70000" not in prompt and "预算其实是9万" in prompt
    last = cm.state_history(sid, "budget")[-1]
    assert last.cause == f"{RATED_WRONG}: message {said} retracted"
    # hidden as well: taking the rating back alone keeps it out
    cb.soft_delete([said])
    cb.feedback(said, "neutral")
    assert cm.get_state(sid, "budget") is None
    cb.restore([said])
    assert cm.get_state(sid, "budget")["amount"] == 70000
    assert "preference:蓝色" in cb.get_facts(scope_id="u1", scope="user")
    assert "budget <= 70000 CNY" in _prompt(cm, sid)


def test_a_retraction_is_not_undone_by_a_restore(cb: ContextBase) -> None:
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session("alice")
    first = cm.add_message(sid, "user", "用户预算5万")
    later = cm.add_message(sid, "user", "把预算控制在3万以内")
    cb.soft_delete([first])
    cm.expire_message(sid, later)
    # back to no value: the earlier one came from a hidden message
    assert cm.get_state(sid, "budget") is None
    cb.restore([later])  # nothing was hidden: no change
    assert cm.get_state(sid, "budget") is None
    cb.restore([first])
    assert cm.get_state(sid, "budget")["amount"] == 50000

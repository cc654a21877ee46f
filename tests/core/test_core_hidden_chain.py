"""A causal chain through a soft-deleted event: a placeholder in its place, never its
text, and the causes beyond it still reached; the hidden event itself says it is hidden."""

from __future__ import annotations

import pytest

from ctxbase import ContextBase, NotFoundError

SECRET = "zqxhidden the tool output with the password 0451"


def _run(cb: ContextBase) -> dict[str, str]:
    """U -> T -> R -> TH -> A, A also caused by R (the fresh-eyes report's chain)."""
    ids: dict[str, str] = {}
    ids["U"] = cb.record("user_message", session_id="s", text="why is the login slow?").id
    ids["T"] = cb.record(
        "tool_invocation", session_id="s", text="run_sql()", parent_event_ids=[ids["U"]]
    ).id
    ids["R"] = cb.record(
        "tool_result",
        session_id="s",
        text=SECRET,
        data={"rows": SECRET},
        metadata={"note": SECRET},
        parent_event_ids=[ids["T"]],
    ).id
    ids["TH"] = cb.record(
        "internal_thought", session_id="s", text="the scan", parent_event_ids=[ids["R"]]
    ).id
    ids["A"] = cb.record(
        "assistant_message",
        session_id="s",
        text="add an index",
        parent_event_ids=[ids["TH"], ids["R"]],
    ).id
    return ids


def test_a_hidden_middle_event_is_a_placeholder_and_the_chain_goes_on(cb: ContextBase) -> None:
    ids = _run(cb)
    full = [e.id for e in cb.causal_chain(ids["A"])]
    assert set(full) == {ids["R"], ids["TH"], ids["T"], ids["U"]}
    cb.soft_delete([ids["R"]])

    chain = cb.causal_chain(ids["A"])
    assert [e.id for e in chain] == full  # same events, same order
    hidden = next(e for e in chain if e.id == ids["R"])
    assert hidden.marks == ["hidden"] and hidden.active is False
    assert hidden.type == "tool_result" and hidden.parent_event_ids == [ids["T"]]
    assert hidden.text is None and hidden.data is None and hidden.metadata == {}
    assert all(SECRET not in e.model_dump_json() for e in chain)
    # the visible ones are whole
    by_id = {e.id: e for e in chain}
    assert by_id[ids["U"]].text == "why is the login slow?" and by_id[ids["U"]].marks == []
    assert by_id[ids["T"]].text == "run_sql()"
    # from the thought too: its only cause is hidden, the call and the request lie beyond
    assert [e.id for e in cb.causal_chain(ids["TH"])] == [ids["R"], ids["T"], ids["U"]]

    cb.restore([ids["R"]])
    again = cb.causal_chain(ids["A"])
    assert [e.id for e in again] == full and all(e.marks == [] for e in again)
    assert any(e.text == SECRET for e in again)


def test_two_hidden_links_in_a_row(cb: ContextBase) -> None:
    ids = _run(cb)
    cb.soft_delete([ids["R"], ids["T"]])
    chain = cb.causal_chain(ids["TH"])
    assert [(e.id, e.marks) for e in chain] == [
        (ids["R"], ["hidden"]),
        (ids["T"], ["hidden"]),
        (ids["U"], []),
    ]


def test_the_chain_of_a_hidden_event_says_it_is_hidden(cb: ContextBase) -> None:
    ids = _run(cb)
    cb.soft_delete([ids["R"]])
    for walk in (cb.causal_chain, cb.effects):
        with pytest.raises(NotFoundError, match=r"is hidden \(restore brings it back\)"):
            walk(ids["R"])
    cb.forget(event_ids=[ids["T"]])
    with pytest.raises(NotFoundError, match="not found: it was hard-forgotten"):
        cb.causal_chain(ids["T"])
    with pytest.raises(NotFoundError, match=r"'ev_never' not found$"):
        cb.causal_chain("ev_never")


def test_getting_a_hidden_event_says_it_is_hidden_as_its_chain_does(cb: ContextBase) -> None:
    ids = _run(cb)
    cb.soft_delete([ids["R"]])
    with pytest.raises(NotFoundError, match=r"is hidden \(restore brings it back\)"):
        cb.get_event(ids["R"])
    assert cb.get_event(ids["R"], include_inactive=True).active is False
    cb.forget(event_ids=[ids["T"]])
    for include_inactive in (False, True):
        with pytest.raises(NotFoundError, match="not found: it was hard-forgotten"):
            cb.get_event(ids["T"], include_inactive=include_inactive)
    with pytest.raises(NotFoundError, match=r"'ev_never' not found$"):
        cb.get_event("ev_never")


def test_a_chain_without_hidden_links_is_unchanged(cb: ContextBase) -> None:
    ids = _run(cb)
    chain = cb.causal_chain(ids["A"])
    # nearest first: the two direct causes (in id order), then the call, then the request
    assert [e.id for e in chain] == [*sorted([ids["R"], ids["TH"]]), ids["T"], ids["U"]]
    assert all(e.active for e in chain)


def test_effects_show_a_hidden_effect_and_go_on_past_it(cb: ContextBase) -> None:
    ids = _run(cb)
    full = [e.id for e in cb.effects(ids["U"])]
    assert full == [ids["T"], ids["R"], *sorted([ids["TH"], ids["A"]])]  # nearest first
    cb.soft_delete([ids["R"]])

    down = cb.effects(ids["U"])
    assert [e.id for e in down] == full  # the thought and the answer lie beyond R
    hidden = next(e for e in down if e.id == ids["R"])
    assert hidden.marks == ["hidden"] and hidden.active is False
    assert hidden.text is None and hidden.data is None and hidden.metadata == {}
    assert all(SECRET not in e.model_dump_json() for e in down)
    by_id = {e.id: e for e in down}
    assert by_id[ids["A"]].text == "add an index" and by_id[ids["A"]].marks == []
    # from the call: its only effect is hidden, the rest lies beyond it
    assert [e.id for e in cb.effects(ids["T"])] == [ids["R"], *sorted([ids["TH"], ids["A"]])]
    # a hidden last effect is a placeholder too
    cb.soft_delete([ids["A"]])
    assert [(e.id, e.marks) for e in cb.effects(ids["TH"])] == [(ids["A"], ["hidden"])]

    cb.restore([ids["R"], ids["A"]])
    again = cb.effects(ids["U"])
    assert [e.id for e in again] == full and all(e.marks == [] for e in again)


def test_effects_through_two_hidden_links_in_a_row(cb: ContextBase) -> None:
    ids = _run(cb)
    cb.soft_delete([ids["T"], ids["R"]])
    assert [(e.id, e.marks) for e in cb.effects(ids["U"])] == [
        (ids["T"], ["hidden"]),
        (ids["R"], ["hidden"]),
        *sorted([(ids["TH"], []), (ids["A"], [])]),
    ]

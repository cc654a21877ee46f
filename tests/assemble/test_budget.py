from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbase.assemble.budget import (
    BudgetItem,
    BudgetTooSmall,
    allocate_budget,
    compress_extractive,
    extract_summary,
    fit_to_clauses,
    fit_to_tokens,
    left_out_note,
    split_sentences,
)

_TOKEN = re.compile(r"[\u4e00-\u9fff]|[^\s\u4e00-\u9fff]+")


class WordCounter:
    """One token per whitespace-separated word and per CJK character."""

    def count(self, text: str) -> int:
        return len(_TOKEN.findall(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        tokens = list(_TOKEN.finditer(text))
        if len(tokens) <= max_tokens:
            return text
        return text[: tokens[max_tokens - 1].end()]


COUNTER = WordCounter()
SHARES = {"system": 0.1, "state": 0.2, "task": 0.1, "memory": 0.4, "history": 0.2}


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def test_counter_counts_cjk_chars_and_words() -> None:
    assert COUNTER.count("预算 is 5万") == 5
    assert COUNTER.truncate("a b c d", 2) == "a b"


def test_input_first_and_never_cut() -> None:
    allocation = allocate_budget(
        100, SHARES, COUNTER, {"memory": [BudgetItem("m", words(200))]}, latest_input=words(30)
    )
    assert allocation.input_tokens == 30
    assert allocation.input_text == words(30)
    assert not allocation.input_truncated
    assert allocation.total_tokens <= 100


def test_input_too_long_raises_unless_allowed() -> None:
    with pytest.raises(BudgetTooSmall) as info:
        allocate_budget(10, SHARES, COUNTER, {}, latest_input=words(11))
    assert info.value.input_tokens == 11 and info.value.max_tokens == 10
    assert "11 tokens" in str(info.value)
    allocation = allocate_budget(
        10,
        SHARES,
        COUNTER,
        {"system": [BudgetItem("s", "x")]},
        latest_input=words(11),
        allow_truncate_input=True,
    )
    assert allocation.input_truncated and allocation.input_tokens == 10
    assert allocation.total_tokens == 10
    assert [d.reason for d in allocation.dropped] == ["budget"]


def test_shares_give_quotas() -> None:
    allocation = allocate_budget(1000, SHARES, COUNTER, {}, latest_input=words(100))
    quotas = {name: layer.quota for name, layer in allocation.layers.items()}
    assert quotas == {"system": 90, "state": 180, "task": 90, "memory": 360, "history": 180}


def test_unused_share_goes_to_memory_first_then_history() -> None:
    items = {
        "system": [BudgetItem("sys", words(5))],
        "memory": [BudgetItem(f"m{i}", words(30, f"m{i}_"), score=1 - i / 10) for i in range(5)],
        "history": [BudgetItem(f"h{i}", words(30, f"h{i}_"), score=0.5) for i in range(5)],
    }
    allocation = allocate_budget(200, SHARES, COUNTER, items)
    memory, history = allocation.layers["memory"], allocation.layers["history"]
    # quotas: memory 80 (two items), history 40 (one item); 105 tokens are left unused by
    # the layers and go to memory first (three more items), the last 15 to history (cut)
    assert (memory.quota, history.quota) == (80, 40)
    assert len(memory.included) == 5 and memory.extra == 90
    assert [inc.truncated for inc in history.included] == [False, True]
    assert history.extra == 15 and history.included[1].tokens == 15
    assert allocation.total_tokens == 200


def test_best_scores_packed_and_original_order_kept() -> None:
    items = {
        "history": [
            BudgetItem("old", words(10, "old"), score=0.1),
            BudgetItem("mid", words(10, "mid"), score=0.9),
            BudgetItem("new", words(10, "new"), score=0.8),
        ]
    }
    allocation = allocate_budget(20, {"history": 1.0}, COUNTER, items, min_truncated_tokens=100)
    included = [inc.item.id for inc in allocation.layers["history"].included]
    assert included == ["mid", "new"]
    assert [(d.item.id, d.reason) for d in allocation.dropped] == [("old", "budget")]


def test_pinned_items_come_before_scores() -> None:
    items = {
        "memory": [
            BudgetItem("high", words(10), score=0.99),
            BudgetItem("pinned", words(10, "p"), score=0.0, required=True),
        ]
    }
    allocation = allocate_budget(10, {"memory": 1.0}, COUNTER, items)
    assert [i.item.id for i in allocation.layers["memory"].included] == ["pinned"]


def test_a_pinned_item_over_its_share_is_kept_whole_and_the_others_give_way() -> None:
    # the system prompt (pinned) is larger than its 10 % share: it still goes in whole,
    # before the pool is handed out, and the other layers shrink in proportion
    items = {
        "system": [BudgetItem("system", words(30, "s"), required=True)],
        "memory": [BudgetItem(f"m{i}", words(10, f"m{i}"), score=0.9) for i in range(8)],
        "history": [BudgetItem(f"h{i}", words(10, f"h{i}"), score=1.0) for i in range(8)],
    }
    shares = {"system": 0.1, "memory": 0.5, "history": 0.4}
    allocation = allocate_budget(100, shares, COUNTER, items, item_overhead_tokens=2)
    assert allocation.texts("system") == [words(30, "s")]
    assert allocation.total_tokens <= 100
    assert allocation.layers["memory"].included and allocation.layers["history"].included
    assert not [d for d in allocation.dropped if d.item.id == "system"]
    # too small for it: dropped with the reason, never cut
    small = allocate_budget(20, shares, COUNTER, items, item_overhead_tokens=2)
    assert small.texts("system") == []
    assert [d.detail for d in small.dropped if d.item.id == "system"] == [
        "pinned item needs 32 tokens; layer system is full"
    ]


def test_threshold_and_duplicates_are_reported() -> None:
    items = {
        "state": [BudgetItem("budget", "预算 <= 50000 CNY", score=1.0)],
        "memory": [
            BudgetItem("weak", "unrelated text", score=0.1),
            BudgetItem("pinned_weak", "pinned text", score=0.1, required=True),
            BudgetItem("copy", "  预算 <=   50000 cny ", score=0.9),
            BudgetItem("empty", "   ", score=0.9),
        ],
    }
    allocation = allocate_budget(500, SHARES, COUNTER, items, min_scores={"memory": 0.5})
    reasons = {d.item.id: d.reason for d in allocation.dropped}
    assert reasons == {"weak": "threshold", "copy": "duplicate", "empty": "threshold"}
    duplicate = next(d for d in allocation.dropped if d.item.id == "copy")
    assert "'budget' in state" in duplicate.detail
    assert allocation.texts("memory") == ["pinned text"]


def test_repeated_turns_of_the_conversation_are_all_kept() -> None:
    # "yes" twice answers two questions: the history layer keeps both, and a recalled "yes"
    # elsewhere does not take the place of either.
    items = {
        "memory": [BudgetItem("old_yes", "Yes", score=0.9)],
        "history": [
            BudgetItem("q1", "Drop the staging table orders_tmp?", score=1.0),
            BudgetItem("a1", "yes", score=1.0),
            BudgetItem("q2", "Done. Also drop the production table orders?", score=1.0),
            BudgetItem("a2", "yes", score=1.0),
        ],
    }
    allocation = allocate_budget(500, SHARES, COUNTER, items)
    assert [i.item.id for i in allocation.layers["history"].included] == ["q1", "a1", "q2", "a2"]
    assert not allocation.dropped
    # other layers still drop a text they repeat
    items["memory"].append(BudgetItem("old_yes_again", " yes ", score=0.8))
    allocation = allocate_budget(500, SHARES, COUNTER, items)
    assert [(d.item.id, d.reason) for d in allocation.dropped] == [("old_yes_again", "duplicate")]


def test_one_truncated_item_per_layer() -> None:
    items = {"memory": [BudgetItem(f"m{i}", words(50, f"m{i}_"), score=1.0) for i in range(3)]}
    allocation = allocate_budget(40, {"memory": 1.0}, COUNTER, items, min_truncated_tokens=5)
    included = allocation.layers["memory"].included
    assert len(included) == 1 and included[0].truncated
    assert included[0].tokens == 40
    # cut after a whole word, the marker counted in the 40 tokens
    assert included[0].text == words(39, "m0_") + " …"
    assert sum(1 for d in allocation.dropped if d.reason == "budget") == 2


def test_no_truncation_below_minimum() -> None:
    items = {"memory": [BudgetItem("m", words(50))]}
    allocation = allocate_budget(4, {"memory": 1.0}, COUNTER, items, min_truncated_tokens=5)
    assert allocation.layers["memory"].included == ()
    assert allocation.total_tokens == 0


def test_overhead_is_counted() -> None:
    items = {"history": [BudgetItem(str(i), "one two", score=1.0) for i in range(10)]}
    allocation = allocate_budget(
        20, {"history": 1.0}, COUNTER, items, item_overhead_tokens=3, dedupe=False
    )
    assert len(allocation.layers["history"].included) == 4  # 4 * (2 + 3) = 20
    assert allocation.total_tokens == 20


def test_bad_shares_are_refused() -> None:
    with pytest.raises(ValueError, match="must not exceed") as refused:
        allocate_budget(10, {"memory": 0.8, "history": 0.5}, COUNTER, {})
    # worded as a policy's budget is: what the sum is made of
    said = "layer shares add up to 1.300: memory 0.8 + history 0.5 = 1.300 as passed;"
    assert str(refused.value).startswith(said)
    with pytest.raises(ValueError) as refused:
        allocate_budget(10, {"memory": 0.9}, COUNTER, {}, latest_share=0.2)
    assert str(refused.value) == (
        "layer shares add up to 1.100: memory 0.9 as passed, plus 0.2 kept for the latest"
        " input (`latest_share`); they must not exceed 1.0"
    )
    with pytest.raises(ValueError, match="layer 'memory'"):
        allocate_budget(10, {"memory": -0.1}, COUNTER, {})


def test_extra_layers_are_allowed() -> None:
    items = {"tools": [BudgetItem("t", words(5))]}
    allocation = allocate_budget(50, {"memory": 0.5}, COUNTER, items)
    assert allocation.texts("tools") == [words(5)]


_text = st.lists(
    st.sampled_from(["alpha", "beta", "预", "算", "五万", "x", "\n", "gamma delta"]), max_size=40
).map(" ".join)
_item = st.builds(
    BudgetItem,
    id=st.text(min_size=1, max_size=4),
    text=_text,
    score=st.floats(0, 1),
    required=st.booleans(),
)
_layers = st.sampled_from(["system", "state", "task", "memory", "history", "extra"])


@st.composite
def _shares(draw: st.DrawFn) -> dict[str, float]:
    names = draw(st.lists(_layers, unique=True, max_size=6))
    raw = [draw(st.floats(0, 1)) for _ in names]
    total = sum(raw) or 1.0
    scale = draw(st.floats(0, 1))
    return {n: r / total * scale for n, r in zip(names, raw, strict=True)}


@settings(max_examples=300, deadline=None)
@given(
    max_tokens=st.integers(0, 300),
    shares=_shares(),
    items=st.dictionaries(_layers, st.lists(_item, max_size=8), max_size=6),
    latest=_text,
    overhead=st.integers(0, 4),
    min_truncated=st.integers(0, 10),
)
def test_total_never_exceeds_budget(
    max_tokens: int,
    shares: dict[str, float],
    items: dict[str, list[BudgetItem]],
    latest: str,
    overhead: int,
    min_truncated: int,
) -> None:
    allocation = allocate_budget(
        max_tokens,
        shares,
        COUNTER,
        items,
        latest_input=latest,
        allow_truncate_input=True,
        item_overhead_tokens=overhead,
        min_truncated_tokens=min_truncated,
    )
    assert allocation.total_tokens <= max_tokens
    recount = allocation.input_tokens
    for layer in allocation.layers.values():
        used = sum(COUNTER.count(inc.text) + overhead for inc in layer.included)
        assert used == layer.tokens
        assert sum(inc.truncated for inc in layer.included) <= 1
        recount += used
    assert recount == allocation.total_tokens
    # every item is either included or dropped, never both, never lost
    placed = sum(len(layer.included) for layer in allocation.layers.values())
    assert placed + len(allocation.dropped) == sum(len(v) for v in items.values())


def test_fit_to_tokens_respects_limit() -> None:
    assert fit_to_tokens("a b c", 5, COUNTER) == "a b c"
    assert fit_to_tokens("a b c", 2, COUNTER) == "a b"
    assert fit_to_tokens("a b c", 0, COUNTER) == ""


def test_split_sentences_mixed() -> None:
    text = "预算是5万。时间呢？We ship on Friday. Tests pass!\n下一步"
    assert split_sentences(text) == [
        "预算是5万。",
        "时间呢？",
        "We ship on Friday.",
        "Tests pass!",
        "下一步",
    ]


HISTORY = [
    "We discussed the order API. The order API needs pagination. Lunch was fine.",
    "The order API must cache results for 300 seconds. Weather talk happened.",
    "Pagination of the order API uses page and size. Someone laughed.",
]


def test_compress_keeps_informative_sentences_in_order() -> None:
    summary = compress_extractive(HISTORY, 25, COUNTER)
    assert COUNTER.count(summary) <= 25
    assert "cache results for 300 seconds" in summary
    assert "Lunch was fine." not in summary and "Someone laughed." not in summary
    positions = [summary.find(s) for s in ("pagination", "300 seconds") if s in summary]
    assert positions == sorted(positions)


def test_compress_chinese() -> None:
    texts = [
        "用户说预算控制在五万以内。今天天气不错。",
        "订单接口需要分页。订单接口需要缓存五分钟。哈哈。",
    ]
    summary = compress_extractive(texts, 30, COUNTER)
    assert COUNTER.count(summary) <= 30
    assert "订单接口需要分页。" in summary
    assert "哈哈。" not in summary


def test_compress_edge_cases() -> None:
    assert compress_extractive(HISTORY, 0, COUNTER) == ""
    assert compress_extractive([], 10, COUNTER) == ""
    # never cut inside a clause: a sentence of one clause that does not fit is left out
    assert compress_extractive(["one two three four five six seven."], 3, COUNTER) == ""
    everything = compress_extractive(HISTORY, 1000, COUNTER)
    assert all(s in everything for text in HISTORY for s in split_sentences(text))


@settings(max_examples=100, deadline=None)
@given(st.lists(_text, max_size=5), st.integers(0, 60))
def test_compress_never_exceeds(texts: list[str], max_tokens: int) -> None:
    assert COUNTER.count(compress_extractive(texts, max_tokens, COUNTER)) <= max_tokens


KEY = "关键结论：预算上限 8 万元，截止日期 12 月 20 日。"
DECISION = "关键决定：数据库选 PostgreSQL 18。"


def test_a_summary_never_cuts_inside_a_clause() -> None:
    # seed 004's window in tokens: "预算上限 8 万元" must never become "预算上限 8"
    whole = COUNTER.count(KEY)
    for room in range(1, whole):
        got = extract_summary([KEY, DECISION], room, COUNTER)
        assert got.text in ("", "关键结论：预算上限 8 万元", DECISION), (room, got)
        assert COUNTER.count(got.text) <= room
        if got.text == "关键结论：预算上限 8 万元":  # the clause after the comma is named
            assert "截止日期 12 月 20 日。" in got.left_out and DECISION in got.left_out
        if not got.text:
            assert got.left_out == (KEY, DECISION)  # dropped, and said so
    head = COUNTER.count("关键结论：预算上限 8 万元")
    assert extract_summary([KEY], head, COUNTER).text == "关键结论：预算上限 8 万元"
    assert extract_summary([KEY], head - 1, COUNTER) == extract_summary([KEY], 1, COUNTER)
    assert extract_summary([KEY], 1, COUNTER).left_out == (KEY,)


def test_no_clause_is_cut_inside_a_number() -> None:
    text = "The budget is 80,000 yuan, due on 20 December."
    assert fit_to_clauses(text, 5, COUNTER) == "The budget is 80,000 yuan"
    assert fit_to_clauses(text, 3, COUNTER) == ""
    assert fit_to_clauses(f"{DECISION} {KEY}", COUNTER.count(DECISION) + 2, COUNTER) == DECISION


def test_left_out_note_names_the_sentences() -> None:
    note = left_out_note([KEY, DECISION], 9)
    assert note.startswith("recent_window: the 9-token summary of older messages had no room")
    assert f'"{KEY}"' in note and f'"{DECISION}"' in note
    many = left_out_note([f"s{i}" for i in range(7)], 9)
    assert '"s4"' in many and '"s5"' not in many and many.endswith("and 2 more")


def test_a_clause_cut_item_is_cut_only_after_a_clause() -> None:
    text = f"Earlier conversation (summary): {KEY}"
    item = BudgetItem("summary", text, 0.5, cut="clauses")
    room = COUNTER.count("Earlier conversation (summary): 关键结论：预算上限 8 万元") + 1
    alloc = allocate_budget(
        room + 2, {"history": 1.0}, COUNTER, {"history": [item]}, min_truncated_tokens=1
    )
    (got,) = alloc.layers["history"].included
    assert got.truncated and got.text.endswith("预算上限 8 万元")
    plain = allocate_budget(
        room + 2,
        {"history": 1.0},
        COUNTER,
        {"history": [BudgetItem("summary", text, 0.5)]},
        min_truncated_tokens=1,
    )
    assert plain.layers["history"].included[0].text != got.text  # a token cut lands elsewhere


def test_a_repeated_sentence_takes_one_place_in_the_summary() -> None:
    # The user says A, then B, then A again: a bigger budget must never give "A A" and lose B.
    a = "决定：预算上限 8 万元，必须在十二月底之前完成上线。"
    b = "需求：导出报表必须支持 CSV 和 Excel 两种格式。"
    texts = [a, "收到，我记下了预算和上线时间。", b, "好的", a, "明白"]
    both = COUNTER.count(a) + COUNTER.count(b) + 1
    for room in range(both, both + 3 * COUNTER.count(a)):
        got = extract_summary(texts, room, COUNTER)
        assert got.text.count(a) == 1, (room, got.text)
        assert b in got.text, (room, got.text)
        assert got.left_out.count(a) == 0
    # nothing fits but A: left out names B once, and A never twice
    got = extract_summary(texts, COUNTER.count(a), COUNTER)
    assert got.text == a
    assert got.left_out.count(a) == 0 and got.left_out.count(b) <= 1
    # the same words with other spacing or case are the same sentence
    assert compress_extractive(["Ship it  Friday.", "ship it friday."], 100, COUNTER) == (
        "Ship it  Friday."
    )

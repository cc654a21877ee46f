"""Texts cut to a token budget where a reader expects them to end (assemble/cutting.py)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbase.assemble.budget import BudgetItem, allocate_budget, fit_to_tokens
from ctxbase.assemble.cutting import CUT_MARKER, fit_to_boundary, mark_cut
from ctxbase.assemble.memory_candidate import MemoryCandidate
from ctxbase.assemble.tokens import get_token_counter

_TOKEN = re.compile(r"[\u4e00-\u9fff]|[^\s\u4e00-\u9fff]+")


class WordCounter:
    """One token per whitespace-separated word and per CJK character."""

    def count(self, text: str) -> int:
        return len(_TOKEN.findall(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        tokens = list(_TOKEN.finditer(text))
        if max_tokens <= 0:
            return ""
        return text if len(tokens) <= max_tokens else text[: tokens[max_tokens - 1].end()]


WORDS = WordCounter()
REAL = get_token_counter()  # o200k_base: cuts inside words and Chinese runs

ZH = (
    "我们需要把最近30天的订单数据导出来，按照地区汇总。"
    "然后发给财务部门核对，预算上限 8 万元，不能超过。"
    "另外报表要在周五之前完成！"
)
EN = (
    "The created_at column holds the time an order was placed. "
    "We index it because the dashboard sorts by it, filters on it and pages through it. "
    "The budget is 80,000 yuan."
)
CODE = (
    "def export(orders):\n"
    "    rows = [o for o in orders if o.created_at >= since]\n"
    "    return summarize(rows, by='region')\n"
    "\n"
    "def summarize(rows, by):\n"
    "    return group(rows, by)\n"
)


def _head(cut: str, lines: bool = False) -> str:
    """What was kept of the text, the marker taken off."""
    marker = f"\n{CUT_MARKER}" if lines else CUT_MARKER
    assert cut.endswith(marker)
    return cut[: -len(marker)].rstrip()


def test_a_text_that_fits_is_returned_whole() -> None:
    assert fit_to_boundary(ZH, REAL.count(ZH), REAL) == ZH
    assert fit_to_boundary(ZH, 0, REAL) == ""


def test_chinese_prose_ends_after_its_last_whole_sentence() -> None:
    first = ZH[: ZH.index("。") + 1]
    room = REAL.count(ZH) - 3  # the last sentence does not fit
    cut = fit_to_boundary(ZH, room, REAL)
    assert cut == ZH[: ZH.index("！") - len("另外报表要在周五之前完成")] + CUT_MARKER
    assert REAL.count(cut) <= room
    # a room that holds the first sentence and most of the second
    room = REAL.count(first) + 8
    cut = fit_to_boundary(ZH, room, REAL)
    assert cut.startswith(first) and cut.endswith(CUT_MARKER) and REAL.count(cut) <= room


def test_chinese_prose_ends_after_a_clause_when_no_sentence_keeps_half_the_room() -> None:
    text = "用户说明了需求背景，我们需要把最近30天的订单数据导出来，按照地区汇总后发给财务。"
    room = REAL.count(text) - 4
    cut = fit_to_boundary(text, room, REAL)
    assert cut == "用户说明了需求背景，我们需要把最近30天的订单数据导出来…"
    assert not fit_to_tokens(text, room, REAL).endswith("。")  # not a sentence either


def test_an_unbroken_chinese_run_is_cut_between_characters_never_inside_a_number() -> None:
    text = "把最近30天的订单数据导出来按照地区汇总然后发给财务部门核对预算上限"
    for room in range(3, REAL.count(text)):
        cut = fit_to_boundary(text, room, REAL)
        assert REAL.count(cut) <= room
        head = _head(cut)
        assert text.startswith(head) and not head.endswith("3")


def test_english_prose_never_ends_inside_a_word() -> None:
    for room in range(4, REAL.count(EN)):
        cut = fit_to_boundary(EN, room, REAL)
        assert REAL.count(cut) <= room
        head = _head(cut)
        assert EN.startswith(head)
        rest = EN[len(head) :]
        assert rest[:1] in (" ", ",", "."), (room, cut)  # a whole word was kept
        assert not head.endswith(("created_", "80"))
    # the sentence wins while it keeps half the room
    first = EN[: EN.index(". ") + 1]
    assert fit_to_boundary(EN, REAL.count(first) + 6, REAL) == f"{first} {CUT_MARKER}"


def test_a_clause_cut_drops_its_comma_and_keeps_numbers_whole() -> None:
    text = "The budget is 80,000 yuan, paid in two parts, and it must not be exceeded"
    cut = fit_to_boundary(text, 11, WORDS)
    assert cut == "The budget is 80,000 yuan, paid in two parts …"
    assert fit_to_boundary(text, 6, WORDS) == "The budget is 80,000 yuan …"


def test_closing_quotes_stay_with_their_sentence() -> None:
    text = "他说：“好的，就这么定了。”然后大家开始讨论下一个议题的细节安排和时间表"
    cut = fit_to_boundary(text, 14, WORDS)
    assert cut == "他说：“好的，就这么定了。”…"


def test_code_is_cut_after_a_whole_line_the_marker_on_a_line_of_its_own() -> None:
    line_ends = [i for i, char in enumerate(CODE) if char == "\n"]
    for room in range(6, REAL.count(CODE)):
        cut = fit_to_boundary(CODE, room, REAL, lines=True)
        assert REAL.count(cut) <= room
        head = _head(cut, lines=True)
        assert CODE.startswith(head)
        whole_lines = [mark_cut(CODE[:end], lines=True) for end in line_ends]
        best = max((REAL.count(w) for w in whole_lines if REAL.count(w) <= room), default=0)
        if best >= room / 2:  # whole lines keep half the room: they are taken
            assert CODE[len(head)] == "\n", (room, cut)
        else:  # else whole words
            assert CODE[len(head)] in " \n", (room, cut)
    cut = fit_to_boundary(CODE, REAL.count(CODE) - 2, REAL, lines=True)
    assert cut == CODE[: CODE.rindex("    return group")].rstrip() + "\n…"


def test_one_long_line_of_code_falls_back_to_words_then_tokens() -> None:
    line = "SELECT " + ", ".join(f"col_{i}" for i in range(60)) + " FROM orders"
    cut = fit_to_boundary(line, 20, REAL, lines=True)
    assert REAL.count(cut) <= 20 and line.startswith(_head(cut, lines=True))
    assert line[len(_head(cut, lines=True))] == " "
    blob = "ab" * 300  # no boundary at all: a token cut, still marked
    cut = fit_to_boundary(blob, 10, REAL)
    assert cut.endswith(f" {CUT_MARKER}") and REAL.count(cut) <= 10 and len(cut) > 10


def test_mark_cut() -> None:
    assert mark_cut("完成了。") == "完成了。…"
    assert mark_cut("it ran ") == "it ran …"
    assert mark_cut("x = 1\n", lines=True) == "x = 1\n…"
    assert mark_cut("  ") == ""


_pieces = st.sampled_from(
    ["alpha", "created_at", "预算", "上限", "30", "80,000", "，", "。", ". ", ", ", "！", "\n", " "]
)


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(_pieces, max_size=60).map("".join),
    room=st.integers(0, 60),
    lines=st.booleans(),
    keep=st.integers(0, 12),
)
def test_a_cut_never_exceeds_its_room_and_keeps_a_prefix(
    text: str, room: int, lines: bool, keep: int
) -> None:
    for counter in (WORDS, REAL):
        cut = fit_to_boundary(text, room, counter, lines=lines, keep=keep)
        assert counter.count(cut) <= room
        if cut and cut != text:
            head = _head(cut, lines=lines)
            assert text.startswith(head) and head[keep:].strip()  # more than the label


def test_the_allocator_cuts_memory_by_kind_and_marks_it() -> None:
    items = {
        "memory": [
            BudgetItem("msg", EN, 1.0),
            BudgetItem("tool", CODE, 0.9, cut="lines"),
        ]
    }
    room = REAL.count(EN) + REAL.count(CODE) - 3
    allocation = allocate_budget(room, {"memory": 1.0}, REAL, items)
    whole, cut = allocation.layers["memory"].included
    assert whole.text == EN and not whole.truncated
    assert cut.truncated and cut.text.endswith("\n…") and CODE.startswith(cut.text[:-2])
    assert allocation.total_tokens <= room
    items = {"memory": [BudgetItem("msg", EN, 1.0)]}
    allocation = allocate_budget(REAL.count(EN) - 3, {"memory": 1.0}, REAL, items)
    (cut,) = allocation.layers["memory"].included
    assert cut.truncated and cut.text.endswith(f". {CUT_MARKER}")


def test_a_recalled_tool_result_is_cut_by_lines_and_a_message_as_prose() -> None:
    tool = MemoryCandidate("ev_2", "event", "tool_result", "", CODE, 1.0)
    message = MemoryCandidate("ev_1", "event", "user_message", "", EN, 1.0)
    assert (tool.cut, message.cut) == ("lines", "prose")
    shown = tool.item_text(REAL, 30)
    label, body = shown.split("\n", 1)
    assert label == "[tool result ev_2]" and body.endswith("\n…") and REAL.count(body) <= 30
    assert CODE.startswith(body[:-2]) and CODE[len(body) - 2] == "\n"
    shown = message.item_text(REAL, 20)
    assert shown.endswith(f". {CUT_MARKER}") and "created_…" not in shown


def test_a_boundary_cut_keeps_what_the_allocator_would_not_keep_less_of() -> None:
    text = "One two three four. " + " ".join(f"w{i}" for i in range(30))
    # half the room is taken by the whole first sentence...
    assert fit_to_boundary(text, 10, WORDS) == "One two three four. …"
    # ...unless that is below what the caller keeps: then whole words
    assert fit_to_boundary(text, 10, WORDS, at_least=8) == "One two three four. w0 w1 w2 w3 w4 …"
    items = {"memory": [BudgetItem("m", text)]}
    allocation = allocate_budget(10, {"memory": 1.0}, WORDS, items, min_truncated_tokens=8)
    (cut,) = allocation.layers["memory"].included
    assert cut.truncated and cut.text == "One two three four. w0 w1 w2 w3 w4 …"


def test_a_label_is_kept_whole_and_never_all_that_is_kept() -> None:
    label = "[message ev_01a23d162dd4ff4843921769f1901a30]"
    text = f"{label}\nAwesome! Sounds like your team has something similar going on, right?"
    keep = len(label) + 1
    tokens = REAL.count(label)
    # a room that holds the label and a few words: the words, not the label alone
    cut = fit_to_boundary(text, tokens + 5, REAL, keep=keep)
    assert cut.startswith(f"{label}\nAwesome!") and REAL.count(cut) <= tokens + 5
    # without `keep` the line end after the label is a boundary that keeps half the room
    assert fit_to_boundary(text, tokens + 2, REAL) == f"{label} …"
    # half the room is counted past the label: "Awesome!" alone is not enough of 8 more
    cut = fit_to_boundary(text, tokens + 8, REAL, keep=keep)
    assert cut == f"{label}\nAwesome! Sounds like your team has …"
    # no room past the label: no cut at all, rather than a label alone or a piece of one
    for room in range(1, tokens + 2):
        assert fit_to_boundary(text, room, REAL, keep=keep) == ""


def test_the_allocator_leaves_out_an_item_it_could_show_only_the_label_of() -> None:
    label = "[tool result ev_2 of ev_1 run_sql]"
    item = BudgetItem("ev_2", f"{label}\n{CODE}", cut="lines", keep=len(label) + 1)
    room = REAL.count(label) + 2
    allocation = allocate_budget(room, {"memory": 1.0}, REAL, {"memory": [item]})
    assert allocation.layers["memory"].included == ()
    assert [(d.item.id, d.reason) for d in allocation.dropped] == [("ev_2", "budget")]
    first = f"{label}\ndef export(orders):\n…"
    allocation = allocate_budget(REAL.count(first), {"memory": 1.0}, REAL, {"memory": [item]})
    (cut,) = allocation.layers["memory"].included
    assert cut.truncated and cut.text == first

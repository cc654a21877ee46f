"""A period a query places relative to another event ("the day after I got back from
Shenzhen", "the week before the launch", "搬家后第二天", "开始灰度的前一周"), as timestamps.

query_dates.py reads periods a query dates itself; many questions instead date what they ask
about by another event. Answering them is a hop through time: find the anchor event (the
best match of the anchor phrase), take the day it was recorded, and move by the offset the
query names. The events recorded in that period are what the query asks about
(`relative_date_boost`), and the anchor's turn is part of the answer too. Pure parsing here;
`anchored_period` runs the anchor's search through the searcher it is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from .query_dates import query_period

__all__ = ["ANCHOR_MATCHES", "AnchoredPeriod", "RelativeTime", "anchored_period", "relative_time"]

_DAY_S = 86400.0
# the anchor phrase's best matches whose days place the period
ANCHOR_MATCHES = 3

# Chinese numerals a query uses for small counts ("两周后", "第三天", "半个月")
_ZH_DIGITS: dict[str, float] = {
    "一": 1,
    "两": 2,
    "二": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
}
_ZH_DIGITS |= {"九": 9, "十": 10, "半": 0.5}
# an anchor ending in one is a count the patterns did not read ("一个半月后")
_ZH_COUNTING = frozenset("一两二三四五六七八九十个几半")
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_EN_NUMBERS |= {"six": 6, "seven": 7, "a couple of": 2, "a few": 3}
_UNIT_DAYS = {"天": 1, "日": 1, "晚": 1, "周": 7, "星期": 7, "礼拜": 7, "月": 30}
_UNIT_DAYS |= {"day": 1, "night": 1, "evening": 1, "morning": 1, "week": 7, "month": 30}

_ZH_NUM = r"(?P<n>\d{1,2}|[一两二三四五六七八九十半])"
_ZH_UNIT = r"(?P<unit>天|日|晚|周|个?星期|个?礼拜|个?月)"
_EN_NUM = r"(?P<n>\d{1,2}|an?|one|two|three|four|five|six|seven|a couple of|a few)"
_EN_UNIT = r"(?P<unit>day|night|evening|morning|week|month)s?"
_STOP = r"[，,。.？?！!；;：:\n]"

# Chinese: the anchor comes first, the offset after it.
_ZH_PATTERNS = (
    # "回来的第二天", "搬家后第二天": the N-th day counting the anchor's as the first
    re.compile(rf"(?P<anchor>[^，,。？?！!；;]+?)(?:之|以)?后?的?第{_ZH_NUM}(?P<unit>天)"),
    # "全量上线的前一晚", "开始灰度的前一周", "上线后一周"
    re.compile(rf"(?P<anchor>[^，,。？?！!；;]+?)(?:之|以)?的?(?<!最)(?P<dir>前|后)一{_ZH_UNIT}"),
    # "换药大约两周后", "开题三天前"
    re.compile(
        rf"(?P<anchor>[^，,。？?！!；;]+?)(?:大约|大概|约)?{_ZH_NUM}{_ZH_UNIT}(?:之|以)?(?P<dir>后|前)"
    ),
)
# English: the offset first, the anchor after it.
_EN_PATTERNS = (
    re.compile(
        rf"\b{_EN_NUM}\s+{_EN_UNIT}\s+(?P<dir>after|before)\s+(?P<anchor>[^,.?!;:\n]+)",
        re.IGNORECASE,
    ),
    re.compile(
        rf"\b(?:the\s+)?{_EN_UNIT}\s+(?P<dir>after|before)\s+(?P<anchor>[^,.?!;:\n]+)",
        re.IGNORECASE,
    ),
)
# an anchor that is itself a day ("the day after tomorrow", "三月五号的前一天") is no event
_DATED = re.compile(
    r"(?:\d{1,2}|[一二三四五六七八九十]{1,3})\s*[月日号]|^(?:tomorrow|yesterday|today|tonight)\b",
    re.IGNORECASE,
)
# words that open the anchor phrase but say nothing of the event ("我从", "在")
_ZH_LEAD = re.compile(r"^(?:就是|在|从|等|到|于|自)+")


@dataclass(frozen=True, slots=True)
class RelativeTime:
    """The anchor phrase and the period relative to the anchor's day, in days:
    [start, end) after the start of that day (negative: before it)."""

    anchor: str
    start_days: float
    end_days: float


@dataclass(frozen=True, slots=True)
class AnchoredPeriod:
    """The periods placed from the days of the anchor's best matches: a phrase such as
    "the launch" is also said while it is planned, so no one match is taken for the event."""

    spans: tuple[tuple[float, float], ...]

    def holds(self, ts: float) -> bool:
        return any(start <= ts < end for start, end in self.spans)


def _count(text: str | None) -> float:
    if text is None:
        return 1.0
    text = text.lower()
    if text.isdigit():
        return float(text)
    return float(_ZH_DIGITS.get(text, _EN_NUMBERS.get(text, 1)))


def _unit_days(unit: str) -> int:
    return _UNIT_DAYS[unit.lower().removeprefix("个").rstrip("s")]


def _window(offset: float, unit_days: int, after: bool) -> tuple[float, float]:
    """A day's offset is that day; a week or more is the span it names ("the week before":
    the seven days before the anchor's), with slack for a count given roughly ("两周后")."""
    if unit_days == 1:
        day = offset if after else -offset
        return day, day + 1
    span = offset * unit_days
    if offset == 1:
        return (1.0, 1.0 + unit_days) if after else (-float(unit_days), 0.0)
    slack = unit_days / 2
    mid = span if after else -span
    return mid - slack, mid + slack + 1


def _anchor(text: str) -> str:
    text = _ZH_LEAD.sub("", re.split(_STOP, text)[-1].strip())
    return text.strip()


def relative_time(query: str) -> RelativeTime | None:
    """The period `query` places relative to another event, or None when it places none
    (or only relative to a date, which query_dates.py reads)."""
    if query_period(query) is not None:  # a dated query: its date says when
        return None
    for pattern in _ZH_PATTERNS:
        m = pattern.search(query)
        if m is None:
            continue
        groups = m.groupdict()
        anchor = _anchor(groups["anchor"])
        if len(anchor) < 2 or _DATED.search(anchor) or anchor[-1] in _ZH_COUNTING:
            continue
        unit = _unit_days(groups["unit"])
        if "dir" not in groups or groups["dir"] is None:  # "第N天": the anchor's is the first
            start = _count(groups.get("n")) - 1
            return RelativeTime(anchor, start, start + 1)
        start, end = _window(_count(groups.get("n")), unit, groups["dir"] == "后")
        return RelativeTime(anchor, start, end)
    for pattern in _EN_PATTERNS:
        m = pattern.search(query)
        if m is None:
            continue
        groups = m.groupdict()
        anchor = groups["anchor"].strip()
        if len(anchor) < 3 or _DATED.search(anchor):
            continue
        start, end = _window(
            _count(groups.get("n")), _unit_days(groups["unit"]), groups["dir"].lower() == "after"
        )
        return RelativeTime(anchor, start, end)
    return None


class _Ranker(Protocol):
    def __call__(self, text: str) -> list[str]: ...


class _Times(Protocol):
    def __call__(self, item_ids: list[str]) -> dict[str, float]: ...


def anchored_period(
    query: str, rank: _Ranker, times: _Times, anchors: int = ANCHOR_MATCHES
) -> AnchoredPeriod | None:
    """The periods of `relative_time(query)` placed on the days of the anchor's best
    `anchors` matches: `rank(anchor)` gives the item ids matching the anchor phrase, best
    first, and `times(ids)` the times they were recorded."""
    rel = relative_time(query)
    if rel is None:
        return None
    found = rank(rel.anchor)[:anchors]
    days = sorted({ts - ts % _DAY_S for ts in times(found).values()})  # UTC days
    if not days:
        return None
    return AnchoredPeriod(
        tuple((d + rel.start_days * _DAY_S, d + rel.end_days * _DAY_S) for d in days)
    )

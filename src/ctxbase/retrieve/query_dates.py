"""The period a query names ("in May 2023", "on 9 November, 2022", "2023年5月"), as timestamps.

Events carry the time they were recorded, so a query that names when something happened is
also a query for the events recorded then. Several dates in one query ("between August 11
and August 15 2023") make one period from the first to the last. Dates are taken as UTC days.

A month or day named without a year ("九月那次", "6月7日", "in September", "on June 7") is
read apart (`yearless_dates`): it could be that month of any year, so it holds for events
recorded in that month (or on that day) of whichever year; a memory rarely spans years,
and where it does each year's match is as plausible as the other's.
"""

from __future__ import annotations

import re
from calendar import monthrange
from datetime import UTC, datetime, timedelta

__all__ = [
    "REPORT_LAG_S",
    "ZONE_SLACK_S",
    "in_period",
    "in_yearless",
    "names_yearless",
    "query_period",
    "yearless_dates",
]

# Events are often told some days after they happened ("last week"): the events recorded
# this long after a period still count as in it.
REPORT_LAG_S = 7 * 86400.0
# Dates are read in UTC and recorded in the agent's own time: a day of slack before a period.
ZONE_SLACK_S = 86400.0

_MONTHS = {
    name: n
    for n, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# "9 November, 2022", "November 9, 2022", "November 2022", "August 11 and August 15 2023"
# (a day without its own year takes the year that follows), "2023年5月3日", bare "2023".
_PATTERNS = (
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}(?:,\s*|\s+){_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY}(?:,\s*|\s+){_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}(?:,\s*|\s+){_YEAR}\b", re.IGNORECASE),
    re.compile(rf"{_YEAR}\s*年\s*(?P<month>1[0-2]|0?[1-9])\s*月(?:\s*{_DAY}\s*[日号])?"),
    re.compile(rf"{_YEAR}\s*年"),
    re.compile(rf"(?<![\d:/.-]){_YEAR}(?![\d:/.-])"),
)
# a day named without a year right before a dated one: "between August 11 and August 15 2023"
_BARE_DAY = re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?!,?\s+(?:19|20)\d\d)", re.IGNORECASE)


def _span(year: int, month: int | None, day: int | None) -> tuple[datetime, datetime] | None:
    try:
        if month is None:
            return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
        if day is None:
            last = monthrange(year, month)[1]
            start = datetime(year, month, 1, tzinfo=UTC)
            return start, start + timedelta(days=last)
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:  # "31 February": no such day
        return None
    return start, start + timedelta(days=1)


def _month(text: str | None) -> int | None:
    if text is None:
        return None
    return int(text) if text.isdigit() else _MONTHS.get(text.lower().rstrip("."))


def query_period(query: str) -> tuple[float, float] | None:
    """The [start, end) timestamps of the period `query` names, or None when it names no
    date with a year."""
    spans: list[tuple[datetime, datetime]] = []
    taken: list[tuple[int, int]] = []
    for pattern in _PATTERNS:
        for m in pattern.finditer(query):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue  # part of a more precise date found first
            groups = m.groupdict()
            day = groups.get("day")
            span = _span(
                int(groups["year"]), _month(groups.get("month")), int(day) if day else None
            )
            if span is not None:
                spans.append(span)
                taken.append((m.start(), m.end()))
    if not spans:
        return None
    year = min(spans)[0].year
    for m in _BARE_DAY.finditer(query):
        if any(m.start() < end and start < m.end() for start, end in taken):
            continue
        span = _span(year, _month(m.group("month")), int(m.group("day")))
        if span is not None:
            spans.append(span)
    return min(s for s, _ in spans).timestamp(), max(e for _, e in spans).timestamp()


def in_period(ts: float, period: tuple[float, float]) -> bool:
    """Whether an event recorded at `ts` may tell of the period: recorded in it (a day of
    slack for time zones) or up to REPORT_LAG_S after it."""
    start, end = period
    return start - ZONE_SLACK_S <= ts < end + REPORT_LAG_S


_ZH_NUMERALS = {c: n for n, c in enumerate("一二三四五六七八九", start=1)}
_ZH_NUMBER = r"(?:[1-3]?\d|[一二三]?十[一二三四五六七八九]?|[一二三四五六七八九])"
# "九月", "11月", "十一月份", "6月7日", "六月七号"; not "两个月" (no 个 between), "几月",
# "每月"/"上个月" (no numeral), nor a month right after a year (read by query_period)
_ZH_MONTH_DAY = re.compile(
    rf"(?<![\d年一二三四五六七八九十个几])(?P<month>{_ZH_NUMBER})\s*月份?"
    rf"(?:\s*(?P<day>{_ZH_NUMBER})\s*[日号])?"
)
# English needs a lead word: "may" alone is a verb ("in May", "on June 7", "last September")
_EN_MONTH_DAY = re.compile(
    rf"\b(?:in|on|during|since|by|until|till|last|this|early|mid|late|of|around)\s+"
    rf"(?:the\s+)?{_MONTH}\b(?:\s+{_DAY}\b)?(?!,?\s*(?:19|20)\d\d)",
    re.IGNORECASE,
)

# a month (and day) anywhere in a turn's text, a year before it or not
_ZH_ANY_MONTH_DAY = re.compile(
    rf"(?<![\d一二三四五六七八九十个几])(?P<month>{_ZH_NUMBER})\s*月份?"
    rf"(?:\s*(?P<day>{_ZH_NUMBER})\s*[日号])?"
)
# in English a month with its day ("June 7"); a month alone only after a lead word, as in
# a query (_EN_MONTH_DAY): "may" alone is a verb
_EN_DAY_OF_MONTH = re.compile(rf"\b{_MONTH}\b\s+{_DAY}\b", re.IGNORECASE)


def _zh_number(text: str) -> int | None:
    """A number from 1 to 39 in digits or Chinese numerals ("7", "十一", "二十三")."""
    if text.isdigit():
        return int(text)
    if "十" not in text:
        return _ZH_NUMERALS.get(text)
    tens, _, ones = text.partition("十")
    return (_ZH_NUMERALS.get(tens, 0) if tens else 1) * 10 + (_ZH_NUMERALS.get(ones, 0))


def yearless_dates(query: str) -> list[tuple[int, int | None]]:
    """The (month, day or None) the query names without a year, when it names no dated
    period (`query_period`); [] otherwise."""
    if query_period(query) is not None:
        return []
    found: list[tuple[int, int | None]] = []
    for m in _ZH_MONTH_DAY.finditer(query):
        month = _zh_number(m.group("month"))
        day = _zh_number(m.group("day")) if m.group("day") else None
        if month is not None and 1 <= month <= 12 and (day is None or 1 <= day <= 31):
            found.append((month, day))
    for m in _EN_MONTH_DAY.finditer(query):
        month = _month(m.group("month"))
        day = int(m.group("day")) if m.group("day") else None
        if month is not None and (day is None or 1 <= day <= 31):
            found.append((month, day))
    return list(dict.fromkeys(found))


def names_yearless(text: str, dates: list[tuple[int, int | None]]) -> bool:
    """Whether `text` names one of `dates` itself ("改到10月18日" names October), with or
    without a year."""
    named: set[tuple[int, int | None]] = set()
    for m in _ZH_ANY_MONTH_DAY.finditer(text):
        month = _zh_number(m.group("month"))
        day = _zh_number(m.group("day")) if m.group("day") else None
        named |= {(month or 0, None), (month or 0, day)}
    for pattern in (_EN_DAY_OF_MONTH, _EN_MONTH_DAY):
        for m in pattern.finditer(text):
            month = _month(m.group("month")) or 0
            day = int(m.group("day")) if m.group("day") else None
            named |= {(month, None), (month, day)}
    return any(d in named for d in dates)


def in_yearless(ts: float, dates: list[tuple[int, int | None]]) -> bool:
    """Whether an event recorded at `ts` may tell of one of `dates` (a month or a day of any
    year): recorded in it, a day of slack before, or up to REPORT_LAG_S after."""
    first = datetime.fromtimestamp(ts - REPORT_LAG_S, UTC)
    for n in range(int(REPORT_LAG_S // 86400) + 2):  # each day from a lag before to a day after
        when = first + timedelta(days=n)
        if any(when.month == month and day in (None, when.day) for month, day in dates):
            return True
    return False

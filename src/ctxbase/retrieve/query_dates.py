"""The period a query names ("in May 2023", "on 9 November, 2022", "2023年5月"), as timestamps.

Events carry the time they were recorded, so a query that names when something happened is
also a query for the events recorded then. Only periods with a year are read: "in May" alone
could be any May. Several dates in one query ("between August 11 and August 15 2023") make
one period from the first to the last. Dates are taken as UTC days.
"""

from __future__ import annotations

import re
from calendar import monthrange
from datetime import UTC, datetime, timedelta

__all__ = ["REPORT_LAG_S", "in_period", "query_period"]

# Events are often told some days after they happened ("last week"): the events recorded
# this long after a period still count as in it.
REPORT_LAG_S = 7 * 86400.0

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
    return start - 86400.0 <= ts < end + REPORT_LAG_S

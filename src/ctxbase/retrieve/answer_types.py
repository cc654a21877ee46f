"""Questions that ask for a number (an amount or a date), and turns that state one.

"单车教室一节课最多容纳多少人？" or "How much faster did the pipeline get?" is answered by a turn
that states an amount ("单车教室固定30个车位"), while the turns around it that discuss the same
thing without one ("容量本来就按教室配置") share the question's words as much. On the project's
Chinese memory set 94 % of the evidence of such questions states a number, against 73 % of
the other turns ranked near the top. Search favours the turns that state a number for a
question that asks for one (`SearchConfig.number_boost`).

A question asking when ("哪天", "什么时候", "when") is answered by a turn that says a day or a
time ("6月7日在田林社区打的", "I went there yesterday"), and any number says little there: on
the Chinese multi-session set (36 questions asking only when) 91 % of their evidence states a
number, and so do 83 % of the other turns ranked in their top 10; 90 % of the evidence says a
day or a time, against 46 % of those turns (English and `zh_memory`, 15 questions: 75 %
against 33 %). A question asking only when (not how much as well) favours the turns that say
a day or a time instead (`states_date`). Pure functions over text.
"""

from __future__ import annotations

import re

__all__ = ["asks_for_amount", "asks_for_date", "asks_for_number", "states_date", "states_number"]

# A measure word after a Chinese numeral or 几 ("几个", "三天", "两倍").
_MEASURE = "个天次人倍年月号日点分钟小时周岁位家种项条台张支公里米元块桌句字份篇页条期场轮"
# an amount, a count or a duration, not a date ("几天" is how long, "几号" which day)
_ASKS_AMOUNT = re.compile(
    rf"多少|几(?![号月点])[{_MEASURE}]|多久|多长|多大|多高|多远|多重|多快|百分之几|什么比例|"
    r"\bhow (?:many|much|long|far|old|often|big|fast)\b|\bwhat (?:percentage|share|number)\b",
    re.IGNORECASE,
)
_ASKS_DATE = re.compile(
    r"哪天|哪一天|什么时候|几号|何时|哪个月|哪一年|几月|几点|什么时间"
    r"|\bwhen\b|\bwhat (?:date|day|time|month|year)\b",
    re.IGNORECASE,
)
_WEEKDAY = r"(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day"
_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November"
    r"|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)"
)
# A day or a time: a calendar date, a weekday, a day named relative to the day said, a
# clock time in digits ("两点" is as often "two points"). English month names are matched
# capitalised ("May", not "may").
_STATES_DATE = re.compile(
    r"[0-9０-９一二三四五六七八九十]{1,3}\s*(?:月|[日号](?![本元子常楼线码位]))|[0-9０-９]{1,2}\s*点(?![儿几])"
    r"|\d{4}\s*年|(?:周|星期|礼拜)[一二三四五六日天末]"
    r"|昨天|今天|明天|前天|后天|昨晚|今晚|今早|明早|上周|下周|本周|这周|上个月|下个月|月底|月初|月中"
    r"|\d{1,2}[:：]\d{2}|\d{4}-\d{1,2}-\d{1,2}|\b\d{1,2}/\d{1,2}\b"
    r"|(?i:\b(?:yesterday|today|tonight|tomorrow|\d{1,2}\s*[ap]\.?m\b"
    r"|(?:last|next|this) (?:week|weekend|month|year)|\d{1,2}(?:st|nd|rd|th)\b)"
    rf"|\b{_WEEKDAY}s?\b)|\b{_MONTH}\b"
)
_STATES = re.compile(rf"\d|[一二三四五六七八九十两半百千万][{_MEASURE}]")


def asks_for_number(query: str) -> bool:
    """Whether `query` asks for an amount, a count, a duration, a size or a date
    ("多少", "几天", "多久", "哪天", "how many", "how long", "when")."""
    return asks_for_amount(query) or asks_for_date(query)


def asks_for_amount(query: str) -> bool:
    """Whether `query` asks for an amount, a count, a duration or a size, not only a date
    ("多少", "几天", "多久", "how much", "how long")."""
    return _ASKS_AMOUNT.search(query) is not None


def asks_for_date(query: str) -> bool:
    """Whether `query` asks when: a day, a month, a year or a time ("哪天", "什么时候",
    "几点", "when", "what date")."""
    return _ASKS_DATE.search(query) is not None


def states_date(text: str) -> bool:
    """Whether `text` says a day or a time: a date ("6月7日", "7号", "2023-05-01", "May"),
    a weekday ("周六", "on Saturday"), a day relative to the one it was said on ("昨天",
    "last week"), a clock time ("9点", "10:30", "7 pm")."""
    return _STATES_DATE.search(text) is not None


def states_number(text: str) -> bool:
    """Whether `text` states a number: digits (any script's, full-width too) or a Chinese
    numeral with a measure word ("三天", "两倍")."""
    return _STATES.search(text) is not None

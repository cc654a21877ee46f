"""Fact extraction: turn what the user says into state facts (key -> structured value).

The state layer is the single source of truth for confirmed facts ("budget <= 50000 CNY");
messages are only evidence. `RuleFactExtractor` works offline with rules for Chinese and
English: budgets (万/千/k/m units, ranges, currencies), deadlines (ISO dates, 明天, 下周五之前,
3天内, by Friday, within 3 days), follow-up questions ("那时间呢" asks about the deadline, not
about the budget just stated), preferences with polarity, names, technology choices and
locations. `LLMFactExtractor` asks any OpenAI-compatible chat endpoint for the same facts as
JSON and validates the answer. Both satisfy the `FactExtractor` protocol.

Keys: "budget", "deadline", "followup", "user_name", "location", "tech.<category>"
(e.g. "tech.database"), "preference:<item>" (one key per item, so "不要蓝色" replaces
"喜欢蓝色").
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Protocol, TypeAlias

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from ..errors import CtxbaseError

__all__ = [
    "ExtractedFact",
    "FactExtractionError",
    "FactExtractor",
    "JsonValue",
    "LLMFactExtractor",
    "RuleFactExtractor",
    "asks_to_remember",
    "extract_facts",
    "parse_llm_facts",
]

JsonValue: TypeAlias = str | int | float | bool | list["JsonValue"] | dict[str, "JsonValue"] | None


@dataclass(frozen=True)
class ExtractedFact:
    """One fact found in a message; `span` is the [start, end) of its evidence in the text."""

    key: str
    value: dict[str, JsonValue]
    confidence: float
    span: tuple[int, int]
    rule: str


class FactExtractor(Protocol):
    def extract(
        self,
        text: str,
        *,
        previous: Sequence[ExtractedFact] = (),
        today: date | None = None,
    ) -> list[ExtractedFact]: ...


class FactExtractionError(CtxbaseError):
    """The extraction service failed or answered something that is not a list of facts."""

    code = "fact_extraction"


# ---------------------------------------------------------------- numbers and money

_CN_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7}
_CN_DIGITS |= {"八": 8, "九": 9}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_EN_NUMBERS |= {"seven": 7, "eight": 8, "nine": 9, "ten": 10}


def _parse_number(raw: str) -> float | None:
    raw = raw.replace(",", "").strip()
    if not raw:
        return None
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        return float(raw)
    if raw.casefold() in _EN_NUMBERS:
        return float(_EN_NUMBERS[raw.casefold()])
    total, number = 0, 0
    for char in raw:
        if char in _CN_DIGITS:
            number = _CN_DIGITS[char]
        elif char in _CN_UNITS:
            total += (number or 1) * _CN_UNITS[char]
            number = 0
        else:
            return None
    return float(total + number)


_AMOUNT = r"\d+(?:,\d{3})*(?:\.\d+)?|[零一二两三四五六七八九十百千]+"
_UNIT = r"百万|千万|万|亿|千|(?i:million|thousand|billion|bn|k|m|w)(?![a-z])"
_UNIT_VALUES = {"百万": 1e6, "千万": 1e7, "万": 1e4, "亿": 1e8, "千": 1e3, "million": 1e6}
_UNIT_VALUES |= {"thousand": 1e3, "billion": 1e9, "bn": 1e9, "k": 1e3, "m": 1e6, "w": 1e4}
_CUR_PRE = r"[$¥￥€£]|(?i:rmb|usd|cny|eur)(?![a-z])"
_CUR_POST = (
    r"块钱|元|块|人民币|美元|美金|欧元|英镑|(?i:rmb|cny|usd|dollars?|bucks|eur|euros?)(?![a-z])"
)
_CURRENCIES = {"$": "USD", "¥": "CNY", "￥": "CNY", "€": "EUR", "£": "GBP", "rmb": "CNY"}
_CURRENCIES |= {"usd": "USD", "cny": "CNY", "eur": "EUR", "块钱": "CNY", "元": "CNY", "块": "CNY"}
_CURRENCIES |= {"人民币": "CNY", "美元": "USD", "美金": "USD", "欧元": "EUR", "英镑": "GBP"}
_CURRENCIES |= {"dollar": "USD", "dollars": "USD", "bucks": "USD", "euro": "EUR", "euros": "EUR"}

_MONEY = re.compile(
    rf"(?P<pre>{_CUR_PRE})?\s*(?P<n1>{_AMOUNT})\s*(?P<u1>{_UNIT})?"
    rf"(?:\s*(?:到|至|-|–|~|～|(?i:to))\s*(?P<pre2>{_CUR_PRE})?\s*(?P<n2>{_AMOUNT})\s*(?P<u2>{_UNIT})?)?"
    rf"\s*(?P<post>{_CUR_POST})?"
)
_BUDGET_WORDS = re.compile(
    r"预算|经费|费用|成本|花费|开销|价位|(?i:\b(?:budget|spend|spending|cost|costs|price)\b)"
)
_LE_WORDS = re.compile(
    r"以内|以下|之内|内|不超过|不要超过|别超过|不能超过|不高于|最多|至多|控制在|封顶|上限|"
    r"(?i:\b(?:under|below|less than|at most|up to|within|no more than|max(?:imum)?|cap(?:ped)?)\b)"
)
_GE_WORDS = re.compile(
    r"以上|至少|不低于|不少于|起码|(?i:\b(?:at least|over|more than|above|minimum|min)\b)"
)
_APPROX_WORDS = re.compile(
    r"左右|大概|大约|约|差不多|上下|(?i:\b(?:around|about|roughly|approximately)\b)"
)
_BOUND_SUFFIX = re.compile(r"\s*(?:以内|以下|之内|内|左右|以上|上下)")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_SENTENCE_BREAK = re.compile(r"[。！？!?\n；;]|\.\s")


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(value, 4)


def _money_amounts(match: re.Match[str]) -> tuple[float, float | None] | None:
    first = _parse_number(match.group("n1"))
    second = _parse_number(match.group("n2")) if match.group("n2") else None
    if first is None:
        return None
    unit1, unit2 = match.group("u1"), match.group("u2")
    if unit1 is None and unit2 is not None:
        unit1 = unit2  # "3到5万": the unit of the second number applies to both
    first *= _UNIT_VALUES.get((unit1 or "").casefold(), 1.0)
    if second is not None:
        second *= _UNIT_VALUES.get((unit2 or "").casefold(), 1.0)
    return first, second


def _currency(match: re.Match[str], text: str) -> str | None:
    for group in ("pre", "pre2", "post"):
        token = match.group(group)
        if token:
            return _CURRENCIES.get(token.casefold(), _CURRENCIES.get(token))
    return "CNY" if _CJK.search(text) else None


def _bare_numeral(money: re.Match[str]) -> bool:
    """Chinese numerals alone, with no unit and no currency ("一下", "三个", "十分"): words
    more often than money. "两万", "三千块" and digits ("预算5000") are amounts."""
    units = money.group("u1") or money.group("u2")
    currency = money.group("pre") or money.group("pre2") or money.group("post")
    return not (units or currency) and not re.search(r"\d", money.group("n1"))


def _budget_facts(text: str) -> list[ExtractedFact]:
    facts: list[ExtractedFact] = []
    for money in _MONEY.finditer(text):
        if not money.group("n1") or not re.search(r"\S", money.group(0)):
            continue
        if _bare_numeral(money):
            continue  # "改一下，预算…": a lone 一 is a word, not an amount
        start, end = money.span()
        end = start + len(money.group(0).rstrip())
        # The keyword must be in the same sentence, shortly before or just after the amount.
        before = text[max(0, start - 24) : start]
        after = text[end : end + 8]
        keyword_before = list(_BUDGET_WORDS.finditer(before))
        keyword_after = _BUDGET_WORDS.search(after)
        has_currency = bool(money.group("pre") or money.group("post") or money.group("pre2"))
        if keyword_before:
            gap = before[keyword_before[-1].end() :]
            if _SENTENCE_BREAK.search(gap):
                keyword_before = []
        if (
            not keyword_before
            and keyword_after
            and _SENTENCE_BREAK.search(after[: keyword_after.start()])
        ):
            keyword_after = None
        prefix = before[keyword_before[-1].end() :] if keyword_before else before[-8:]
        suffix = text[end : end + 6]
        bounded = bool(_LE_WORDS.search(prefix + suffix) or _GE_WORDS.search(prefix + suffix))
        if not (keyword_before or keyword_after or (has_currency and bounded)):
            continue
        amounts = _money_amounts(money)
        if amounts is None:
            continue
        low, high = amounts
        currency = _currency(money, text)
        value: dict[str, JsonValue]
        if high is not None:
            value = {"op": "between", "min": _number(low), "max": _number(high)}
        else:
            if _APPROX_WORDS.search(prefix) or _APPROX_WORDS.search(suffix[:3]):
                op = "~"
            elif _LE_WORDS.search(prefix) or _LE_WORDS.search(suffix[:3]):
                op = "<="
            elif _GE_WORDS.search(prefix) or _GE_WORDS.search(suffix[:3]):
                op = ">="
            else:
                op = "="
            value = {"op": op, "amount": _number(low)}
        value["currency"] = currency
        span_start = start - len(before) + keyword_before[-1].start() if keyword_before else start
        amount_end = end
        bound_word = _BOUND_SUFFIX.match(text, end)
        if bound_word:
            end = bound_word.end()
        if not keyword_before and keyword_after:
            end = max(end, amount_end + keyword_after.end())
        confidence = 0.9 if (keyword_before or keyword_after) else 0.6
        rule = "budget.keyword" if confidence > 0.6 else "budget.bounded_amount"
        facts.append(ExtractedFact("budget", value, confidence, (span_start, end), rule))
    return facts


# ---------------------------------------------------------------- dates and deadlines

_WEEKDAY_CN = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_WEEKDAY_EN = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4}
_WEEKDAY_EN |= {"saturday": 5, "sunday": 6}
_MONTHS_EN = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CN_NUM = r"\d+|[一二两三四五六七八九十]+"
_EN_NUM = r"\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten"

_DATE = re.compile(
    r"(?P<iso>\d{4})[-/](?P<iso_m>\d{1,2})[-/](?P<iso_d>\d{1,2})"
    r"|(?:(?P<cn_y>\d{4})年)?(?P<cn_m>\d{1,2})月(?P<cn_d>\d{1,2})[日号]"
    r"|(?P<rel>大后天|后天|明天|明晚|今天|今晚)"
    r"|(?P<wk_pre>下下|下个|下|本|这个|这)?(?:周|星期|礼拜)(?P<wk>[一二三四五六日天])"
    rf"|(?P<span_n>{_CN_NUM})\s*个?(?P<span_u>天|日|周|星期|月|小时)(?P<span_k>之内|以内|内|之后|后)"
    r"|(?P<end_pre>下个|下|本|这个|这)?(?P<end>月底|月末|周末|年底|年末)"
    r"|(?i:(?P<en_rel>today|tonight|tomorrow)"
    r"|(?:(?P<en_wk_pre>next|this)\s+)?(?P<en_wk>monday|tuesday|wednesday|thursday|friday"
    r"|saturday|sunday)"
    rf"|(?P<en_span_k>within|in)\s+(?P<en_span_n>{_EN_NUM})\s+(?P<en_span_u>day|week|month|hour)s?"
    r"|end\s+of\s+(?:the\s+|this\s+)?(?P<en_end_next>next\s+)?(?P<en_end>week|month|year)"
    r"|(?P<en_mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+"
    r"(?P<en_day>\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(?P<en_year>\d{4}))?)\b"
)
_CN_CUE_AFTER = re.compile(
    r"^\s*(?:之前|以前|前|截止|为止|内|之内|以内|完成|上线|交付|交|搞定|到期|要)"
)
# "截止日期是月底", "期限定在下周三": the cue word, then an optional noun and verb.
_CN_CUE_BEFORE = re.compile(
    r"(?:截止|截至|最晚|最迟|不晚于|期限|deadline|ddl|due|在|到)"
    r"(?:日期|时间|日)?\s*(?:是|为|定在|定为|改到|改成|:|：)?\s*$",
    re.I,
)
_EN_CUE_BEFORE = re.compile(
    r"\b(?:by|before|until|due|deadline|no later than|ship|launch|deliver|finish|complete|done"
    r"|ready|submit)\b[\w\s:]{0,12}$",
    re.IGNORECASE,
)
# "记一下…", "记住…", "remember that…": the user asks for this to be kept (seed 003's
# important messages, kept in summaries when the history is compressed).
_REMEMBER = re.compile(
    r"^\s*(?:请|帮我)?(?:记一下|记下|记住|记得|备注一下|备忘)|(?i:\b(?:remember|note)\s+that\b)"
)


def _add_months(day: date, months: int) -> date:
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _end_of(day: date, period: str, ahead: bool) -> date:
    if period in ("周末", "week"):
        base = day + timedelta(weeks=1) if ahead else day
        return base + timedelta(days=6 - base.weekday())
    if period in ("年底", "年末", "year"):
        return date(day.year + int(ahead), 12, 31)
    base = _add_months(day, 1) if ahead else day
    return base.replace(day=calendar.monthrange(base.year, base.month)[1])


def _weekday_date(today: date, weekday: int, prefix: str) -> date:
    monday = today - timedelta(days=today.weekday())
    weeks = {"下下": 2, "下": 1, "下个": 1, "next": 1}.get(prefix, 0)
    target = monday + timedelta(weeks=weeks, days=weekday)
    if not prefix and target < today:
        target += timedelta(weeks=1)  # a bare "周五" / "Friday" means the coming one
    return target


def _span_date(today: date, amount: float, unit: str) -> date:
    n = int(amount)
    if unit in ("天", "日", "day"):
        return today + timedelta(days=n)
    if unit in ("周", "星期", "week"):
        return today + timedelta(weeks=n)
    if unit in ("月", "month"):
        return _add_months(today, n)
    return today  # hours: still today


def _resolve(match: re.Match[str], today: date) -> date | None:
    g = match.groupdict()
    try:
        if g["iso"]:
            return date(int(g["iso"]), int(g["iso_m"]), int(g["iso_d"]))
        if g["cn_m"]:
            return date(int(g["cn_y"] or today.year), int(g["cn_m"]), int(g["cn_d"]))
        if g["en_mon"]:
            month = _MONTHS_EN.index(g["en_mon"].casefold()) + 1
            return date(int(g["en_year"] or today.year), month, int(g["en_day"]))
    except ValueError:
        return None
    if g["rel"] or g["en_rel"]:
        word = (g["rel"] or g["en_rel"]).casefold()
        offset = {"今天": 0, "今晚": 0, "today": 0, "tonight": 0, "明天": 1, "明晚": 1}
        offset |= {"tomorrow": 1, "后天": 2, "大后天": 3}
        return today + timedelta(days=offset[word])
    if g["wk"]:
        return _weekday_date(today, _WEEKDAY_CN[g["wk"]], g["wk_pre"] or "")
    if g["en_wk"]:
        prefix = (g["en_wk_pre"] or "").casefold()
        return _weekday_date(today, _WEEKDAY_EN[g["en_wk"].casefold()], prefix)
    if g["span_n"] or g["en_span_n"]:
        amount = _parse_number(g["span_n"] or g["en_span_n"])
        unit = g["span_u"] or g["en_span_u"].casefold()
        return None if amount is None else _span_date(today, amount, unit)
    if g["end"]:
        return _end_of(today, g["end"], (g["end_pre"] or "").startswith("下"))
    if g["en_end"]:
        return _end_of(today, g["en_end"].casefold(), bool(g["en_end_next"]))
    return None


def _deadline_facts(text: str, today: date | None) -> list[ExtractedFact]:
    facts: list[ExtractedFact] = []
    for match in _DATE.finditer(text):
        start, end = match.span()
        g = match.groupdict()
        is_span = bool(g["span_n"] or g["en_span_n"])
        after = _CN_CUE_AFTER.match(text[end : end + 6])
        cue = is_span or after or _CN_CUE_BEFORE.search(text[max(0, start - 10) : start])
        cue = cue or _EN_CUE_BEFORE.search(text[max(0, start - 30) : start])
        if not cue:
            continue
        later = g["span_k"] in ("后", "之后") or (g["en_span_k"] or "").casefold() == "in"
        op = "=" if later or (after and after.group(0).strip() == "要") else "<="
        value: dict[str, JsonValue] = {"op": op, "expression": match.group(0)}
        resolved = _resolve(match, today) if today is not None else None
        value["date"] = resolved.isoformat() if resolved else None
        span_end = end + (after.end() if after else 0)
        confidence = 0.85 if resolved or g["iso"] else 0.75
        facts.append(ExtractedFact("deadline", value, confidence, (start, span_end), "deadline"))
    return facts


# ---------------------------------------------------------------- follow-up questions

_TOPICS = {
    "时间": "deadline",
    "工期": "deadline",
    "截止时间": "deadline",
    "截止日期": "deadline",
    "期限": "deadline",
    "日期": "deadline",
    "time": "deadline",
    "timeline": "deadline",
    "deadline": "deadline",
    "schedule": "deadline",
    "due date": "deadline",
    "预算": "budget",
    "费用": "budget",
    "价格": "budget",
    "成本": "budget",
    "budget": "budget",
    "cost": "budget",
    "price": "budget",
    "地点": "location",
    "位置": "location",
    "location": "location",
    "place": "location",
}
_TOPIC_ALT = "|".join(sorted(map(re.escape, _TOPICS), key=len, reverse=True))
_FOLLOWUP_CN = re.compile(
    rf"^\s*(?:(?:那|那么|那个|还有|然后)\s*(?P<t1>{_TOPIC_ALT})\s*(?:呢|怎么样|怎么说|如何|是多少|多少)?"
    rf"|(?P<t2>{_TOPIC_ALT})\s*呢)\s*[？?。.]?\s*$"
)
_FOLLOWUP_EN = re.compile(
    rf"^\s*(?:and|so|what about|how about|and what about)\s+(?:the\s+)?(?P<t1>{_TOPIC_ALT})"
    r"\s*[?.]?\s*$",
    re.IGNORECASE,
)


def _followup_facts(text: str, previous: Sequence[ExtractedFact]) -> list[ExtractedFact]:
    match = _FOLLOWUP_CN.match(text) or _FOLLOWUP_EN.match(text)
    if match is None:
        return []
    word = (match.group("t1") or match.groupdict().get("t2") or "").casefold()
    topic = _TOPICS[word]
    previous_keys = [f.key for f in previous if f.key != "followup"]
    # The question continues the previous topic's context; it is not a statement about it.
    prior = next((k for k in reversed(previous_keys) if k != topic), None)
    value: dict[str, JsonValue] = {
        "topic": topic,
        "question": True,
        "known": topic in previous_keys,
        "previous_topic": prior,
    }
    span = (match.start(), len(text.rstrip()))
    return [ExtractedFact("followup", value, 0.7, span, "followup.topic")]


# ---------------------------------------------------------------- names and places

_NAME_CN = re.compile(
    r"(?:我叫|我的名字(?:是|叫)|本人(?:叫|名叫)|叫我|我姓名是)\s*"
    r"(?P<name>[\u4e00-\u9fff]{2,4}?|[A-Z][a-zA-Z]+(?:\s[A-Z][a-zA-Z]+)?)"
    r"(?=$|[，。,.!！?？\s、]|吧|就行|就好|好了|就可以)"
)
_NAME_EN = re.compile(
    r"(?i:\b(?:my name is|my name's|call me|i am called|i'm called|you can call me))\s+"
    r"(?P<name>[A-Z][a-zA-Z'-]+(?:\s+[A-Z][a-zA-Z'-]+){0,2})"
)
_NOT_NAME_START = frozenset("了过着他她你它人车醒")
_NOT_NAMES = frozenset({"外卖", "出租", "快递", "师傅", "服务员"})

_PLACES_CN_TEXT = (
    "北京 上海 广州 深圳 杭州 成都 武汉 南京 西安 重庆 天津 苏州 长沙 郑州 青岛 厦门 "
    "合肥 济南 大连 沈阳 哈尔滨 昆明 福州 宁波 无锡 东莞 佛山 香港 澳门 台北 新加坡 "
    "东京 首尔 纽约 伦敦 巴黎 柏林 硅谷 旧金山 洛杉矶 悉尼 多伦多"
)
_PLACES_CN = tuple(_PLACES_CN_TEXT.split())
_PLACE_SUFFIXES = ("市", "省", "区", "县", "州", "镇", "自治区")
_LOCATION_CN = re.compile(
    r"(?:我|我们|本人|公司|团队)(?:现在|目前|平时|一直)?(?:住在|在|位于|来自|坐标|人在|base在)"
    r"(?P<place>[\u4e00-\u9fff]{2,8}?)(?=工作|上班|生活|读书|上学|出差|这边|那边|的|$|[，。,.！!？?\s])"
)
_LOCATION_EN = re.compile(
    r"(?i:\b(?:i live in|i'm based in|i am based in|we are based in|we're based in|"
    r"i'm located in|we're located in|located in|i'm from|i am from|i'm in|i am in|i live near))"
    r"\s+(?P<place>[A-Z][a-zA-Z.-]+(?:\s+[A-Z][a-zA-Z.-]+){0,2})"
)


def _name_facts(text: str) -> list[ExtractedFact]:
    facts: list[ExtractedFact] = []
    for pattern in (_NAME_CN, _NAME_EN):
        for match in pattern.finditer(text):
            name = match.group("name").strip()
            if name[0] in _NOT_NAME_START or name in _NOT_NAMES:
                continue
            value: dict[str, JsonValue] = {"name": name}
            facts.append(ExtractedFact("user_name", value, 0.9, match.span(), "name"))
    return facts


def _location_facts(text: str) -> list[ExtractedFact]:
    facts: list[ExtractedFact] = []
    for match in _LOCATION_CN.finditer(text):
        place = match.group("place")
        known = any(place.startswith(p) for p in _PLACES_CN)
        if not known and not place.endswith(_PLACE_SUFFIXES):
            continue
        value: dict[str, JsonValue] = {"place": place}
        facts.append(ExtractedFact("location", value, 0.8, match.span(), "location.cn"))
    for match in _LOCATION_EN.finditer(text):
        place = match.group("place")
        if place.casefold() in _TECH:
            continue
        value = {"place": place}
        facts.append(ExtractedFact("location", value, 0.75, match.span(), "location.en"))
    return facts


# ---------------------------------------------------------------- technology choices

_TECH_TABLE = {
    "database": "PostgreSQL Postgres MySQL SQLite MongoDB MariaDB Oracle ClickHouse TiDB "
    "Cassandra DynamoDB SQLServer Neo4j NebulaGraph Milvus",
    "cache": "Redis Memcached",
    "search": "Elasticsearch OpenSearch Meilisearch",
    "language": "Python Golang Go Java Rust TypeScript JavaScript Kotlin Swift Ruby PHP C++ C#",
    "framework": "FastAPI Django Flask Spring React Vue Angular Next.js Express Rails Gin",
    "queue": "Kafka RabbitMQ NATS Pulsar",
    "infra": "Docker Kubernetes K8s Terraform",
    "cloud": "AWS GCP Azure 阿里云 腾讯云 华为云",
}
_TECH: dict[str, tuple[str, str]] = {
    name.casefold(): (name, category)
    for category, names in _TECH_TABLE.items()
    for name in names.split()
}
_TECH_ALT = "|".join(re.escape(n) for n in sorted(_TECH, key=len, reverse=True))
_TECH_CHOICE = re.compile(
    r"(?:用|使用|采用|选用|改用|换成|换用|基于|(?i:\b(?:use|using|go with|switch to|choose|pick"
    r"|built on|built with|migrate to)\b))\s*"
    rf"(?P<tech>(?i:{_TECH_ALT}))(?![A-Za-z0-9+#])"
)
_NEGATION_BEFORE = re.compile(
    r"(?:不|别|没|勿|避免|(?i:\b(?:don't|do not|never|avoid|no|not)\b))\s*\S{0,3}\s*$"
)


def _tech_facts(text: str) -> list[ExtractedFact]:
    facts: list[ExtractedFact] = []
    for match in _TECH_CHOICE.finditer(text):
        if _NEGATION_BEFORE.search(text[max(0, match.start() - 8) : match.start()]):
            continue  # "不要用MySQL" is a dislike, handled as a preference
        canonical, category = _TECH[match.group("tech").casefold()]
        value: dict[str, JsonValue] = {"choice": canonical}
        facts.append(ExtractedFact(f"tech.{category}", value, 0.8, match.span(), "tech.choice"))
    return facts


# ---------------------------------------------------------------- preferences

_ITEM_CN = r"(?P<item>[^，。,.！!？?；;\n]{1,16})"
_ITEM_EN = r"(?P<item>[^,.;!?\n]{1,60})"
_PREFERENCE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:不喜欢|讨厌|不要用?|别用|不想用|不想要|不需要|不用)" + _ITEM_CN), "dislike"),
    (
        re.compile(
            r"(?:我|用户|客户)(?:比较|很|最|更|非常|特别|一直)?(?:喜欢|偏好|偏爱|钟意|爱用|倾向于?)"
            + _ITEM_CN
        ),
        "like",
    ),
    (
        re.compile(
            r"(?i:\bi\s+(?:really\s+)?(?:don't|do not)\s+(?:like|want)|\bi\s+(?:hate|dislike)"
            r"|\b(?:please\s+)?(?:don't|do not|never)\s+use|\bavoid(?:\s+using)?)\s+" + _ITEM_EN
        ),
        "dislike",
    ),
    (
        re.compile(
            r"(?i:\bi\s+(?:really\s+|much\s+|would\s+)?(?:like|love|prefer|enjoy)|\bwe\s+prefer)"
            r"\s+" + _ITEM_EN
        ),
        "like",
    ),
)
_ITEM_BAD_START_CN = re.compile(r"^(?:超过|低于|高于|忘|太|再|担心|着急|让|急|管|了|的|说|是|去)")
_ITEM_TRAILING_CN = re.compile(r"(?:了|的|吧|啊|呢|哦|呀|啦)+$")
_ITEM_STOP_EN = re.compile(
    r"\s+(?:and|but|because|since|when|for|if|so|as|in|on|with|than|over)\b.*$", re.I
)
_PRONOUNS = frozenset({"it", "this", "that", "them", "you", "him", "her", "these", "those"})


def _clean_item(raw: str) -> str | None:
    item = raw.strip()
    if _CJK.search(item[:1] or " "):
        if _ITEM_BAD_START_CN.match(item) or re.search(r"\d", item):
            return None
        item = re.sub(r"^(?:用|使用|吃|喝|穿)", "", item)
        item = _ITEM_TRAILING_CN.sub("", item).strip()
        return item or None
    item = _ITEM_STOP_EN.sub("", item)
    item = re.sub(r"^(?:to\s+use|using|to|the|a|an)\s+", "", item, flags=re.I).strip()
    words = item.split()
    if not words or words[0].casefold() in _PRONOUNS or len(words) > 4:
        return None
    return item


def _preference_facts(text: str) -> list[ExtractedFact]:
    facts: list[ExtractedFact] = []
    taken: list[tuple[int, int]] = []
    for pattern, polarity in _PREFERENCE_PATTERNS:
        for match in pattern.finditer(text):
            if any(s < match.end() and match.start() < e for s, e in taken):
                continue  # "不喜欢" also contains "喜欢": the first, longer reading wins
            item = _clean_item(match.group("item"))
            if item is None:
                continue
            item_start = match.start("item") + match.group("item").find(item)
            span = (match.start(), max(item_start + len(item), match.start() + 1))
            taken.append(span)
            value: dict[str, JsonValue] = {"polarity": polarity, "item": item}
            key = f"preference:{item.casefold()}"
            facts.append(ExtractedFact(key, value, 0.75, span, f"preference.{polarity}"))
    return facts


# ---------------------------------------------------------------- the rule extractor

# When two readings overlap, the more specific rule wins ("不要超过5万" is a budget).
_RULE_RANK = {"user_name": 0, "budget": 1, "deadline": 2, "followup": 3, "tech": 4}
_RULE_RANK |= {"location": 5, "preference": 6}


def _rank(fact: ExtractedFact) -> int:
    return _RULE_RANK.get(fact.key.split(".")[0].split(":")[0], 9)


class RuleFactExtractor:
    """Offline, deterministic extraction by rules; see the module docstring for the keys."""

    def extract(
        self,
        text: str,
        *,
        previous: Sequence[ExtractedFact] = (),
        today: date | None = None,
    ) -> list[ExtractedFact]:
        candidates = [
            *_name_facts(text),
            *_budget_facts(text),
            *_deadline_facts(text, today),
            *_followup_facts(text, previous),
            *_tech_facts(text),
            *_location_facts(text),
            *_preference_facts(text),
        ]
        accepted: list[ExtractedFact] = []
        for fact in sorted(candidates, key=lambda f: (_rank(f), f.span)):
            start, end = fact.span
            if any(start < e and s < end for s, e in (a.span for a in accepted)):
                continue
            accepted.append(fact)
        # The latest statement of a key wins ("用MySQL……算了，用PostgreSQL").
        latest: dict[str, ExtractedFact] = {}
        for fact in sorted(accepted, key=lambda f: f.span):
            latest[fact.key] = fact
        return sorted(latest.values(), key=lambda f: f.span)


_DEFAULT_RULES = RuleFactExtractor()


def asks_to_remember(text: str) -> bool:
    """True when the message asks for something to be kept ("记一下…", "remember that…")."""
    return bool(_REMEMBER.search(text))


def extract_facts(
    text: str, *, previous: Sequence[ExtractedFact] = (), today: date | None = None
) -> list[ExtractedFact]:
    """Extract facts from one user message with the rule extractor."""
    return _DEFAULT_RULES.extract(text, previous=previous, today=today)


# ---------------------------------------------------------------- the LLM extractor

_KEY_RE = r"^[A-Za-z][\w.:\-\u4e00-\u9fff]{0,99}$"


class _LLMFact(BaseModel):
    # Built on the first answer validated: the key pattern (Unicode classes) alone took
    # ~30 ms to compile, paid by every import of this module without an LLM configured.
    model_config = ConfigDict(extra="ignore", defer_build=True)

    key: str = Field(pattern=_KEY_RE)
    value: Any = None
    confidence: float = Field(default=0.7, ge=0.0, le=1.0)
    evidence: str = ""


_FENCE = re.compile(r"^\s*```(?:json)?\s*(?P<body>.*?)\s*```\s*$", re.DOTALL)

_SYSTEM_PROMPT = (
    "You extract durable facts stated by the user in one message, for an assistant's state. "
    'Answer only with JSON: {"facts": [{"key": str, "value": object, "confidence": 0..1, '
    '"evidence": exact substring of the message}]}. Keys: "budget" (value {"op": "<=", ">=", '
    '"=", "~" or "between", "amount" or "min"/"max", "currency"}), "deadline" ({"op", '
    '"expression", "date": ISO date or null}), "user_name" ({"name"}), "location" '
    '({"place"}), "tech.<category>" ({"choice"}), "preference:<item>" ({"polarity": "like" '
    'or "dislike", "item"}), "followup" ({"topic", "question": true}). Questions are not '
    'facts. No facts: {"facts": []}.'
)


def parse_llm_facts(content: str, text: str, *, rule: str = "llm") -> list[ExtractedFact]:
    """Validate a model's JSON answer into facts; items that do not validate are skipped.

    Raises `FactExtractionError` when the answer is not JSON or has no facts list at all.
    """
    fenced = _FENCE.match(content)
    body = fenced.group("body") if fenced else content.strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise FactExtractionError(
            f"the model's answer is not JSON ({exc.msg}): {body[:80]!r}"
        ) from None
    raw_facts = data.get("facts") if isinstance(data, dict) else data
    if not isinstance(raw_facts, list):
        raise FactExtractionError("the model's answer has no 'facts' list")
    facts: list[ExtractedFact] = []
    for raw in raw_facts:
        try:
            parsed = _LLMFact.model_validate(raw)
        except PydanticValidationError:
            continue
        value = parsed.value if isinstance(parsed.value, dict) else {"value": parsed.value}
        found = text.find(parsed.evidence) if parsed.evidence else -1
        span = (found, found + len(parsed.evidence)) if found >= 0 else (0, len(text))
        facts.append(ExtractedFact(parsed.key, value, parsed.confidence, span, rule))
    return facts


class LLMFactExtractor:
    """Fact extraction by any OpenAI-compatible chat completions endpoint.

    `base_url` is the API root (".../v1"); the request goes to `{base_url}/chat/completions`.
    httpx is imported on first use, so the offline install does not need it.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 20.0,
        json_mode: bool = True,
        min_confidence: float = 0.0,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.json_mode = json_mode
        self.min_confidence = min_confidence
        self._extra_headers = dict(extra_headers or {})

    def build_messages(
        self, text: str, previous: Sequence[ExtractedFact], today: date | None
    ) -> list[dict[str, str]]:
        known = {f.key: f.value for f in previous}
        context = f"Today is {today.isoformat()}. " if today else ""
        if known:
            context += f"Facts already known: {json.dumps(known, ensure_ascii=False)}. "
        return [
            {"role": "system", "content": _SYSTEM_PROMPT},
            {"role": "user", "content": f"{context}Message:\n{text}"},
        ]

    def extract(
        self,
        text: str,
        *,
        previous: Sequence[ExtractedFact] = (),
        today: date | None = None,
    ) -> list[ExtractedFact]:
        import httpx

        payload: dict[str, Any] = {
            "model": self.model,
            "messages": self.build_messages(text, previous, today),
            "temperature": 0,
        }
        if self.json_mode:
            payload["response_format"] = {"type": "json_object"}
        headers = {"Content-Type": "application/json", **self._extra_headers}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        url = f"{self.base_url}/chat/completions"
        try:
            response = httpx.post(url, json=payload, headers=headers, timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise FactExtractionError(f"request to {url} failed: {exc}") from exc
        if response.status_code >= 400:
            raise FactExtractionError(
                f"{url} answered HTTP {response.status_code}: {response.text[:200]!r}"
            )
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise FactExtractionError(f"{url} did not answer a chat completion") from exc
        if not isinstance(content, str):
            raise FactExtractionError(f"{url} answered a completion without text content")
        facts = parse_llm_facts(content, text, rule=f"llm:{self.model}")
        return [f for f in facts if f.confidence >= self.min_confidence]

"""What people call an agent role in the other language.

Agents record their events under role ids that are usually English (``tester``,
``research_assistant``, ``oncall``), while a user asks in their own language: "测试报的问题，
开发怎么修的？", "研究助理推荐的数据". A query names an actor by any of these names, so the
actor boost and the actor-free topic query see "测试" as the tester. Role ids are split into
words (``research_assistant`` -> research + assistant) and each word is looked up in a small
bilingual vocabulary of common roles; Chinese role ids get their English names the same way.
Pure functions; the vocabulary is generic (team, service, health, household and study roles),
not tied to any project.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["ROLE_WORDS", "role_names"]

# English role word -> its usual Chinese names. A word that is also a common topic word in
# Chinese on its own ("代码" code, "健康" health) only names a role with a role suffix
# (助理, 助手, 师, 员), which the compositional rule below adds.
ROLE_WORDS: dict[str, tuple[str, ...]] = {
    "tester": ("测试", "测试工程师", "测试员"),
    "qa": ("测试", "质检", "质量保障"),
    "coder": ("开发", "程序员", "开发工程师"),
    "developer": ("开发", "程序员", "开发工程师"),
    "dev": ("开发", "程序员"),
    "engineer": ("工程师",),
    "engineering": ("研发", "工程团队"),
    "programmer": ("程序员",),
    "architect": ("架构师",),
    "designer": ("设计师",),
    "planner": ("规划", "统筹", "策划"),
    "researcher": ("研究员", "研究助理"),
    "analyst": ("分析师",),
    "reviewer": ("评审", "审阅人"),
    "writer": ("写作", "撰稿"),
    "editor": ("编辑",),
    "translator": ("翻译",),
    "manager": ("经理", "主管"),
    "pm": ("产品经理", "项目经理"),
    "supervisor": ("监理", "主管"),
    "ops": ("运营", "运维"),
    "operations": ("运营", "运维"),
    "devops": ("运维",),
    "sre": ("运维",),
    "oncall": ("值班",),
    "triage": ("分诊",),
    "scribe": ("记录员", "复盘记录"),
    "support": ("客服",),
    "billing": ("计费", "账务"),
    "bookkeeper": ("记账", "会计"),
    "accountant": ("会计",),
    "vendor": ("供应商", "商家"),
    "customer": ("客户",),
    "coach": ("教练",),
    "physio": ("康复师", "理疗师"),
    "physiotherapist": ("康复师", "理疗师"),
    "nutritionist": ("营养师",),
    "doctor": ("医生",),
    "nurse": ("护士",),
    "teacher": ("老师", "教师"),
    "tutor": ("辅导老师", "家教"),
    "lawyer": ("律师",),
    "secretary": ("秘书",),
    "sales": ("销售",),
    "marketing": ("营销",),
    "recruiter": ("招聘",),
}

# First words of compound roles ("health" in health_assistant): a name only with a suffix.
_QUALIFIERS: dict[str, tuple[str, ...]] = {
    "code": ("代码",),
    "coding": ("代码", "编程"),
    "health": ("健康",),
    "life": ("生活",),
    "research": ("研究",),
    "writing": ("写作",),
    "travel": ("旅行", "出行"),
    "finance": ("财务", "理财"),
    "budget": ("预算",),
    "study": ("学习",),
    "shopping": ("购物",),
    "legal": ("法律",),
    "data": ("数据",),
    "test": ("测试",),
    "ops": ("运营", "运维"),
    "customer": ("客户",),
    "medical": ("医疗",),
    "fitness": ("健身",),
    "home": ("家居", "家务"),
}
_SUFFIXES: dict[str, tuple[str, ...]] = {
    "assistant": ("助理", "助手"),
    "helper": ("助手",),
    "agent": ("助手", "代理"),
    "bot": ("机器人", "助手"),
    "advisor": ("顾问",),
    "adviser": ("顾问",),
    "expert": ("专家",),
    "manager": ("经理",),
    "engineer": ("工程师",),
    "analyst": ("分析师",),
}

_CJK = re.compile(r"[\u3400-\u9fff]")


@lru_cache(maxsize=4096)
def role_names(actor: str) -> tuple[str, ...]:
    """The actor id itself, then what the role is called in the other language (Chinese
    names of an English role id, English words of a Chinese one); the id alone when the
    vocabulary does not know it."""
    names: list[str] = [actor]
    words = [w for w in re.split(r"[_\-\s.]+", actor.casefold()) if w]
    if not words:
        return tuple(names)
    if _CJK.search(actor):
        names += [en for en, zh in ROLE_WORDS.items() if actor in zh]
        return tuple(dict.fromkeys(names))
    if len(words) == 1:
        names += ROLE_WORDS.get(words[0], ())
    elif len(words) == 2:
        head, tail = words
        for suffix in _SUFFIXES.get(tail, ()):
            names += [q + suffix for q in (*_QUALIFIERS.get(head, ()), *ROLE_WORDS.get(head, ()))]
        if tail not in _SUFFIXES:  # "qa_engineer" style: the head names the role
            names += ROLE_WORDS.get(head, ())
    return tuple(dict.fromkeys(n for n in names if n))

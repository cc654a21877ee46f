"""The history layer's plan: which of the session's turns the window shows whole, which it
compresses into its summary, and the summary an LLM may write for them.

The window takes the newest turns (a tool result whose call is older goes with it:
history_fallback.py); those shown whole fit the history's quota; the important ones left
before them are summarised.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..model import Event
from .budget import fit_to_tokens, layer_quota
from .history_fallback import THOUGHT_TYPE, pair_groups, window_turns
from .policy import Policy, RecentWindow
from .state import LLMConfig
from .tokens import TokenCounter
from .turn_roles import TurnView

__all__ = ["HistoryPlan", "important", "llm_summary", "plan_history"]


def llm_summary(
    llm: LLMConfig, texts: Sequence[str], max_tokens: int, counter: TokenCounter
) -> str:
    import httpx

    prompt = (
        f"Summarise this conversation in at most {max_tokens} tokens. Keep facts, "
        "numbers, names and decisions. Answer with the summary only."
    )
    headers = {"Authorization": f"Bearer {llm.api_key}"} if llm.api_key else {}
    response = httpx.post(
        f"{llm.base_url.rstrip('/')}/chat/completions",
        json={
            "model": llm.model,
            "temperature": 0,
            "max_tokens": max_tokens,
            "messages": [
                {"role": "system", "content": prompt},
                {"role": "user", "content": "\n".join(texts)},
            ],
        },
        headers=headers,
        timeout=llm.timeout_s,
    )
    response.raise_for_status()
    content = response.json()["choices"][0]["message"]["content"]
    return fit_to_tokens(str(content).strip(), max_tokens, counter)


def important(e: Event) -> bool:
    return bool(e.metadata.get("important")) or e.importance >= 0.7


class HistoryPlan(NamedTuple):
    """What the history layer makes of the session's turns, planned once per assembly."""

    in_window: list[Event]  # the newest max_messages turns, less orphaned tool results
    before: list[Event]  # the turns older than the window
    groups: dict[str, str]  # a tool call and its results share a group
    orphans: list[str]  # tool results whose call is older than the window
    whole: list[Event]  # the turns shown whole (the newest within the quota)
    to_compress: list[Event]  # important turns the history summarises
    used: int  # tokens the whole turns take
    quota: int  # the history layer's tokens

    @property
    def shown(self) -> list[Event]:
        """What memory need not recall: the whole turns, the summarised ones and the
        window's thoughts (the history's asides)."""
        thoughts = [e for e in self.in_window if e.type == THOUGHT_TYPE]
        return [*self.whole, *self.to_compress, *thoughts]


def plan_history(
    hist: Sequence[Event],
    events: Sequence[Event],
    window: RecentWindow,
    policy: Policy,
    limit: int,
    intent_tokens: int,
    view: TurnView,
) -> HistoryPlan:
    """The window's turns (a tool result whose call is older than the window goes with it:
    history_fallback.py), those shown whole within the history's quota (the newest; a
    thought takes what is left), and the important ones compressed into its summary (those
    before the window and those the whole turns leave out; the summary gets a quarter of
    the quota at least)."""
    in_window, before = window_turns(list(hist), window.max_messages)
    groups, orphans = pair_groups(in_window, events)
    if orphans:
        in_window = [e for e in in_window if e.id not in set(orphans)]
    quota = layer_quota(
        policy.budget.history, policy.budget.latest, max(0, limit - 7), intent_tokens
    )
    if window.max_tokens is not None:
        quota = min(quota, window.max_tokens)
    whole: list[Event] = []
    used = 0
    for e in reversed(in_window):
        if e.type == THOUGHT_TYPE:
            continue  # a thought never ends the window: it only takes what is left
        cost = view.cost(e)
        if used + cost > quota:
            break
        whole.insert(0, e)
        used += cost
    first = in_window.index(whole[0]) if whole else len(in_window)
    to_compress = [e for e in before if important(e)]
    to_compress += [e for e in in_window[:first] if important(e)]
    if to_compress:
        reserve = quota // 4
        while whole and used > quota - reserve:
            gone = whole.pop(0)
            used -= view.cost(gone)
            if important(gone):
                to_compress.append(gone)
    return HistoryPlan(
        in_window, before, dict(groups), list(orphans), whole, to_compress, used, quota
    )

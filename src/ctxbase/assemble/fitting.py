"""Fitting the layers into the prompt: allocate the budget, render the messages, count them
as the model will, and shrink until they fit.

The system prompt and the latest input are required: a budget below them is refused with
the least budget that works (BudgetTooSmall).
"""

from __future__ import annotations

from collections.abc import Mapping

from .budget import BudgetAllocation, BudgetItem, BudgetTooSmall, allocate_budget
from .memory_section import ITEM_OVERHEAD, MEMORY_QUOTE, memory_frame
from .quoting import Quote
from .tokens import REPLY_PRIMING_TOKENS, TokenCounter, count_messages
from .trace import build_messages

__all__ = ["HEADERS", "LAYER_QUOTES", "fit_messages"]

HEADERS = {"state": "Known facts:", "task": "Current task:"}
LAYER_QUOTES = {"memory": MEMORY_QUOTE}  # one user message quoting its items as data


def fit_messages(
    items: dict[str, list[BudgetItem]],
    roles: Mapping[str, str],
    quotes: Mapping[str, Quote],
    shares: Mapping[str, float],
    limit: int,
    intent: str,
    counter: TokenCounter,
    latest_share: float = 0.0,
) -> tuple[BudgetAllocation, list[dict[str, str]]]:
    """Allocate, render, count the real messages; shrink until they fit `limit`."""
    input_tokens = counter.count(intent)
    base = REPLY_PRIMING_TOKENS + ITEM_OVERHEAD
    # The system prompt and the input are required: a budget below them is refused,
    # naming the least that works, rather than answered with the input alone.
    pinned = [i for i in items.get("system", []) if i.required]
    required = [{"role": "system", "content": i.text} for i in pinned]
    minimum = count_messages([*required, {"role": "user", "content": intent}], counter)
    if minimum > limit:
        raise BudgetTooSmall(limit, input_tokens, minimum)
    # the least budget to allocate: what holds the input and the pinned items whole
    floor = input_tokens + sum(counter.count(i.text) + ITEM_OVERHEAD for i in pinned)
    frame = base + ITEM_OVERHEAD  # the system message
    frame += sum(ITEM_OVERHEAD + counter.count(HEADERS[n]) + 1 for n in HEADERS if items.get(n))
    frame += memory_frame(counter) if items.get("memory") else 0  # header and quoting
    budget = max(floor, limit - frame)
    for _ in range(8):
        alloc = allocate_budget(
            budget,
            shares,
            counter,
            items,
            latest_input=intent,
            item_overhead_tokens=ITEM_OVERHEAD,
            latest_share=latest_share,
        )
        messages = build_messages(alloc, roles, HEADERS, LAYER_QUOTES, quotes)
        over = count_messages(messages, counter) - limit
        if over <= 0:
            return alloc, messages
        budget = max(floor, budget - over)
    # Unreachable in practice (each round removes the overflow); the required parts fit.
    alloc = allocate_budget(
        floor,
        shares,
        counter,
        {"system": pinned},
        latest_input=intent,
        item_overhead_tokens=ITEM_OVERHEAD,
    )
    return alloc, build_messages(alloc, roles, HEADERS, LAYER_QUOTES, quotes)

"""The retrieved-memory section on its own: `memory_section_for` packs one search's hits
into a token budget as the assembler packs its memory layer (labels, per-item overhead,
header, the wrapper quoting it as data), for benchmarks that measure evidence recall at a
budget. The assembler builds its memory layer with the same `memory_items`, overhead and
`MEMORY_QUOTE`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..components import ComponentsSource, components_of
from ..retrieve.config import SearchConfig, get_preset
from .asked_before import drop_unanswered
from .budget import BudgetItem, allocate_budget
from .gatherer import Gatherer
from .memory_calls import link_calls, memory_units
from .memory_candidate import MemoryCandidate
from .policy_loading import load_default_policies
from .quoting import MEMORY, Quote, neutralise
from .tokens import TokenCounter, get_token_counter

__all__ = [
    "ITEM_OVERHEAD",
    "MEMORY_HEADER",
    "MEMORY_QUOTE",
    "item_text",
    "keep_within_allowance",
    "memory_frame",
    "memory_items",
    "memory_section_for",
]

# each item's label names its source and the UTC day it was said or last changed
MEMORY_HEADER = "Retrieved context (labelled by source and date, UTC):"
# Per-message chat overhead (3) plus the role (1); also covers the separators of layer items.
ITEM_OVERHEAD = 4
# the memory layer is one user message: the header, then its items quoted as data
MEMORY_QUOTE = Quote(MEMORY, MEMORY_HEADER)


def memory_frame(counter: TokenCounter) -> int:
    """Tokens of the memory message without its items: message overhead, header, wrapper."""
    return ITEM_OVERHEAD + MEMORY_QUOTE.frame(counter)


def item_text(c: MemoryCandidate, counter: TokenCounter, max_item_tokens: int) -> str:
    """A candidate's labelled text as the prompt quotes it (any quoting tag in it inert)."""
    return neutralise(c.item_text(counter, max_item_tokens))


def memory_items(
    cands: Mapping[str, MemoryCandidate], counter: TokenCounter, max_item_tokens: int
) -> list[BudgetItem]:
    """The memory layer's items: the candidates, best first, each cut to `max_item_tokens`
    (and, the one that fits only in part, by the allocator) as prose or by lines;
    a tool call (or the message showing it) and its results as one unit, call first, each
    at the unit's score (memory_calls.py)."""
    return [
        BudgetItem(
            c.owner_id,
            item_text(c, counter, max_item_tokens),
            score,
            source=",".join(c.strategies),
            cut=c.cut,
            keep=len(neutralise(c.label())) + 1,  # a cut keeps the label whole and more than it
        )
        for score, ids in memory_units(cands)
        for c in (cands[i] for i in ids)
    ]


def keep_within_allowance(
    g: Gatherer, counter: TokenCounter, max_item_tokens: int, min_k: int, allowance: int
) -> str | None:
    """Seed 002's dynamic top-k counted on what is injected: of the memory units brought by
    semantic recall alone (a call with its results is one unit), best first, the first
    `min_k` stay; past them, a unit stays while the units kept so far and it take at most
    `allowance` tokens in the prompt (their labelled text plus the per-item overhead); the
    first that does not fit ends it. Drops the rest from `g` (reason "top_k"); the trace
    note saying so, or None."""
    used, kept, gone = 0, 0, list[str]()
    for _, ids in memory_units(g.cands):
        if not all(g.cands[i].strategies == ["semantic_recall"] for i in ids):
            continue  # another strategy brought it: not semantic recall's to cut
        cost = sum(
            counter.count(item_text(g.cands[i], counter, max_item_tokens)) + ITEM_OVERHEAD
            for i in ids
        )
        if gone or (kept >= min_k and used + cost > allowance):  # it stops there
            gone.extend(ids)
            continue
        kept, used = kept + 1, used + cost
    for owner in gone:
        del g.cands[owner]
        g.drop(
            owner,
            "top_k",
            f"semantic_recall: past dynamic top_k min {min_k}, memory_token_allowance "
            f"{allowance} reached",
        )
    if not gone and used <= allowance:
        return None
    over = f" (the first {min_k} always stay)" if used > allowance else ""
    # `used` is what the allowance counts: these items' texts and per-item overhead; the
    # monitoring's memory_tokens is the whole memory layer (its header and the items other
    # strategies brought as well), so the note says which it counts
    return (
        f"semantic_recall: memory_token_allowance {allowance}: kept {kept} recalled items "
        f"({used} tokens of their texts and per-item overhead; monitoring.memory_tokens "
        f"counts the whole memory layer, header and other strategies' items included)"
        f"{over}, left out {len(gone)}"
    )


def memory_section_for(
    cb: ComponentsSource,
    project: str | None,
    query: str,
    budget_tokens: int,
    *,
    config: SearchConfig | None = None,
    max_item_tokens: int = 600,
    max_depth: int = 80,
) -> tuple[list[str], int]:
    """The retrieved-memory section for `query` packed into `budget_tokens`, as the
    assembler packs it (labels, per-item overhead, header): (included owner ids, tokens).

    Candidates come from one search (`config`, default the "hybrid_graph" preset), scored
    as semantic_recall scores them; the benchmark measures evidence recall with it. While
    every hit fits and the search had more to give, it is asked again, as deep as the budget
    holds at the tokens per hit seen so far (up to `max_depth` hits): the budget, not a
    fixed top_k, decides how much memory enters (usually in two searches).
    """
    cb = components_of(cb)
    counter = get_token_counter()
    pid = cb.project if project is None else project
    policy = load_default_policies().default
    frame = memory_frame(counter)
    if budget_tokens <= frame:
        return [], 0
    base = config or get_preset("hybrid_graph")
    depth = base.top_k
    while True:
        g = Gatherer(cb, pid, policy, session_id=None, intent=query, exclude=set(), record=False)
        g.search(query, base.model_copy(update={"top_k": depth}), None, "semantic_recall", 0.0, 0.8)
        drop_unanswered(g)
        link_calls(g)
        alloc = allocate_budget(
            budget_tokens - frame,
            {"memory": 1.0},
            counter,
            {"memory": memory_items(g.cands, counter, max_item_tokens)},
            item_overhead_tokens=ITEM_OVERHEAD,
        )
        full = any(d.reason == "budget" for d in alloc.dropped)
        if full or len(g.cands) < depth or depth >= max_depth:
            break
        # deep enough for the budget at the cost per hit seen so far (at least twice as deep)
        packed = alloc.layers["memory"]
        per_hit = packed.tokens / max(1, len(packed.included))
        wanted = math.ceil(1.25 * (budget_tokens - frame) / max(1.0, per_hit))
        depth = min(max_depth, max(2 * depth, wanted))
    included = alloc.layers["memory"].included
    if not included:
        return [], 0
    return [inc.item.id for inc in included], frame + alloc.layers["memory"].tokens

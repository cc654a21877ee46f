"""Token budgeting for prompt assembly: who gets how many tokens, and what is left out.

The latest user input is placed first and never cut (unless the caller allows it): a prompt
without the question is worthless. What remains is split between the layers (system, state,
task, memory, history) by their shares. With a `latest_share` (seed 003 keeps 20 % for the
input), shares are fractions of the whole budget and the input's reserve is set aside: a
longer input shrinks the layers in proportion, a shorter one leaves its spare to the pool.
Pinned items (the system prompt) are packed first, whole, even past their layer's share (the
other layers' shares give way in proportion); they are never cut. Each layer then packs the
rest by score; the tokens a layer does not use go to a common pool that is handed out
again, the state layer's facts first, then memory, then history, then the other fixed
layers. Each layer may cut at most one
unpinned item to use the end of the pool, where a reader expects it to end (prose after a
whole sentence or clause, code and tool output after a whole line; cutting.py) and marked
with "…". The history is a rolling window (`ROLLING`, history_fallback.py): taken from
the newest back, stopping at the first turn that does not fit, a tool call with its
result, thoughts last. Every item left out is reported with its reason.

Token counts are per item plus an optional fixed overhead per item (separators, role tags)
and the item's own (`BudgetItem.overhead`: a wrapper quoting it as data, quoting.py); the
total of an allocation never exceeds `max_tokens`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ..errors import CtxbaseError, ValidationError
from .cutting import fit_to_boundary
from .history_fallback import Packable, rolling_take

__all__ = [
    "KEEP_REPEATS",
    "LAYER_ORDER",
    "REDISTRIBUTION_ORDER",
    "ROLLING",
    "BudgetAllocation",
    "BudgetItem",
    "BudgetTooSmall",
    "CutKind",
    "DropReason",
    "DroppedItem",
    "ExtractiveSummary",
    "IncludedItem",
    "LayerAllocation",
    "TokenCounterProtocol",
    "allocate_budget",
    "check_max_tokens",
    "compress_extractive",
    "cut_item",
    "extract_summary",
    "fit_to_clauses",
    "fit_to_tokens",
    "layer_quota",
    "left_out_note",
    "listed_shares",
    "split_sentences",
]


def check_max_tokens(limit: object) -> int:
    """A token budget as given by a caller: a positive int (not a bool, not "100"), the same
    embedded and remote."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise ValidationError("max_tokens", f"must be a positive integer (got {limit!r})")
    return limit


# The order layers appear in the prompt, and the order they are packed in.
LAYER_ORDER: tuple[str, ...] = ("system", "state", "task", "memory", "history")
# Who gets unused tokens first (seed 003: what is known before what is recalled): the
# state's facts, then recalled memory, then older conversation.
REDISTRIBUTION_ORDER: tuple[str, ...] = ("state", "memory", "history", "task", "system")
# Layers packed as a rolling window from their best (newest) item down: whole groups, no
# gap, asides last (history_fallback.rolling_take).
ROLLING: frozenset[str] = frozenset({"history"})

DropReason = Literal["budget", "threshold", "duplicate"]
CutKind = Literal["prose", "lines", "clauses", "tokens"]

# Layers whose items are a conversation's turns, kept as said: "yes" twice is two answers
# (to two questions), so a turn is never left out as a duplicate of another text. They do
# not count as seen either: a recalled text in another layer is judged on its own.
KEEP_REPEATS: frozenset[str] = frozenset({"history"})


class TokenCounterProtocol(Protocol):
    """What budgeting needs from a tokenizer (see ctxbase.assemble.tokens)."""

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...


class BudgetTooSmall(CtxbaseError, ValueError):
    """The latest user input alone, or with the required parts of the prompt (`minimum`
    tokens: the system prompt and the input as messages), does not fit in the budget."""

    code = "budget_too_small"
    field = "max_tokens"  # the argument to raise (a tool's answer names it)

    def __init__(self, max_tokens: int, input_tokens: int, minimum: int | None = None) -> None:
        self.max_tokens = max_tokens
        self.input_tokens = input_tokens
        self.minimum = minimum
        if minimum is None:
            message = (
                f"the latest user input needs {input_tokens} tokens but max_tokens is "
                f"{max_tokens}; raise max_tokens or allow the input to be truncated"
            )
        else:
            message = (
                f"max_tokens is {max_tokens}, but the system prompt and the latest user input "
                f"need {minimum} tokens together (the input {input_tokens}); raise max_tokens "
                f"to at least {minimum}"
            )
        super().__init__(message)


@dataclass(frozen=True)
class BudgetItem:
    """A candidate piece of a layer. `required` (pinned) items are packed before the others."""

    id: str
    text: str
    score: float = 0.0
    required: bool = False
    source: str = ""
    # how the allocator may cut it to use the end of the pool (`cut_item`): as prose or as
    # lines (code, tool output), where a reader expects it to end and marked as cut; only
    # after a whole sentence or clause, unmarked (a summary: "预算上限 8 万元" must not become
    # "预算上限 8"); or on a bare token boundary
    cut: CutKind = "prose"
    # characters of a leading label ("[message ev_1]\n") a prose or lines cut keeps whole:
    # a cut that keeps the label alone leaves the item out
    keep: int = 0
    # in a ROLLING layer: the items of one group (a tool call's entry and its results) are
    # placed together, whole, or left out together; an aside (a thought) is placed only
    # once every other item of its layer is
    group: str = ""
    aside: bool = False
    # tokens the item costs in the prompt besides its text and the per-item overhead: the
    # wrapper quoting it as data (quoting.py)
    overhead: int = 0


@dataclass(frozen=True)
class IncludedItem:
    item: BudgetItem
    text: str  # the item's text, cut when `truncated`
    tokens: int  # tokens of `text`, without the per-item overhead
    truncated: bool = False


@dataclass(frozen=True)
class DroppedItem:
    item: BudgetItem
    layer: str
    reason: DropReason
    detail: str


@dataclass(frozen=True)
class LayerAllocation:
    name: str
    share: float
    quota: int  # tokens granted by the share
    extra: int  # tokens received from the pool of unused shares
    tokens: int  # tokens used, overhead included
    included: tuple[IncludedItem, ...]  # in the order the items were given


@dataclass(frozen=True)
class BudgetAllocation:
    max_tokens: int
    input_text: str
    input_tokens: int
    input_truncated: bool
    layers: Mapping[str, LayerAllocation]
    dropped: tuple[DroppedItem, ...] = field(default=())

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + sum(layer.tokens for layer in self.layers.values())

    @property
    def unused_tokens(self) -> int:
        return self.max_tokens - self.total_tokens

    def texts(self, layer: str) -> list[str]:
        allocation = self.layers.get(layer)
        return [] if allocation is None else [inc.text for inc in allocation.included]

    def tokens_by_layer(self) -> dict[str, int]:
        return {name: layer.tokens for name, layer in self.layers.items()}


def fit_to_tokens(text: str, max_tokens: int, counter: TokenCounterProtocol) -> str:
    """`counter.truncate`, checked: the result always counts at most `max_tokens`.

    Tokenizers can disagree with themselves at the cut (a merge across the boundary), so the
    limit is lowered until the count holds.
    """
    if max_tokens <= 0:
        return ""
    if counter.count(text) <= max_tokens:
        return text
    limit = max_tokens
    while limit > 0:
        cut = counter.truncate(text, limit)
        if counter.count(cut) <= max_tokens:
            return cut
        limit -= 1
    return ""


def fit_to_clauses(text: str, max_tokens: int, counter: TokenCounterProtocol) -> str:
    """The leading whole sentences of `text` within `max_tokens` (joined by a space), else
    the first sentence's leading whole clauses (`_leading_clauses`), else ""."""
    if counter.count(text) <= max_tokens:
        return text
    sentences = split_sentences(text)
    head = ""
    for n in range(1, len(sentences) + 1):
        trial = " ".join(sentences[:n])
        if counter.count(trial) > max_tokens:
            break
        head = trial
    if head or not sentences:
        return head
    return _leading_clauses(sentences[0], max_tokens, counter)[0]


def cut_item(
    item: BudgetItem, max_tokens: int, counter: TokenCounterProtocol, at_least: int = 0
) -> str:
    """`item`'s text cut to `max_tokens` as its `cut` says (see `BudgetItem.cut`); a cut at
    a boundary keeps `at_least` tokens when a token cut would (`fit_to_boundary`)."""
    if item.cut == "clauses":
        return fit_to_clauses(item.text, max_tokens, counter)
    if item.cut == "tokens":
        return fit_to_tokens(item.text, max_tokens, counter)
    return fit_to_boundary(
        item.text,
        max_tokens,
        counter,
        lines=item.cut == "lines",
        at_least=at_least,
        keep=item.keep,
    )


def _normalized(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass
class _Candidate:
    index: int
    item: BudgetItem
    tokens: int


@dataclass
class _LayerState:
    name: str
    share: float
    quota: int
    candidates: list[_Candidate]
    chosen: dict[int, IncludedItem] = field(default_factory=dict)
    used: int = 0
    extra: int = 0
    truncated_one: bool = False

    def pending(self) -> list[_Candidate]:
        return [c for c in self.candidates if c.index not in self.chosen]


def _roll(layer: _LayerState, room: int, overhead: int) -> tuple[int, int | None]:
    """Place what a rolling window of `layer`'s pending items takes within `room`
    (history_fallback.rolling_take): the tokens it took, and the index of the item it
    stopped at when that one stands alone."""
    pending = {c.index: c for c in layer.pending() if not c.item.required}
    packable = [
        Packable(c.index, c.tokens + overhead + c.item.overhead, c.item.group, c.item.aside)
        for c in pending.values()
    ]
    keys, stopped = rolling_take(packable, room)
    took = 0
    for key in keys:
        cand = pending[key]
        layer.chosen[key] = IncludedItem(cand.item, cand.item.text, cand.tokens)
        took += cand.tokens + overhead + cand.item.overhead
    layer.used += took
    return took, stopped


def _priority(candidate: _Candidate) -> tuple[int, float, int]:
    return (0 if candidate.item.required else 1, -candidate.item.score, candidate.index)


def _layer_names(
    shares: Mapping[str, float], items: Mapping[str, Sequence[BudgetItem]]
) -> list[str]:
    known = [name for name in LAYER_ORDER if name in shares or name in items]
    extras = sorted((set(shares) | set(items)) - set(LAYER_ORDER))
    return known + extras


def _check_shares(shares: Mapping[str, float], latest_share: float = 0.0) -> None:
    for name, share in shares.items():
        if not (0.0 <= share <= 1.0) or math.isnan(share):
            raise ValueError(f"share of layer {name!r} must be in [0, 1] (got {share})")
    if not (0.0 <= latest_share < 1.0) or math.isnan(latest_share):
        raise ValueError(f"latest_share must be in [0, 1) (got {latest_share})")
    total = sum(shares.values()) + latest_share
    if total > 1.0 + 1e-9:
        # worded as a policy's budget is (policy.LayerShares), which also names the
        # defaults it counts: here every share counted was passed
        parts = [f"{listed_shares(shares)} as passed"] if shares else []
        if latest_share > 0:
            parts.append(f"{latest_share:g} kept for the latest input (`latest_share`)")
        raise ValueError(
            f"layer shares add up to {total:.3f}: {', plus '.join(parts)}; they must not exceed 1.0"
        )


def listed_shares(shares: Mapping[str, float]) -> str:
    """`system 0.5 + memory 0.9 = 1.400` (one share: `system 0.5`), for an error that
    says what a sum of shares is made of."""
    terms = " + ".join(f"{name} {share:g}" for name, share in shares.items())
    return terms if len(shares) == 1 else f"{terms} = {sum(shares.values()):.3f}"


def layer_quota(share: float, latest_share: float, budget: int, input_tokens: int) -> int:
    """Tokens a layer's `share` grants out of `budget` next to an input of `input_tokens`.

    The layer gets `share` of the whole budget while the input fits in its reserve
    (`latest_share` of it); a longer input takes what it needs and the layers shrink in
    proportion. With no reserve this is `share` of what the input leaves."""
    remaining = max(0, budget - input_tokens)
    scaled = share / (1.0 - latest_share) * remaining
    return math.floor(min(share * budget, scaled) + 1e-9)


def _pin(layers: Sequence[_LayerState], remaining: int, overhead: int) -> list[int]:
    """Place every pinned item that fits in `remaining` (whole, never cut) and return each
    layer's cap for pass 1: its quota, or what its pinned items took when more; the tokens
    pinned items take past their quotas come out of the other layers' free quota."""
    used = 0
    for layer in layers:
        for cand in layer.candidates:
            cost = cand.tokens + overhead + cand.item.overhead
            if cand.item.required and used + cost <= remaining:
                layer.chosen[cand.index] = IncludedItem(cand.item, cand.item.text, cand.tokens)
                layer.used += cost
                used += cost
    over = sum(max(0, layer.used - layer.quota) for layer in layers)
    free = sum(max(0, layer.quota - layer.used) for layer in layers)
    caps: list[int] = []
    for layer in layers:
        if layer.used >= layer.quota:
            layer.extra += layer.used - layer.quota
            caps.append(layer.used)
        else:
            room = layer.quota - layer.used
            caps.append(layer.used + (room - math.ceil(room * over / free) if over else room))
    return caps


def allocate_budget(
    max_tokens: int,
    shares: Mapping[str, float],
    counter: TokenCounterProtocol,
    items: Mapping[str, Sequence[BudgetItem]],
    *,
    latest_input: str = "",
    allow_truncate_input: bool = False,
    min_scores: Mapping[str, float] | None = None,
    item_overhead_tokens: int = 0,
    min_truncated_tokens: int = 8,
    dedupe: bool = True,
    latest_share: float = 0.0,
) -> BudgetAllocation:
    """Decide which items of which layers fit into `max_tokens` next to the latest input.

    `shares` maps layer names to fractions of what the input leaves (sum <= 1; the part not
    given to any layer joins the pool); with `latest_share`, fractions of `max_tokens` with
    that much kept for the input (see `layer_quota`). `min_scores` drops unpinned items
    scoring below their layer's minimum. Duplicates (same text up to whitespace and case)
    keep their first occurrence in prompt order, except in the `KEEP_REPEATS` layers (the
    conversation's turns), whose items are never duplicates. Raises `BudgetTooSmall` when
    the input alone is too long and `allow_truncate_input` is False.
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0 (got {max_tokens})")
    if item_overhead_tokens < 0:
        raise ValueError(f"item_overhead_tokens must be >= 0 (got {item_overhead_tokens})")
    _check_shares(shares, latest_share)

    input_text = latest_input
    input_tokens = counter.count(latest_input) if latest_input else 0
    input_truncated = False
    if input_tokens > max_tokens:
        if not allow_truncate_input:
            raise BudgetTooSmall(max_tokens, input_tokens)
        input_text = fit_to_tokens(latest_input, max_tokens, counter)
        input_tokens = counter.count(input_text) if input_text else 0
        input_truncated = True
    remaining = max_tokens - input_tokens

    dropped: list[DroppedItem] = []
    seen: dict[str, tuple[str, str]] = {}
    layers: list[_LayerState] = []
    thresholds = min_scores or {}
    for name in _layer_names(shares, items):
        share = shares.get(name, 0.0)
        candidates: list[_Candidate] = []
        for index, item in enumerate(items.get(name, ())):
            if not item.text.strip():
                dropped.append(DroppedItem(item, name, "threshold", "empty text"))
                continue
            minimum = thresholds.get(name)
            if minimum is not None and not item.required and item.score < minimum:
                detail = f"score {item.score:.3f} below {minimum:.3f}"
                dropped.append(DroppedItem(item, name, "threshold", detail))
                continue
            if name not in KEEP_REPEATS:
                key = _normalized(item.text)
                if dedupe and key in seen:
                    first_id, first_layer = seen[key]
                    detail = f"same text as {first_id!r} in {first_layer}"
                    dropped.append(DroppedItem(item, name, "duplicate", detail))
                    continue
                seen[key] = (item.id, name)
            candidates.append(_Candidate(index, item, counter.count(item.text)))
        candidates.sort(key=_priority)
        quota = layer_quota(share, latest_share, max_tokens, input_tokens)
        layers.append(_LayerState(name, share, quota, candidates))

    # Pass 0: pinned items first, whole, whatever their layer's share (the system prompt is
    # larger than 10 % of a small budget); the other layers' shares give way in proportion.
    caps = _pin(layers, remaining, item_overhead_tokens)

    # Pass 1: each layer within its own share, whole items only.
    for layer, cap in zip(layers, caps, strict=True):
        if layer.name in ROLLING:
            _roll(layer, cap - layer.used, item_overhead_tokens)
            continue
        for cand in layer.candidates:
            cost = cand.tokens + item_overhead_tokens + cand.item.overhead
            if cand.index not in layer.chosen and layer.used + cost <= cap:
                layer.chosen[cand.index] = IncludedItem(cand.item, cand.item.text, cand.tokens)
                layer.used += cost
    pool = remaining - sum(layer.used for layer in layers)

    # Pass 2: hand the pool out; whole items first, then at most one cut item per layer.
    by_name = {layer.name: layer for layer in layers}
    order = [n for n in REDISTRIBUTION_ORDER if n in by_name]
    order += [n for n in by_name if n not in REDISTRIBUTION_ORDER]
    for name in order:
        layer = by_name[name]
        stopped: int | None = None
        if name in ROLLING:
            took, stopped = _roll(layer, pool, item_overhead_tokens)
            layer.extra += took
            pool -= took
        for cand in [] if name in ROLLING else layer.pending():
            cost = cand.tokens + item_overhead_tokens + cand.item.overhead
            if cost <= pool:
                layer.chosen[cand.index] = IncludedItem(cand.item, cand.item.text, cand.tokens)
                layer.used += cost
                layer.extra += cost
                pool -= cost
        pending = [c for c in layer.pending() if not c.item.required]  # pinned: whole or out
        if name in ROLLING:  # only the turn the window stopped at, standing alone, is cut
            pending = [c for c in pending if c.index == stopped]
        head = pending[0].item.overhead if pending else 0
        room = pool - item_overhead_tokens - head
        if pending and not layer.truncated_one and room >= max(1, min_truncated_tokens):
            cand = pending[0]
            # a boundary cut too short to keep would leave out what a token cut keeps
            cut = cut_item(cand.item, room, counter, at_least=min_truncated_tokens)
            cut_tokens = counter.count(cut) if cut else 0
            if cut.strip() and cut_tokens >= min(min_truncated_tokens, room):
                cost = cut_tokens + item_overhead_tokens + cand.item.overhead
                layer.chosen[cand.index] = IncludedItem(cand.item, cut, cut_tokens, True)
                layer.truncated_one = True
                layer.used += cost
                layer.extra += cost
                pool -= cost

    result: dict[str, LayerAllocation] = {}
    for layer in layers:
        for cand in layer.pending():
            cost = cand.tokens + item_overhead_tokens + cand.item.overhead
            pinned = "pinned item " if cand.item.required else ""
            detail = f"{pinned}needs {cost} tokens; layer {layer.name} is full"
            dropped.append(DroppedItem(cand.item, layer.name, "budget", detail))
        included = tuple(layer.chosen[i] for i in sorted(layer.chosen))
        result[layer.name] = LayerAllocation(
            layer.name, layer.share, layer.quota, layer.extra, layer.used, included
        )
    return BudgetAllocation(
        max_tokens=max_tokens,
        input_text=input_text,
        input_tokens=input_tokens,
        input_truncated=input_truncated,
        layers=result,
        dropped=tuple(dropped),
    )


# Sentence ends: Chinese full stops and marks, or Latin ones followed by space; line breaks.
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;…])\s*|(?<=[.])\s+|\n+")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_DIGIT = re.compile(r"\d")
_EN_STOPWORDS_TEXT = (
    "a an the and or but if then of to in on at for with by from as is are was were be been "
    "it its this that these those i you he she we they me my your our their do does did so "
    "not no yes can could would should will just very also there here what which who"
)
_EN_STOPWORDS = frozenset(_EN_STOPWORDS_TEXT.split())
# Function characters: a bigram containing one says little about the topic.
_CJK_FUNCTION_CHARS = frozenset("的了是在和就也都着吗呢吧啊呀哦嗯我你他她它们这那个有把被")


def split_sentences(text: str) -> list[str]:
    """Split Chinese and English text into sentences, keeping their end marks."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


def _terms(sentence: str) -> list[str]:
    lowered = sentence.casefold()
    terms = [w for w in _WORD.findall(lowered) if w not in _EN_STOPWORDS]
    for run in _CJK_RUN.findall(lowered):
        if len(run) == 1:
            if run not in _CJK_FUNCTION_CHARS:
                terms.append(run)
            continue
        for i in range(len(run) - 1):
            bigram = run[i : i + 2]
            if not (set(bigram) & _CJK_FUNCTION_CHARS):
                terms.append(bigram)
    return terms


@dataclass(frozen=True)
class ExtractiveSummary:
    """What `extract_summary` kept (`text`) and the informative sentences, or the clauses
    cut from the end of one, it had no room for (`left_out`, in their order)."""

    text: str
    left_out: tuple[str, ...] = ()


def compress_extractive(
    texts: Sequence[str],
    max_tokens: int,
    counter: TokenCounterProtocol,
    *,
    separator: str = " ",
    lead_bonus: float = 0.3,
    min_relative_score: float = 0.35,
) -> str:
    """The text of `extract_summary` (what it left out is not reported)."""
    return extract_summary(
        texts,
        max_tokens,
        counter,
        separator=separator,
        lead_bonus=lead_bonus,
        min_relative_score=min_relative_score,
    ).text


def extract_summary(
    texts: Sequence[str],
    max_tokens: int,
    counter: TokenCounterProtocol,
    *,
    separator: str = " ",
    lead_bonus: float = 0.3,
    min_relative_score: float = 0.35,
) -> ExtractiveSummary:
    """Keep the most informative sentences of `texts` within `max_tokens`, in their order.

    A sentence scores by how frequent its terms are across all texts (words for English,
    character bigrams for Chinese), normalised by its length so long sentences do not win by
    size alone; the first sentence of each text gets `lead_bonus` (it usually states the
    topic) and sentences with numbers a small bonus (budgets, dates, ids). Used to compress
    older history that no longer fits verbatim (text that fits is returned whole). Sentences
    scoring below `min_relative_score` times the best score are small talk and are left out
    even when there is room; the informative ones with no room are `left_out`.

    A sentence said more than once (the same words, whatever the spacing or case) takes one
    place, its first, so the room goes to the next distinct sentence; saying it again still
    makes its terms more frequent.

    A sentence is never cut inside a clause ("预算上限 8 万元" must not become "预算上限 8"):
    when not even one sentence fits, the best one keeps the leading clauses that fit (cut
    after "，", "；", "," or ";", never inside a number such as 80,000); when not even its
    first clause fits, the summary is empty.
    """
    if max_tokens <= 0:
        return ExtractiveSummary("")
    sentences: list[tuple[int, str, bool]] = []
    first_at: dict[str, int] = {}  # a repeated sentence takes one place, its first
    every: list[str] = []  # repeats included: saying it again makes its terms frequent
    for text in texts:
        for position, sentence in enumerate(split_sentences(text)):
            every.append(sentence)
            key = _sentence_key(sentence)
            seen = first_at.get(key)
            if seen is None:
                first_at[key] = len(sentences)
                sentences.append((len(sentences), sentence, position == 0))
            elif position == 0 and not sentences[seen][2]:
                sentences[seen] = (seen, sentences[seen][1], True)
    if not sentences:
        return ExtractiveSummary("")
    whole = separator.join(sentence for _, sentence, _ in sentences)
    if counter.count(whole) <= max_tokens:
        return ExtractiveSummary(whole)  # nothing to compress
    term_lists = [_terms(s) for _, s, _ in sentences]
    frequency: Counter[str] = Counter(t for sentence in every for t in _terms(sentence))
    top = max(frequency.values(), default=1)

    scored: list[tuple[float, int]] = []
    for (index, sentence, is_lead), terms in zip(sentences, term_lists, strict=True):
        unique = set(terms)
        density = sum(frequency[t] / top for t in unique) / math.sqrt(len(unique) or 1)
        bonus = (lead_bonus if is_lead else 0.0) + (0.1 if _DIGIT.search(sentence) else 0.0)
        scored.append((density + bonus, index))
    scored.sort(key=lambda pair: (-pair[0], pair[1]))

    chosen: list[int] = []
    floor = scored[0][0] * min_relative_score
    informative = [index for score, index in scored if score >= floor]  # best first
    for index in informative:
        trial = sorted([*chosen, index])
        if counter.count(separator.join(sentences[i][1] for i in trial)) <= max_tokens:
            chosen = trial
    informative.sort()  # their order in the texts, for what is left out
    if chosen:
        left = tuple(sentences[i][1] for i in informative if i not in chosen)
        return ExtractiveSummary(separator.join(sentences[i][1] for i in chosen), left)
    # Not even one sentence fits: the best one's leading clauses that do, else nothing.
    best = scored[0][1]
    head, tail = _leading_clauses(sentences[best][1], max_tokens, counter)
    left = tuple(tail if i == best else sentences[i][1] for i in informative if i != best or tail)
    return ExtractiveSummary(head, left)


def left_out_note(left_out: Sequence[str], max_tokens: int, shown: int = 5) -> str:
    """The trace note naming what a summary of `max_tokens` had no room for (the first
    `shown` sentences, each cut to 80 characters)."""
    quoted = [f'"{t}"' if len(t) <= 80 else f'"{t[:79]}…"' for t in left_out[:shown]]
    more = f" and {len(left_out) - shown} more" if len(left_out) > shown else ""
    return (
        f"recent_window: the {max_tokens}-token summary of older messages had no room for "
        f"{len(left_out)} informative sentence(s) or clause(s), left out: "
        f"{', '.join(quoted)}{more}"
    )


def _sentence_key(sentence: str) -> str:
    """What makes two sentences the same one: their words, whatever the spacing or case."""
    return " ".join(sentence.split()).casefold()


# After a Chinese comma or semicolon, or an ASCII one not followed by a digit (80,000 is
# one number).
_CLAUSE_END = re.compile(r"(?<=[，；;])|(?<=,)(?!\d)")


def _leading_clauses(
    sentence: str, max_tokens: int, counter: TokenCounterProtocol
) -> tuple[str, str]:
    """The longest run of `sentence`'s leading whole clauses within `max_tokens` (its
    trailing comma dropped) and the rest; ("", sentence) when not even one clause fits."""
    parts = [p for p in _CLAUSE_END.split(sentence) if p]
    head = ""
    for n in range(1, len(parts)):
        trial = "".join(parts[:n]).strip().rstrip("，；,;").rstrip()
        if counter.count(trial) > max_tokens:
            break
        head = trial
    if not head:
        return "", sentence
    rest = sentence[len(head) :].lstrip("，；,; ").strip()
    return head, rest

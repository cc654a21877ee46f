"""Assembly results and their traces: what went into a prompt, what was left out, and why.

Every assembly gets a context id and a stored trace (`Store.put_trace`) in the shape
`diff.py` documents, extended with the request, the policy's reasons, every candidate
considered with its scores, the relations followed, timings and notes. `get_trace` reads one
back, `diff_contexts` compares two, `explain_trace` renders one for people; the same text is
logged at DEBUG on the "ctxbase.assemble" logger when an assembly runs in debug mode.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from ..components import ComponentsSource, components_of
from ..errors import NotFoundError
from ..store.base import Store
from ..store.trace_redaction import Forgotten
from .budget import LAYER_ORDER, BudgetAllocation
from .diff import TraceDiff, diff_traces
from .quoting import Quote
from .tokens import REPLY_PRIMING_TOKENS, TokenCounter

if TYPE_CHECKING:
    from ..anchor.signing import SignatureCheck
    from .memory_candidate import MemoryCandidate

__all__ = [
    "HIDDEN",
    "LOGGER_NAME",
    "AssembledContext",
    "assembly_log",
    "build_messages",
    "build_result",
    "diff_contexts",
    "explain_trace",
    "get_trace",
    "log_trace",
    "mask_hidden",
    "monitoring_line",
    "print_assembly_log",
    "store_trace",
]

LOGGER_NAME = "ctxbase.assemble"
log = logging.getLogger(LOGGER_NAME)

# Entity types that are code (the payload's code_snippets); every other entity is a document.
_CODE_TYPES = frozenset({"code", "sql", "test_case", "function", "class", "method", "script"})
# Edges of the event graph itself: ordering, not meaning; kept out of the payload.
_ORDER_EDGES = frozenset({"NEXT", "CAUSED_BY"})


@dataclass(frozen=True)
class AssembledContext:
    """One assembled prompt, its structured payload (seed 000's response) and its trace."""

    context_id: str
    messages: list[dict[str, str]]
    documents: list[dict[str, Any]]
    code_snippets: list[dict[str, Any]]
    events: list[dict[str, Any]]
    relationships: list[dict[str, Any]]
    tokens_by_layer: dict[str, int]
    total_tokens: int
    max_tokens: int
    policy: str
    strategies: tuple[str, ...]
    trace: dict[str, Any] = field(repr=False)

    @property
    def included_ids(self) -> list[str]:
        """Ids of every memory and history item in the prompt, in prompt order."""
        out: list[str] = []
        for layer in self.trace.get("layers", {}).values():
            out.extend(str(item["id"]) for item in layer.get("items", ()))
        return out

    @property
    def tampered(self) -> list[str]:
        """Entities, relations and captured events kept out because their signature failed
        (assembled with require_signature)."""
        dropped = self.trace.get("dropped", ())
        return list(dict.fromkeys(str(d["id"]) for d in dropped if d.get("reason") == "tampered"))

    @property
    def unsigned(self) -> int:
        """How many unsigned entities and captured events were kept out (assembled with
        require_signature)."""
        dropped = self.trace.get("dropped", ())
        return len(
            {
                str(d["id"])
                for d in dropped
                if d.get("reason") == "unsigned" and d.get("layer") != "relations"
            }
        )

    @property
    def header(self) -> str:
        """ "context_id ctx_... (54/3000 tokens)": the id to fetch the trace by and the
        tokens used of the budget (`ctxbase assemble` prints it, the MCP tool returns it)."""
        return f"context_id {self.context_id} ({self.total_tokens}/{self.max_tokens} tokens)"

    # Seed 000 reads the answer as a dict: payload["documents"][0]["content"].
    def __getitem__(self, key: str) -> Any:
        return self.payload()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.payload()

    def keys(self) -> list[str]:
        return list(self.payload())

    def get(self, key: str, default: Any = None) -> Any:
        return self.payload().get(key, default)

    def payload(self) -> dict[str, Any]:
        """The `POST /context/assemble` answer: messages plus the structured context."""
        return {
            "context_id": self.context_id,
            "messages": self.messages,
            "documents": self.documents,
            "code_snippets": self.code_snippets,
            "events": self.events,
            "relationships": self.relationships,
            "tokens_by_layer": self.tokens_by_layer,
            "total_tokens": self.total_tokens,
            "policy": self.policy,
            "strategies": list(self.strategies),
            "tampered": self.tampered,
            "unsigned": self.unsigned,
        }


# What stands in a trace where an item soft-deleted since was (restoring it shows it again).
HIDDEN = "[hidden]"


def get_trace(
    cb: ComponentsSource, context_id: str, *, project: str | None = None
) -> dict[str, Any]:
    """The stored trace of an assembly; NotFoundError when there is none. Events and
    entities soft-deleted since the assembly show as `HIDDEN` (ids, texts, and the texts
    where another entry quotes them), as they are hidden from every other read."""
    cb = components_of(cb)
    pid = cb.project if project is None else project
    trace = cb.store.get_trace(pid, context_id)
    if trace is None:
        raise NotFoundError("context", context_id)
    return mask_hidden(cb.store, pid, trace)


def _owners(trace: Mapping[str, Any]) -> list[str]:
    """The events and entities a trace names (its layers' items, candidates, hits, drops)."""
    named: set[str] = set()
    for layer in trace.get("layers", {}).values():
        named.update(str(item.get("id")) for item in layer.get("items", ()))
    for key in ("candidates", "search_considered", "dropped"):
        for entry in trace.get(key, ()):
            named.update(str(entry.get(k)) for k in ("id", "owner_id") if entry.get(k))
    return sorted({n.split("#", 1)[0] for n in named if n and n != "None"})


def _texts_of(trace: Mapping[str, Any], ids: Collection[str]) -> list[str]:
    """The texts the trace holds of the items `ids` (candidates' and layer items')."""
    entries: list[Mapping[str, Any]] = [*trace.get("candidates", ())]
    for layer in trace.get("layers", {}).values():
        entries.extend(layer.get("items", ()))
    out: list[str] = []
    for entry in entries:
        if str(entry.get("id", "")).split("#", 1)[0] in ids:
            out += [str(entry[k]) for k in ("text", "content") if entry.get(k)]
    return out


def store_trace(store: Store, project_id: str, context_id: str, trace: dict[str, Any]) -> None:
    """Store an assembly's trace, redacting what a forget that ran meanwhile removed.

    An assembly reads before it writes its trace; a forget that commits in between finds
    no trace to redact, so the trace is read against the tombstones after it is written
    and written again redacted, until a read finds nothing new: a forget committing after
    that read finds the stored trace and redacts it itself."""
    store.put_trace(project_id, context_id, trace)
    owners, known = _owners(trace), set[str]()
    while owners:
        gone = store.forgotten_ids(project_id, owners, ("event", "entity"))
        if gone <= known:
            return
        known |= gone
        trace, _ = Forgotten(known, _texts_of(trace, known)).redact(trace)
        store.put_trace(project_id, context_id, trace)


def mask_hidden(store: Store, project_id: str, trace: dict[str, Any]) -> dict[str, Any]:
    """`trace` with the events and entities now soft-deleted masked (see `get_trace`)."""
    owners = _owners(trace)
    if not owners:
        return trace
    events = store.get_events(project_id, owners, include_inactive=True)
    entities = store.get_entities(project_id, owners, include_inactive=True)
    hidden = [(e.id, e.text) for e in events if not e.active]
    hidden += [(e.id, e.text) for e in entities if not e.active]
    if not hidden:
        return trace
    # a statement cut from a message and hidden alone: the message, still shown, keeps
    # its whole text; only the statement's own entries and copies are masked
    shown = [(e.id, e.text) for e in events if e.active]
    shown += [(e.id, e.text) for e in entities if e.active]
    masked, _ = Forgotten(
        [i for i, _ in hidden], [t for _, t in hidden], marker=HIDDEN, kept=shown
    ).redact(trace)
    return dict(masked)


def diff_contexts(
    cb: ComponentsSource, before_id: str, after_id: str, *, project: str | None = None
) -> TraceDiff:
    """Compare two stored assemblies (render the result with `diff.render_diff`)."""
    cb = components_of(cb)
    return diff_traces(
        get_trace(cb, before_id, project=project), get_trace(cb, after_id, project=project)
    )


def _how_found(trace: Mapping[str, Any]) -> dict[str, list[str]]:
    """Owner id -> one line per strategy that found it, from the search hits the trace
    recorded (`search_considered`), else from its candidate's reasons and first hit."""
    out: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()
    for hit in trace.get("search_considered", ()):
        owner, strategy, rel = (
            str(hit.get("owner_id")),
            str(hit.get("strategy")),
            hit.get("relative"),
        )
        if rel is None or (owner, strategy) in seen:
            continue  # dropped by the search itself (top_k, duplicate): in the drops below
        seen.add((owner, strategy))
        floor = hit.get("min_score")
        cmp = "" if floor is None else f" {'>=' if rel >= floor else '<'} min_score {floor:g}"
        gate = f"; {hit['gate']}" if hit.get("gate") else ""
        out.setdefault(owner, []).append(
            f"{strategy}: {_origin(hit)}; relative score {rel:.3f}{cmp}{gate}"
        )
    for cand in trace.get("candidates", ()):
        owner = str(cand.get("id"))
        searched = {s for o, s in seen if o == owner}
        for reason in cand.get("reasons", ()):
            strategy = str(reason).split(":", 1)[0]
            if strategy not in searched and ": search hit" not in str(reason):
                out.setdefault(owner, []).append(str(reason))
        if owner not in out and cand.get("explain"):  # a trace recorded without the hits
            out[owner] = [_origin(cand["explain"])]
    return out


def _origin(hit: Mapping[str, Any]) -> str:
    """How a search found a hit (keyword rank, vector similarity, graph edge) and what
    moved its score: confidence, time decay, its place among its kind by recency."""
    how = []
    if hit.get("keyword_rank") is not None:
        how.append(f"keyword rank {hit['keyword_rank']}")
    if hit.get("similarity") is not None:
        how.append(f"vector similarity {hit['similarity']:.3f}")
    if hit.get("graph_via"):
        how.append(f"graph via {hit['graph_via']}")
    if hit.get("confidence") is not None:  # feedback or a failed tool result
        how.append(f"confidence {hit['confidence']:g} ({hit.get('confidence_source')})")
    if hit.get("decay") is not None:
        spared = f" ({hit['decay_spared']})" if hit.get("decay_spared") else ""
        how.append(f"decay x{hit['decay']:.3f}{spared}")
    if hit.get("recency"):  # "the SQL from last time": placed among its kind by recency
        how.append(str(hit["recency"]))
    if hit.get("reordered"):  # moved within the top by the learned re-ordering
        how.append(str(hit["reordered"]))
    return ", ".join(how) or "search hit"


def _when(ts: float) -> str:
    """A time as the trace's account shows it: UTC, to the minute."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _short(text: str, width: int = 70) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def monitoring_line(m: Mapping[str, Any]) -> str:
    """Seed 002's monitoring points of one assembly on one line: memory injected or the
    fallback (none), its items and tokens, its share of the prompt, retrieval time."""
    state = (
        "fallback (no retrieved memory injected)"
        if m.get("fallback")
        else f"memory hit ({m.get('memory_items', 0)} items)"
    )
    share = float(m.get("injected_share", 0.0))
    return (
        f"monitoring: {state}; memory {m.get('memory_tokens', 0)} of "
        f"{m.get('prompt_tokens', 0)} prompt tokens (injected share {share:.1%}); "
        f"retrieval {m.get('retrieval_ms', 0)} ms"
    )


def explain_trace(trace: Mapping[str, Any]) -> str:
    """A readable account of one assembly: policy and why, layers, inclusions, drops.

    Each memory item shows its score (the rank it was allocated by) and, under it, how each
    strategy found it: by keyword (rank), vector (similarity) or graph (the edge followed),
    with the relative score (over the search's best hit) its `min_score` was compared with,
    its confidence (feedback, a failed tool result) and its time decay where they apply,
    then when it was said; an item no search returned (a linked or recent one) shows why
    it was taken."""
    found = _how_found(trace)
    # memory of the asking user only (assemble/user_scope.py); the default goes unsaid
    scope = "" if trace.get("memory_scope", "project") == "project" else ", memory_scope user"
    lines = [
        f"context {trace.get('context_id')} for role {trace.get('agent_role')!r}, "
        f"{trace.get('total_tokens')}/{trace.get('max_tokens')} tokens",
        f"policy {trace.get('policy')!r} from {trace.get('policy_source')}, "
        f"view {trace.get('view')}{scope}, "
        f"strategies: {', '.join(trace.get('strategies', ())) or '-'}",
    ]
    lines.extend(f"  why: {reason}" for reason in trace.get("reasons", ()))
    in_prompt = trace.get("tokens_by_layer") or {}
    for name, layer in trace.get("layers", {}).items():
        # the items' tokens (what the budget counts); the prompt adds the layer's message
        # frame and header, as monitoring counts it
        framed = in_prompt.get(name)
        extra = f" ({framed} in the prompt, with its message frame)" if framed else ""
        lines.append(f"layer {name}: {layer.get('tokens', 0)} tokens of items{extra}")
        for item in layer.get("items", ()):
            cut = " (cut)" if item.get("truncated") else ""
            score = item.get("score")
            shown = "-" if score is None else f"{score:.3f}"
            lines.append(
                f"  + {item.get('id')} [{item.get('source')}] score {shown}{cut}: "
                f"{_short(item.get('text', ''))}"
            )
            if name == "memory":
                lines.extend(f"      {how}" for how in found.get(str(item.get("id")), ()))
                if item.get("said_at") is not None:  # the age a time decay counts
                    lines.append(f"      said {_when(float(item['said_at']))}")
    if primed := in_prompt.get("overhead"):  # the layers' prompt tokens add up to the total
        lines.append(f"overhead: {primed} tokens (priming the model's reply)")
    for dropped in trace.get("dropped", ()):
        lines.append(
            f"  - {dropped.get('id')} ({dropped.get('layer', '?')}): {dropped.get('reason')}"
            f" {dropped.get('detail', '')}".rstrip()
        )
    for rel in trace.get("relations", ()):
        state = "followed" if rel.get("followed") else "not followed"
        lines.append(
            f"  ~ {rel.get('from')} -{rel.get('type')}-> {rel.get('to')} "
            f"conf {rel.get('confidence')}: {state} {rel.get('detail', '')}".rstrip()
        )
    lines.extend(f"note: {note}" for note in trace.get("notes", ()))
    watched = trace.get("monitoring")
    if isinstance(watched, Mapping):
        lines.append(monitoring_line(watched))
    timings: Mapping[str, Any] = trace.get("timings_ms", {})
    if timings:
        lines.append("timings ms: " + ", ".join(f"{k}={v}" for k, v in timings.items()))
    return "\n".join(lines)


def assembly_log(ctx: AssembledContext) -> list[str]:
    """Seed 000's debug log of one assembly: what was found, how it is related, and how many
    tokens went into the prompt."""
    trace = ctx.trace
    layers = ", ".join(f"{k}={v}" for k, v in ctx.tokens_by_layer.items() if v)
    lines = [
        f"[ctxbase] assembled {ctx.context_id} for role {trace.get('agent_role')!r}: "
        f"policy {ctx.policy!r}, strategies {', '.join(ctx.strategies) or '-'}",
        f"[ctxbase] found {len(ctx.documents)} documents, {len(ctx.code_snippets)} code "
        f"snippets, {len(ctx.events)} events ({len(trace.get('candidates', ()))} candidates)",
        f"[ctxbase] {len(ctx.relationships)} relations between them",
    ]
    lines.extend(
        f"[ctxbase]   {r.get('from')} -{r.get('type')}-> {r.get('to')}" for r in ctx.relationships
    )
    lines.append(
        f"[ctxbase] injected {ctx.total_tokens} tokens of {ctx.max_tokens} ({layers}); "
        f"{len(trace.get('dropped', ()))} items left out"
    )
    return lines


def print_assembly_log(ctx: AssembledContext, file: TextIO | None = None) -> None:
    """Print `assembly_log` (to stderr unless `file` is given): a client's debug_mode."""
    out = sys.stderr if file is None else file
    for line in assembly_log(ctx):
        print(line, file=out)


def log_trace(trace: Mapping[str, Any], *, full: bool) -> None:
    """Log an assembly at DEBUG: one line, or the whole explanation in debug mode."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    if full:
        log.debug("%s", explain_trace(trace))
        return
    layers: Mapping[str, Any] = trace.get("layers", {})
    per_layer: Sequence[str] = [f"{k}={v.get('tokens', 0)}" for k, v in layers.items()]
    log.debug(
        "assembled %s: policy %s, %s tokens (%s), %d dropped",
        trace.get("context_id"),
        trace.get("policy"),
        trace.get("total_tokens"),
        ", ".join(per_layer),
        len(trace.get("dropped", ())),
    )


def build_messages(
    alloc: BudgetAllocation,
    roles: Mapping[str, str],
    headers: Mapping[str, str],
    quoted_layers: Mapping[str, Quote] | None = None,
    quotes: Mapping[str, Quote] | None = None,
) -> list[dict[str, str]]:
    """The OpenAI-style messages of an allocation, in the fixed layer order.

    A layer in `quoted_layers` (memory) is one user message quoting its items as data; a
    history item in `quotes` (a tool result, the summary) is a user message quoting it."""
    quoted_layers, quotes = quoted_layers or {}, quotes or {}
    messages: list[dict[str, str]] = []
    for name in LAYER_ORDER:
        layer = alloc.layers.get(name)
        if layer is None or not layer.included:
            continue
        if name == "history":
            for inc in layer.included:
                q = quotes.get(inc.item.id)
                if q is not None:
                    messages.append({"role": "user", "content": q.render(inc.text)})
                    continue
                messages.append({"role": roles.get(inc.item.id, "system"), "content": inc.text})
            continue
        joiner = "\n\n" if name == "memory" else "\n"
        body = joiner.join(inc.text for inc in layer.included)
        layer_quote = quoted_layers.get(name)
        if layer_quote is not None:
            messages.append({"role": "user", "content": layer_quote.render(body)})
            continue
        header = headers.get(name)
        messages.append({"role": "system", "content": f"{header}\n{body}" if header else body})
    if alloc.input_text:  # none when the newest user message was answered already
        messages.append({"role": "user", "content": alloc.input_text})
    return messages


def _layer_tokens(
    alloc: BudgetAllocation, messages: Sequence[Mapping[str, str]], counter: TokenCounter
) -> dict[str, int]:
    # Walk the messages the way build_messages wrote them, so the layers add up to the total.
    out: dict[str, int] = {"overhead": REPLY_PRIMING_TOKENS}
    index = 0
    for name in LAYER_ORDER:
        layer = alloc.layers.get(name)
        n = (
            0
            if layer is None or not layer.included
            else (len(layer.included) if name == "history" else 1)
        )
        out[name] = sum(
            3 + counter.count(m["role"]) + counter.count(m["content"])
            for m in messages[index : index + n]
        )
        index += n
    out["input"] = 0
    if alloc.input_text and index < len(messages):
        last = messages[index]
        out["input"] = 3 + counter.count(last["role"]) + counter.count(last["content"])
    return out


def _item(
    inc_id: str, source: str, score: float, text: str, truncated: bool, quoted: str | None = None
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": inc_id,
        "source": source,
        "score": round(score, 6),
        "text": text,
        "truncated": truncated,
    }
    if quoted is not None:  # in the prompt as <quoted_data source="..."> (quoting.py)
        item["quoted"] = quoted
    return item


def _quoted_as(
    layer: str,
    item_id: str,
    quoted_layers: Mapping[str, Quote] | None,
    quotes: Mapping[str, Quote] | None,
) -> str | None:
    """The source an included item is quoted as in the prompt, None when not quoted."""
    q = (quoted_layers or {}).get(layer) or (quotes or {}).get(item_id)
    return None if q is None else q.source


def monitoring(
    tokens: Mapping[str, int], memory_items: int, ran: Sequence[str], timings: Mapping[str, float]
) -> dict[str, Any]:
    """Seed 002's monitoring points for one assembly: whether retrieved memory was injected
    (hit; none is the fallback to a prompt without it), its share of the prompt's tokens,
    and how long retrieval took (the strategies' time)."""
    total = sum(tokens.values())
    memory = int(tokens.get("memory", 0))
    hit = memory_items > 0 and memory > 0
    return {
        "memory_hit": hit,
        "fallback": not hit,
        "memory_items": memory_items if hit else 0,
        "memory_tokens": memory,
        "prompt_tokens": total,
        "injected_share": round(memory / total, 4) if total else 0.0,
        "retrieval_ms": round(sum(float(timings.get(name, 0.0)) for name in ran), 3),
    }


def build_result(
    cb: ComponentsSource,
    *,
    context_id: str,
    request: Mapping[str, Any],
    policy: str,
    policy_source: str,
    view: str,
    policy_origin: str = "",
    reasons: Sequence[str],
    ran: Sequence[str],
    skipped: Sequence[str],
    cands: Mapping[str, MemoryCandidate],
    considered: Sequence[Mapping[str, Any]],
    dropped: Sequence[Mapping[str, Any]],
    relations: Sequence[Mapping[str, Any]],
    alloc: BudgetAllocation,
    messages: list[dict[str, str]],
    notes: Sequence[str],
    timings: Mapping[str, float],
    counter: TokenCounter,
    check: SignatureCheck | None = None,
    threshold_for: Callable[[str], float] | None = None,
    quoted_layers: Mapping[str, Quote] | None = None,
    quotes: Mapping[str, Quote] | None = None,
) -> AssembledContext:
    """The payload and the trace of one assembly; with a signature `check`
    (require_signature) only verified relationships are shown, and everything the check
    refused is listed as dropped. With `threshold_for` (the policy's per-type confidence
    floor) a relationship below its floor is not shown either."""
    cb = components_of(cb)
    pid = str(request["project_id"])
    layers: dict[str, Any] = {}
    for name in LAYER_ORDER:
        layer = alloc.layers.get(name)
        if layer is None:
            continue
        items = [
            _item(
                i.item.id,
                i.item.source,
                i.item.score,
                i.text,
                i.truncated,
                _quoted_as(name, i.item.id, quoted_layers, quotes),
            )
            for i in layer.included
        ]
        if name == "memory":  # when each was said: what a time decay counts from
            for item in items:
                if (cand := cands.get(item["id"])) is not None:
                    item["said_at"] = cand.said_at
        layers[name] = {
            "tokens": layer.tokens,
            "quota": layer.quota,
            "extra": layer.extra,
            "items": items,
        }
    layers["input"] = {
        "tokens": alloc.input_tokens,
        "items": [_item("input", "user", 1.0, alloc.input_text, False)] if alloc.input_text else [],
    }
    tokens = _layer_tokens(alloc, messages, counter)
    documents: list[dict[str, Any]] = []
    code: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    memory = alloc.layers.get("memory")
    included = [] if memory is None else list(memory.included)
    for inc in included:
        cand = cands[inc.item.id]
        entry = {
            "id": cand.owner_id,
            "type": cand.type,
            "name": cand.name,
            "content": inc.text.split("\n", 1)[1] if "\n" in inc.text else "",
            "score": round(cand.score, 6),
            "strategies": list(cand.strategies),
            "truncated": inc.truncated,
            "said_at": cand.said_at,
        }
        if cand.repo is not None:
            entry["repo"] = cand.repo
        if cand.kind == "event":
            events.append(entry)
        else:
            (code if cand.type in _CODE_TYPES else documents).append(entry)
    ids = [inc.item.id for inc in included]
    relationships: list[dict[str, Any]] = []
    if ids:
        wanted = set(ids)
        # a relation shown joins two included items: each is one going out of one of them
        rels = cb.store.list_relations(
            pid, ids, direction="out", exclude_types=sorted(_ORDER_EDGES)
        )
        if check is not None:
            rels = check.relations(
                [r for r in rels if r.type not in _ORDER_EDGES and {r.from_id, r.to_id} <= wanted]
            )
        for rel in rels:
            if rel.type in _ORDER_EDGES or not {rel.from_id, rel.to_id} <= wanted:
                continue
            if threshold_for is not None and rel.confidence < threshold_for(rel.type):
                continue
            relationships.append(
                {
                    "id": rel.id,
                    "from": rel.from_id,
                    "to": rel.to_id,
                    "type": rel.type,
                    "confidence": rel.confidence,
                    "source": rel.source,
                }
            )
    # A strategy may drop what another one brings in: only what stayed out is "dropped".
    all_dropped = [d for d in dropped if d.get("layer") != "memory" or d["id"] not in cands]
    if check is not None:
        for node_id, (reason, detail) in check.refused.items():
            where = "relations" if node_id in check.refused_relations else "memory"
            all_dropped.append({"id": node_id, "layer": where, "reason": reason, "detail": detail})
    for d in alloc.dropped:
        all_dropped.append(
            {"id": d.item.id, "layer": d.layer, "reason": d.reason, "detail": d.detail}
        )
    candidates = [
        {
            "id": c.owner_id,
            "kind": c.kind,
            "type": c.type,
            "score": round(c.score, 6),
            "strategies": list(c.strategies),
            "reasons": list(c.reasons),
            "explain": c.explain,
            "said_at": c.said_at,
            "included": c.owner_id in set(ids),
        }
        for c in sorted(cands.values(), key=lambda c: -c.score)
    ]
    total = sum(tokens.values())
    memory_ids = [i for i in ids if i in cands]
    trace: dict[str, Any] = {
        "context_id": context_id,
        **request,
        "created_at": time.time(),
        "policy": policy,
        "policy_source": policy_source,
        # file, inline (YAML text or a mapping given to open/Assembler) or preset (shipped)
        "policy_origin": policy_origin,
        "view": view,
        "strategies": list(ran),
        "skipped_strategies": list(skipped),
        "timed_out": bool(skipped),
        "reasons": list(reasons),
        "layers": layers,
        "tokens_by_layer": tokens,
        "total_tokens": total,
        "candidates": candidates,
        "search_considered": list(considered),
        "dropped": all_dropped,
        "relations": list(relations),
        "relationships": relationships,
        "notes": list(notes),
        "timings_ms": dict(timings),
        "monitoring": monitoring(tokens, len(memory_ids), ran, timings),
    }
    return AssembledContext(
        context_id=context_id,
        messages=messages,
        documents=documents,
        code_snippets=code,
        events=events,
        relationships=relationships,
        tokens_by_layer=tokens,
        total_tokens=total,
        max_tokens=int(request["max_tokens"]),
        policy=policy,
        strategies=tuple(ran),
        trace=trace,
    )

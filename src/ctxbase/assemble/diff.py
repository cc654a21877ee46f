"""Differences between two assemblies: the regression tool for changes to context rules.

Run the same request before and after a change of policy, budget or retrieval, and see what
moved: items added to or removed from the prompt, items that changed layer, score changes,
token deltas per layer, items newly dropped, and a unified diff of the rendered prompts.

Traces are plain dicts (as stored in the assembly trace)::

    {
      "context_id": "ctx_123",
      "policy": "coder",
      "strategies": ["referenced_code_first", "recent_window"],
      "layers": {                       # in prompt order
        "system": {"tokens": 40, "items": [
          {"id": "sys", "source": "policy", "score": 1.0, "text": "You are ..."}
        ]},
        "memory": {"tokens": 350, "items": [...]},
      },
      "dropped": [{"id": "doc_7", "reason": "budget"}]
    }

Every key is optional; a missing "tokens" counts as 0, a missing "score" as None. Items are
matched by "id" (the first occurrence wins when an id repeats). Message lists are lists of
{"role": ..., "content": ...} dicts and are compared in order.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "ItemRef",
    "LayerTokenDelta",
    "MessageListDiff",
    "MovedItem",
    "ScoreChange",
    "TraceDiff",
    "TraceFormatError",
    "diff_as_json",
    "diff_messages",
    "diff_traces",
    "render_diff",
    "render_messages",
    "render_prompt",
]


class TraceFormatError(ValueError):
    """A trace does not have the documented shape; names the offending path."""


@dataclass(frozen=True)
class ItemRef:
    id: str
    layer: str
    source: str
    score: float | None
    text: str


@dataclass(frozen=True)
class MovedItem:
    id: str
    from_layer: str
    to_layer: str


@dataclass(frozen=True)
class ScoreChange:
    id: str
    layer: str
    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before


@dataclass(frozen=True)
class LayerTokenDelta:
    layer: str
    before: int
    after: int

    @property
    def delta(self) -> int:
        return self.after - self.before


@dataclass(frozen=True)
class TraceDiff:
    before_id: str
    after_id: str
    policy: tuple[str, str]
    strategies_added: tuple[str, ...]
    strategies_removed: tuple[str, ...]
    added: tuple[ItemRef, ...]
    removed: tuple[ItemRef, ...]
    moved: tuple[MovedItem, ...]
    score_changes: tuple[ScoreChange, ...]
    text_changed: tuple[str, ...]
    tokens: tuple[LayerTokenDelta, ...]
    newly_dropped: tuple[tuple[str, str], ...]  # (id, reason)
    no_longer_dropped: tuple[str, ...]
    prompt_diff: tuple[str, ...]  # unified diff lines of the rendered prompts

    @property
    def total_token_delta(self) -> int:
        return sum(t.delta for t in self.tokens)

    @property
    def is_empty(self) -> bool:
        return not (
            self.policy[0] != self.policy[1]
            or self.strategies_added
            or self.strategies_removed
            or self.added
            or self.removed
            or self.moved
            or self.score_changes
            or self.text_changed
            or any(t.delta for t in self.tokens)
            or self.newly_dropped
            or self.no_longer_dropped
        )


@dataclass(frozen=True)
class MessageListDiff:
    added: tuple[tuple[int, Mapping[str, str]], ...]  # (index in the after list, message)
    removed: tuple[tuple[int, Mapping[str, str]], ...]  # (index in the before list, message)
    unchanged: int
    prompt_diff: tuple[str, ...]

    @property
    def is_empty(self) -> bool:
        return not (self.added or self.removed)


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TraceFormatError(f"{path}: expected a mapping, got {type(value).__name__}")
    return value


def _sequence(value: Any, path: str) -> Sequence[Any]:
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TraceFormatError(f"{path}: expected a list, got {type(value).__name__}")
    return value


def _score(value: Any, path: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TraceFormatError(f"{path}: score must be a number, got {value!r}")
    return float(value)


def _items(trace: Mapping[str, Any], name: str) -> tuple[dict[str, ItemRef], dict[str, int]]:
    """Items by id, in prompt order, and the token count of each layer."""
    layers = _mapping(trace.get("layers"), f"{name}.layers")
    items: dict[str, ItemRef] = {}
    tokens: dict[str, int] = {}
    for layer_name, layer in layers.items():
        layer_path = f"{name}.layers.{layer_name}"
        layer_map = _mapping(layer, layer_path)
        raw_tokens = layer_map.get("tokens", 0)
        if isinstance(raw_tokens, bool) or not isinstance(raw_tokens, int):
            raise TraceFormatError(f"{layer_path}.tokens: expected an integer")
        tokens[str(layer_name)] = raw_tokens
        for index, raw in enumerate(_sequence(layer_map.get("items"), f"{layer_path}.items")):
            item_path = f"{layer_path}.items[{index}]"
            item = _mapping(raw, item_path)
            if "id" not in item:
                raise TraceFormatError(f"{item_path}: missing 'id'")
            item_id = str(item["id"])
            if item_id in items:
                continue
            items[item_id] = ItemRef(
                id=item_id,
                layer=str(layer_name),
                source=str(item.get("source", "")),
                score=_score(item.get("score"), f"{item_path}.score"),
                text=str(item.get("text", "")),
            )
    return items, tokens


def _dropped(trace: Mapping[str, Any], name: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for index, raw in enumerate(_sequence(trace.get("dropped"), f"{name}.dropped")):
        item = _mapping(raw, f"{name}.dropped[{index}]")
        if "id" in item:
            result.setdefault(str(item["id"]), str(item.get("reason", "")))
    return result


def render_prompt(trace: Mapping[str, Any]) -> str:
    """The prompt a trace stands for: each layer's items under a header, in prompt order."""
    lines: list[str] = []
    layers = _mapping(trace.get("layers"), "trace.layers")
    for layer_name, layer in layers.items():
        layer_map = _mapping(layer, f"trace.layers.{layer_name}")
        lines.append(f"## {layer_name}")
        for raw in _sequence(layer_map.get("items"), f"trace.layers.{layer_name}.items"):
            item = _mapping(raw, f"trace.layers.{layer_name}.items[]")
            lines.extend(str(item.get("text", "")).splitlines() or [""])
    return "\n".join(lines)


def render_messages(messages: Sequence[Mapping[str, str]]) -> str:
    lines: list[str] = []
    for message in messages:
        lines.append(f"[{message.get('role', '?')}]")
        lines.extend(str(message.get("content", "")).splitlines() or [""])
    return "\n".join(lines)


def _unified(before: str, after: str, before_name: str, after_name: str) -> tuple[str, ...]:
    return tuple(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), before_name, after_name, lineterm=""
        )
    )


def diff_traces(
    before: Mapping[str, Any], after: Mapping[str, Any], *, score_tolerance: float = 1e-9
) -> TraceDiff:
    """Compare two assembly traces (see the module docstring for their shape)."""
    before = _mapping(before, "before")
    after = _mapping(after, "after")
    items_before, tokens_before = _items(before, "before")
    items_after, tokens_after = _items(after, "after")

    added = tuple(ref for key, ref in items_after.items() if key not in items_before)
    removed = tuple(ref for key, ref in items_before.items() if key not in items_after)
    moved: list[MovedItem] = []
    scores: list[ScoreChange] = []
    text_changed: list[str] = []
    for key, old in items_before.items():
        new = items_after.get(key)
        if new is None:
            continue
        if old.layer != new.layer:
            moved.append(MovedItem(key, old.layer, new.layer))
        score_moved = (old.score is None) != (new.score is None) or (
            old.score is not None
            and new.score is not None
            and abs(old.score - new.score) > score_tolerance
        )
        if score_moved:
            scores.append(ScoreChange(key, new.layer, old.score, new.score))
        if old.text != new.text:
            text_changed.append(key)

    layer_names = list(tokens_before) + [n for n in tokens_after if n not in tokens_before]
    tokens = tuple(
        LayerTokenDelta(n, tokens_before.get(n, 0), tokens_after.get(n, 0)) for n in layer_names
    )

    dropped_before, dropped_after = _dropped(before, "before"), _dropped(after, "after")
    newly_dropped = tuple((k, r) for k, r in dropped_after.items() if k not in dropped_before)
    no_longer = tuple(k for k in dropped_before if k not in dropped_after)

    strategies_before = [str(s) for s in _sequence(before.get("strategies"), "before.strategies")]
    strategies_after = [str(s) for s in _sequence(after.get("strategies"), "after.strategies")]
    before_id = str(before.get("context_id", "before"))
    after_id = str(after.get("context_id", "after"))
    return TraceDiff(
        before_id=before_id,
        after_id=after_id,
        policy=(str(before.get("policy", "")), str(after.get("policy", ""))),
        strategies_added=tuple(s for s in strategies_after if s not in strategies_before),
        strategies_removed=tuple(s for s in strategies_before if s not in strategies_after),
        added=added,
        removed=removed,
        moved=tuple(moved),
        score_changes=tuple(scores),
        text_changed=tuple(text_changed),
        tokens=tokens,
        newly_dropped=newly_dropped,
        no_longer_dropped=no_longer,
        prompt_diff=_unified(render_prompt(before), render_prompt(after), before_id, after_id),
    )


def diff_messages(
    before: Sequence[Mapping[str, str]], after: Sequence[Mapping[str, str]]
) -> MessageListDiff:
    """Compare two prompt message lists in order (a message is its role and content)."""
    keys_before = [(m.get("role", ""), m.get("content", "")) for m in before]
    keys_after = [(m.get("role", ""), m.get("content", "")) for m in after]
    matcher = difflib.SequenceMatcher(a=keys_before, b=keys_after, autojunk=False)
    added: list[tuple[int, Mapping[str, str]]] = []
    removed: list[tuple[int, Mapping[str, str]]] = []
    unchanged = 0
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            unchanged += a1 - a0
            continue
        removed.extend((i, before[i]) for i in range(a0, a1))
        added.extend((j, after[j]) for j in range(b0, b1))
    prompt_diff = _unified(render_messages(before), render_messages(after), "before", "after")
    return MessageListDiff(tuple(added), tuple(removed), unchanged, prompt_diff)


def _short(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _fmt_score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _render_trace_diff(diff: TraceDiff, include_prompt: bool) -> list[str]:
    lines = [f"assembly diff: {diff.before_id} -> {diff.after_id}"]
    if diff.is_empty:
        lines.append("no differences")
        return lines
    if diff.policy[0] != diff.policy[1]:
        lines.append(f"policy: {diff.policy[0]} -> {diff.policy[1]}")
    if diff.strategies_added or diff.strategies_removed:
        added = ", ".join(f"+{s}" for s in diff.strategies_added)
        removed = ", ".join(f"-{s}" for s in diff.strategies_removed)
        lines.append(f"strategies: {', '.join(p for p in (added, removed) if p)}")
    lines.append("tokens per layer:")
    for t in diff.tokens:
        lines.append(f"  {t.layer:<10} {t.before:>6} -> {t.after:>6} ({t.delta:+d})")
    lines.append(f"  {'total':<10} {diff.total_token_delta:+d}")
    for ref in diff.added:
        lines.append(f"+ {ref.id} [{ref.layer}] score {_fmt_score(ref.score)}: {_short(ref.text)}")
    for ref in diff.removed:
        lines.append(f"- {ref.id} [{ref.layer}] score {_fmt_score(ref.score)}: {_short(ref.text)}")
    for m in diff.moved:
        lines.append(f"~ {m.id} moved {m.from_layer} -> {m.to_layer}")
    for s in diff.score_changes:
        delta = "" if s.delta is None else f" ({s.delta:+.3f})"
        lines.append(f"~ {s.id} score {_fmt_score(s.before)} -> {_fmt_score(s.after)}{delta}")
    for item_id in diff.text_changed:
        lines.append(f"~ {item_id} text changed")
    for item_id, reason in diff.newly_dropped:
        lines.append(f"! {item_id} now dropped ({reason})")
    for item_id in diff.no_longer_dropped:
        lines.append(f"! {item_id} no longer dropped")
    if include_prompt and diff.prompt_diff:
        lines.append("prompt:")
        lines.extend(diff.prompt_diff)
    return lines


def _render_message_diff(diff: MessageListDiff, include_prompt: bool) -> list[str]:
    lines = [f"message diff: {len(diff.added)} added, {len(diff.removed)} removed, "]
    lines[0] += f"{diff.unchanged} unchanged"
    for index, message in diff.removed:
        lines.append(
            f"- #{index} [{message.get('role', '?')}] {_short(message.get('content', ''))}"
        )
    for index, message in diff.added:
        lines.append(
            f"+ #{index} [{message.get('role', '?')}] {_short(message.get('content', ''))}"
        )
    if include_prompt and diff.prompt_diff:
        lines.append("prompt:")
        lines.extend(diff.prompt_diff)
    return lines


def render_diff(diff: TraceDiff | MessageListDiff, *, include_prompt: bool = True) -> str:
    """A readable report of a diff, ending with the unified prompt diff unless disabled."""
    if isinstance(diff, TraceDiff):
        return "\n".join(_render_trace_diff(diff, include_prompt))
    return "\n".join(_render_message_diff(diff, include_prompt))


def diff_as_json(diff: TraceDiff) -> dict[str, Any]:
    """A trace diff as JSON (the console's `/contexts/diff`, `ctxbase trace --diff --json`):
    its fields, the total token change, whether it is empty, and each row's delta."""
    out = asdict(diff)
    out["total_token_delta"] = diff.total_token_delta
    out["is_empty"] = diff.is_empty
    rows: tuple[LayerTokenDelta | ScoreChange, ...]
    for key, rows in (("tokens", diff.tokens), ("score_changes", diff.score_changes)):
        out[key] = [{**asdict(r), "delta": r.delta} for r in rows]
    return out

"""A short word on an assembled context an agent cannot tell from the context itself: that
nothing was recalled, or that items were left out or cut for the token budget. Read from
the assembly's trace, so embedded and remote assemblies (whose answer carries the trace)
say the same."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["context_note"]

# Layers that are the request itself, not something recalled for it.
_FRAME = frozenset({"system", "input"})
_SHOWN = 5  # ids named in the note; get_trace lists every one


def context_note(trace: Mapping[str, Any]) -> str | None:
    """ "nothing recalled: ..." or "N item(s) left out for the token budget ...", or None
    when the context holds what was found, whole."""
    layers: Mapping[str, Any] = trace.get("layers") or {}
    max_tokens = trace.get("max_tokens")
    budget = f" of {max_tokens} tokens" if isinstance(max_tokens, int) else ""
    notes: list[str] = []
    recalled = [
        item
        for name, layer in layers.items()
        if name not in _FRAME
        for item in (layer.get("items") or ())
    ]
    left_out: dict[str, str] = {}  # id -> layer, each once
    for dropped in trace.get("dropped") or ():
        if dropped.get("reason") == "budget":
            left_out.setdefault(str(dropped.get("id")), str(dropped.get("layer", "?")))
    if not recalled and not left_out:
        notes.append(
            "nothing recalled: no stored memory, fact, task or conversation matched this "
            "intent (the context holds only the system prompt and the intent)"
        )
    if left_out:
        by_layer: dict[str, int] = {}
        for layer in left_out.values():
            by_layer[layer] = by_layer.get(layer, 0) + 1
        where = ", ".join(f"{n} {layer}" for layer, n in by_layer.items())
        ids = list(left_out)
        named = ", ".join(ids[:_SHOWN]) + (
            f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
        )
        notes.append(
            f"{len(ids)} item(s) left out for the token budget{budget} ({where}: {named}); "
            "a larger max_tokens includes more, get_trace(context_id) lists each"
        )
    cut = sum(1 for item in recalled if item.get("truncated"))
    if cut:
        notes.append(f"{cut} item(s) cut to fit the token budget{budget}")
    return "; ".join(notes) if notes else None

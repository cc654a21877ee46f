"""require_signature in the history layer: each turn an assembly would show is verified as
it was captured (anchor/signing.py signs events as they are stored when the project has a
key). A turn with no signature, or one whose signature does not match, is left out, and the
trace says why: reason "unsigned" or "tampered", layer history. An assistant message goes
with a call it carries that fails (the call's line is in its entry), and a call goes with
its message. The caller's latest input (a user message saying the intent) is exempt: it is
in the prompt as the input whatever is stored. Pure: events and a key in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..anchor.signing import event_verdict
from ..model import Event

__all__ = ["keep_signed"]

_REASONS = {
    "unsigned": ("unsigned", "require_signature: the event carries no signature"),
    "invalid": ("tampered", "its HMAC signature does not match its content"),
}


def keep_signed(
    hist: Sequence[Event],
    held: Mapping[str, str],
    events: Sequence[Event],
    key: bytes,
    intent: str,
) -> tuple[list[Event], dict[str, str], list[dict[str, Any]]]:
    """The turns of `hist` whose events verify, the folded calls (`held`: call -> its
    message) still held, and a history drop for each turn or call left out.

    `events` are the turns as stored (a history entry's text may carry its calls or a
    mark): each is verified as stored."""
    stored = {e.id: e for e in events}
    bad: dict[str, tuple[str, str]] = {}
    for e in hist:
        original = stored.get(e.id, e)
        if original.type == "user_message" and (original.text or "").strip() == intent.strip():
            continue  # the latest input, or the same words asked before
        verdict = event_verdict(original, key)
        if verdict in _REASONS:
            bad[e.id] = _REASONS[verdict]
    for call, message in held.items():
        as_stored = stored.get(call)
        verdict = "unsigned" if as_stored is None else event_verdict(as_stored, key)
        if verdict in _REASONS:
            reason, detail = _REASONS[verdict]
            bad[call] = (reason, detail)
            bad.setdefault(message, (reason, f"its call {call}: {detail}"))
    for call, message in held.items():
        if message in bad and call not in bad:
            bad[call] = (bad[message][0], f"a call of {message}")
    kept = [e for e in hist if e.id not in bad]
    still = {c: m for c, m in held.items() if c not in bad}
    dropped = [
        {"id": i, "layer": "history", "reason": reason, "detail": detail}
        for i, (reason, detail) in bad.items()
    ]
    return kept, still, dropped

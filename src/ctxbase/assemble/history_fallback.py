"""How the history layer falls back under budget pressure (seed 003's rolling window).

"_trim_history里的滑动窗口是从后往前保留消息直到累计token超过预算": the window is taken from
the back. The newest turns stay and the oldest go, and nothing older comes back in a gap a
newer turn left because it was too long. Three rules go with it:

- a tool call and its result stay together: the result is packed with the entry its call
  is in (the assistant message that made it, or the call on its own), whole or not at
  all, never cut in half. A result whose call is outside the window is left out with it
  (`pair_groups`);
- thoughts (`internal_thought`, seed 001's lowest priority) go first: they do not count
  towards `max_messages` and never stop the window. Each fits only after every other turn
  in the window has its place;
- room left over is spent the same way: the budget's pool goes first to the state layer's
  facts, then to memory, then to older turns (budget.REDISTRIBUTION_ORDER).

`rolling_take` is the packing rule (budget.allocate_budget applies it to the `ROLLING`
layers); `window_turns` and `pair_groups` build the turns it packs. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Event
from .history_calls import CALL_TYPE

__all__ = [
    "THOUGHT_TYPE",
    "Packable",
    "pair_groups",
    "rolling_take",
    "window_turns",
]

THOUGHT_TYPE = "internal_thought"


@dataclass(frozen=True)
class Packable:
    """A history item as the rolling window sees it: its key, its cost (overhead
    included), the group it goes with ("" alone) and whether it is an aside (a thought)."""

    key: int
    cost: int
    group: str = ""
    aside: bool = False


def rolling_take(items: Sequence[Packable], room: int) -> tuple[list[int], int | None]:
    """The keys of `items` (newest first) the window takes within `room`: whole units (a
    group's members go with the first of them) from the first, stopping at the first unit
    that does not fit; then the asides that fit, newest first, when every other item was
    taken. Also the key of the item the window stopped at when it stands alone (not
    grouped, not an aside): the one a cut may shorten."""
    units: dict[str, list[Packable]] = {}
    order: list[list[Packable]] = []
    for item in items:
        if item.aside:
            continue
        if item.group:
            if item.group not in units:
                units[item.group] = []
                order.append(units[item.group])
            units[item.group].append(item)
        else:
            order.append([item])
    taken: list[int] = []
    for unit in order:
        cost = sum(i.cost for i in unit)
        if cost > room:
            alone = unit[0].key if len(unit) == 1 and not unit[0].group else None
            return taken, alone
        taken += [i.key for i in unit]
        room -= cost
    for item in items:
        if item.aside and item.cost <= room:
            taken.append(item.key)
            room -= item.cost
    return taken, None


def window_turns(turns: Sequence[Event], max_messages: int) -> tuple[list[Event], list[Event]]:
    """The turns of the window, the newest `max_messages` turns and the thoughts among
    them (a thought is no message), and the older turns before it."""
    counted = 0
    start = len(turns)
    for i in range(len(turns) - 1, -1, -1):
        if turns[i].type == THOUGHT_TYPE:
            continue
        if counted == max_messages:
            break
        counted += 1
        start = i
    if counted < max_messages:
        start = 0
    return list(turns[start:]), list(turns[:start])


def pair_groups(
    turns: Sequence[Event], events: Sequence[Event]
) -> tuple[dict[str, str], list[str]]:
    """Each turn of a call and its result(s) -> its group (the id of the entry holding the
    call), and the results whose call is outside `turns` (left out with it). A result
    without a stored call, or whose call is not among `events`, is a turn of its own."""
    here = {e.id for e in turns}
    calls = {e.id: e for e in events if e.type == CALL_TYPE}
    groups: dict[str, str] = {}
    orphans: list[str] = []
    for e in turns:
        if e.type != "tool_result":
            continue
        call = next((calls[p] for p in e.parent_event_ids if p in calls), None)
        if call is None:
            continue
        # the entry the call is shown in: itself, or the message it was folded into
        holder = call.id if call.id in here else None
        if holder is None:
            holder = next((p for p in call.parent_event_ids if p in here), None)
        if holder is None:
            orphans.append(e.id)
            continue
        groups[e.id] = groups[holder] = holder
    return groups, orphans

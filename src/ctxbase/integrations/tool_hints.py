"""What a tool call's arguments got wrong, said as the tool names them: each problem
(`argument_problem`, all of them at once in `ArgumentsError`), and for an argument the tool
does not take the one it most likely meant: a name other tools and frameworks use for it
(`k` for `top_k`), else the closest spelling. The hint is computed from the name alone, so
it does not depend on what else the call got wrong."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..errors import ValidationError
from ..validation import constraint_words

__all__ = ["ArgumentsError", "argument_problem", "likely_argument"]

# What other tools and frameworks call an argument (LangChain, LlamaIndex and AutoGen say
# `k`; a graph says `node`): the arguments each may mean, the first the tool has wins.
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "k": ("top_k",),
    "n": ("top_k",),
    "limit": ("top_k",),
    "max_results": ("top_k",),
    "node": ("event_ids", "id"),
    "nodes": ("event_ids",),
    "node_id": ("event_ids", "id"),
    "node_ids": ("event_ids",),
    "id": ("event_ids",),
    "ids": ("event_ids",),
    "event_id": ("event_ids", "id"),
    "memory_id": ("event_ids", "id"),
    "rating": ("label",),
    "feedback": ("label",),
    "query": ("intent",),
    "question": ("query", "intent"),
    "role": ("agent_role",),
    "content": ("text",),
    "type": ("event_type", "types"),
    "session": ("session_id",),
    "repo": ("repos",),
}


def likely_argument(name: str, fields: Collection[str], known: Sequence[str]) -> str | None:
    """The argument an unknown `name` most likely means: the first of its synonyms that is
    one of the tool's `fields`, else the closest of `known` (fields and their aliases) by
    spelling, else None."""
    for target in _SYNONYMS.get(name.casefold(), ()):
        if target in fields:
            return target
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return close[0] if close else None


class ArgumentsError(ValidationError):
    """Every problem of a tool call's arguments at once, each named as the tool names the
    argument: (field, message) pairs; `field` is the first one's."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        first, text = problems[0]
        rest = "".join(f"; {field}: {message}" for field, message in problems[1:])
        super().__init__(first, text + rest)


def argument_problem(
    err: Mapping[str, Any], fields: Collection[str], aliases: Mapping[str, str]
) -> tuple[str, str]:
    """(argument, message) for one pydantic error of a tool whose arguments are `fields`,
    also accepted under `aliases`."""
    field = _path(err["loc"]) or "arguments"
    if err["type"] == "yes_or_no_for_a_number":  # raised for the model: the key is in ctx
        field = _path([*err["loc"], err["ctx"]["field"]])
    if (words := constraint_words(err)) is not None:
        return field, words  # a bound, a choice, a blank string: as the library says them
    if err["type"] == "missing":
        return field, "is missing"  # as REST says it
    if err["type"] == "extra_forbidden":
        known = [*fields, *aliases]
        hint = likely_argument(field, fields, known)
        guess = f"; did you mean {hint!r}?" if hint else f" (arguments: {', '.join(known)})"
        return field, f"unknown argument{guess}"
    return field, str(err["msg"])


def _path(loc: Sequence[Any]) -> str:
    """A pydantic location as the library writes a field: `parent_event_ids[0]`, not
    `parent_event_ids.0`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out

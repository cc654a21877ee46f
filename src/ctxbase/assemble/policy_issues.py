"""Policy file problems: each with its YAML path and, for a misspelt name, the closest valid one.

Pydantic reports a location (`policies.0.strategies.1.semantic_recall.top_kk`) and an error
kind; this turns them into what the file says (`policies[0].strategies[1].top_kk: unknown
key 'top_kk' (did you mean 'top_k'?)`). The models are walked from the document's root model,
given by the caller, so this module needs nothing of the policies themselves.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel

from ..errors import CtxbaseError

__all__ = [
    "SYNONYMS",
    "PolicyError",
    "PolicyIssue",
    "as_written",
    "closest",
    "issue_from_error",
]


@dataclass(frozen=True)
class PolicyIssue:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class PolicyError(CtxbaseError, ValueError):
    """The policy file is unreadable or invalid; lists every problem with its YAML path."""

    code = "invalid_policy"

    def __init__(self, source: str, issues: Sequence[PolicyIssue]) -> None:
        self.source = source
        self.issues = tuple(issues)
        if len(self.issues) == 1:
            text = f"{source}: {self.issues[0]}"
        else:
            lines = "\n".join(f"  {issue}" for issue in self.issues)
            text = f"{source}: {len(self.issues)} problems:\n{lines}"
        super().__init__(text)


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _union_members(tp: Any) -> tuple[Any, ...]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return tuple(_strip_annotated(a) for a in typing.get_args(tp))
    return ()


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _walk_loc(root: Any, loc: Sequence[int | str]) -> tuple[str, Any]:
    """Turn a pydantic error location into a YAML path, and find the type found there.

    Discriminated unions put the tag in the location (`strategies.0.recent_window.x`); the
    YAML has no such level, so it is consumed here instead of printed.
    """
    tp: Any = root
    path = ""
    for part in loc:
        tp = _strip_annotated(tp)
        members = _union_members(tp)
        if isinstance(part, str) and members:
            tagged = [m for m in members if _is_model(m) and _tag_of(m) == part]
            if tagged:
                tp = tagged[0]
                continue
            non_none = [m for m in members if m is not type(None)]
            tp = non_none[0] if len(non_none) == 1 else None
            tp = _strip_annotated(tp)
        if isinstance(part, int):
            path += f"[{part}]"
            args = typing.get_args(tp)
            tp = args[0] if args else None
        elif _is_model(tp):
            path += f".{part}" if path else part
            field = tp.model_fields.get(part)
            tp = field.annotation if field is not None else None
        else:
            path += f".{part}" if path else str(part)
            args = typing.get_args(tp)
            tp = args[-1] if typing.get_origin(tp) is dict and args else None
    return path, _strip_annotated(tp)


def _tag_of(model: Any) -> str | None:
    field = model.model_fields.get("name")
    default = getattr(field, "default", None)
    return default if isinstance(default, str) else None


def closest(word: str, options: Sequence[str] | Mapping[str, str]) -> str | None:
    """The option `word` most likely misspells, or None: close to a whole name, else to one
    of its words ("rolee" -> "agent_roles"). A mapping's keys are matched, its value named."""
    named = options if isinstance(options, Mapping) else {o: o for o in options}
    close = difflib.get_close_matches(word, list(named), n=1, cutoff=0.6)
    if close:
        return named[close[0]]
    by_word: dict[str, str] = {}
    for option in named:
        for part in option.split("_"):
            if len(part) >= 3:
                by_word.setdefault(part, named[option])
    close = difflib.get_close_matches(word, list(by_word), n=1, cutoff=0.75)
    return by_word[close[0]] if close else None


def _did_you_mean(found: str | None) -> str:
    return f" (did you mean {found!r}?)" if found else ""


_CHUNKING = (
    "chunking is set where text is stored, not in a policy: ctxbase.open(..., "
    "chunking={'max_tokens': 256, 'overlap_tokens': 64}) or --chunk-tokens/--chunk-overlap"
)
_VECTORS = "the vector size is the embedder's: ctxbase.open(..., embedder=...)"
_POLICY = ", a key of the policy itself beside 'strategies'"
_WINDOW = " of the recent_window strategy"
# Other tools' and the seed articles' words for what a key does here (seed 002's "相似度阈值
# 0.78", "TopK 动态 3-7", "块大小 256"): key -> (the key meant, where it goes when not at
# the level written, what its value is), or ("", why it is no policy key). Spelling
# similarity would suggest a key that does something else (`similarity_threshold` ->
# `relation_thresholds`).
SYNONYMS: dict[str, tuple[str, str, str]] = {
    "similarity_threshold": ("relevance_floor", _POLICY, ""),
    "similarity_floor": ("relevance_floor", _POLICY, ""),
    "score_threshold": ("relevance_floor", _POLICY, ""),
    "min_similarity": ("relevance_floor", _POLICY, ""),
    "top_k_range": ("dynamic_top_k", _POLICY, ", as [min, max]"),
    "topk_range": ("dynamic_top_k", _POLICY, ", as [min, max]"),
    "dynamic_k": ("dynamic_top_k", _POLICY, ", as [min, max]"),
    "k_range": ("dynamic_top_k", _POLICY, ", as [min, max]"),
    "token_allowance": ("memory_token_allowance", _POLICY, ", with dynamic_top_k"),
    "max_injected_tokens": ("memory_token_allowance", _POLICY, ", with dynamic_top_k"),
    "token_budget": ("max_tokens", _POLICY, ""),
    "max_context_tokens": ("max_tokens", _POLICY, ""),
    "window_size": ("max_messages", _WINDOW, ""),
    "chunk_size": ("", _CHUNKING, ""),
    "chunk_overlap": ("", _CHUNKING, ""),
    "index_dimension": ("", _VECTORS, ""),
    "embedding_dim": ("", _VECTORS, ""),
}


def _synonym_hint(key: str, valid: Sequence[str]) -> str | None:
    """The hint for a word other tools use (SYNONYMS), or None."""
    meant = SYNONYMS.get(key.casefold())
    if meant is None:
        return None
    target, where, value = meant
    if not target:
        return f" ({where})"
    return f" (did you mean {target!r}{'' if target in valid else where}{value}?)"


def _nested_keys(model: Any) -> dict[str, str]:
    """The keys one level down (`agent_roles` -> `match.agent_roles`): a key written a level
    too high is suggested where it belongs."""
    out: dict[str, str] = {}
    for name in sorted(model.model_fields):
        inner = _strip_annotated(model.model_fields[name].annotation)
        for sub in sorted(inner.model_fields) if _is_model(inner) else ():
            out.setdefault(sub, f"{name}.{sub}")
    return out


def issue_from_error(error: Any, root: Any, strategy_names: Sequence[str]) -> PolicyIssue:
    """One pydantic error of validating `root` (the document's model) as a PolicyIssue."""
    loc: tuple[int | str, ...] = tuple(error.get("loc", ()))
    kind = error.get("type", "")
    names = ", ".join(strategy_names)
    if kind == "extra_forbidden" and loc:
        key = str(loc[-1])
        path, _ = _walk_loc(root, loc)
        _, parent = _walk_loc(root, loc[:-1])
        valid = sorted(parent.model_fields) if _is_model(parent) else []
        listing = f"; valid keys: {', '.join(valid)}" if valid else ""
        hint = _synonym_hint(key, valid)
        if hint is not None:
            return PolicyIssue(path, f"unknown key {key!r}{hint}{listing}")
        nested = _nested_keys(parent) if _is_model(parent) else {}
        # a key of the level below, written here, is named where it belongs before any
        # spelling of this level's keys: `default` -> `match.default`
        found = nested.get(key) or closest(key, valid)
        if found is None and valid:
            found = closest(key, nested)
        return PolicyIssue(path, f"unknown key {key!r}{_did_you_mean(found)}{listing}")
    path, _ = _walk_loc(root, loc)
    if kind == "union_tag_invalid":
        tag = str(error.get("ctx", {}).get("tag", ""))
        hint = _did_you_mean(closest(tag, strategy_names))
        return PolicyIssue(path, f"unknown strategy {tag!r}{hint}; valid strategies: {names}")
    if kind == "union_tag_not_found":
        return PolicyIssue(path, f"strategy needs a 'name'; valid strategies: {names}")
    if kind == "yes_or_no_for_a_number":  # raised for its model: the key is in ctx
        key = str(error.get("ctx", {}).get("field", ""))
        return PolicyIssue(f"{path}.{key}" if path else key, str(error.get("msg")))
    message = str(error.get("msg", "invalid value"))
    message = message.removeprefix("Value error, ")
    _, expected = _walk_loc(root, loc)
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        keys = (
            f" with the keys {', '.join(sorted(expected.model_fields))}"
            if _is_model(expected)
            else ""
        )
        message = f"must be a mapping (key: value){keys}"
    elif kind in ("tuple_type", "list_type"):
        message = "must be a list, such as [a, b]"
    elif kind == "too_short":
        message = f"must list at least {error.get('ctx', {}).get('min_length', 1)} items"
    value = error.get("input")
    if (
        isinstance(value, str | int | float | bool)
        and kind != "missing"
        and repr(value) not in message
    ):
        message += f" (got {value!r})"
    return PolicyIssue(path, message)


_SHORT_FORM = re.compile(r"policies\[(\d+)\]\.strategies\[0\]")


def as_written(issue: PolicyIssue, data: Any) -> PolicyIssue:
    """The issue located as the file has it: a policy written in the short form (`strategy:
    x` + `parameters:`) is validated as a one-item `strategies` list, so an issue found there
    is named at `strategy` (the name) or `parameters` (the rest), keys the file holds."""
    m = _SHORT_FORM.match(issue.path)
    policies = data.get("policies") if isinstance(data, dict) else None
    if m is None or not isinstance(policies, list) or int(m.group(1)) >= len(policies):
        return issue
    policy = policies[int(m.group(1))]
    if not isinstance(policy, dict) or "strategy" not in policy or "strategies" in policy:
        return issue
    rest = issue.path[m.end() :]
    key = rest[1:].split(".")[0].split("[")[0]
    where = ".strategy" if not rest else rest if key in policy else ".parameters" + rest
    return PolicyIssue(f"policies[{m.group(1)}]{where}", issue.message)

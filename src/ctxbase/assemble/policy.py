"""Assembly policies: which context an agent gets, decided by a YAML file instead of code.

A policy matches a request on its project (glob), the agent's role and the intent (regular
expressions or plain keywords, Chinese or English), has a priority, and lists strategies that
each trigger on their own condition (a referential word such as "刚才" or "that SQL", an error
word, the agent being one of a consensus group...). It also fixes per-relation-type confidence
thresholds, top_k, the token shares of the prompt layers, the view (by default the current
task plus session-wide facts; planners opt in to every task's, executors see only their
subtask's), the token budget and the assembly time limit.

File shape::

    version: 1
    policies:
      - name: coder
        priority: 10
        match: {project_id: "*", agent_roles: [coder, code_gen], intent_keywords: [接口, API]}
        strategies:
          - {name: referenced_code_first, max_items: 5}
          - {name: recent_window, max_messages: 12}
        relation_thresholds: {REFERENCES: 0.85}
        budget: {system: 0.1, state: 0.2, task: 0.1, history: 0.4, latest: 0.2}
        view: subtask
      - name: default
        match: {default: true}

The one-strategy form ``strategy: <name>`` with ``parameters: {...}`` is accepted too, as is
the strategy's parameters written beside ``strategy:`` (``fallback_depth: 3``).
Validation errors name the file, the YAML path (``policies[2].strategies[0].agents``) and the
problem, with the closest valid key or strategy name when a name is misspelt. The strategies'
parameters and trigger conditions are in policy_strategies.py (imported from here as well).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .budget import listed_shares
from .policy_issues import PolicyError, PolicyIssue
from .policy_strategies import (
    DEFAULT_ERROR_TRIGGERS,
    DEFAULT_REFERENCE_TRIGGERS,
    DEFAULT_SEARCH,
    DEFAULT_SEARCH_PRESET,
    STRATEGY_CLASSES,
    STRATEGY_NAMES,
    ErrorDrivenRepair,
    Frozen,
    MultiAgentConsensus,
    ProjectScopeFallback,
    RecentWindow,
    ReferencedCodeFirst,
    SelectionRequest,
    SemanticRecall,
    Strategy,
    Words,
    find_word,
    strategy_defaults,
)

__all__ = [
    "BUDGET_PROFILES",
    "BUILTIN_DEFAULT_POLICY",
    "DEFAULT_ERROR_TRIGGERS",
    "DEFAULT_POLICIES_PATH",
    "DEFAULT_REFERENCE_TRIGGERS",
    "DEFAULT_RELATION_THRESHOLDS",
    "DEFAULT_SEARCH",
    "DEFAULT_SEARCH_PRESET",
    "ONE_STRATEGY_COMPANIONS",
    "STRATEGY_NAMES",
    "ErrorDrivenRepair",
    "LayerShares",
    "MultiAgentConsensus",
    "Origin",
    "Policy",
    "PolicyDocument",
    "PolicyError",
    "PolicyIssue",
    "PolicyMatch",
    "PolicySelection",
    "PolicySet",
    "ProjectScopeFallback",
    "RecentWindow",
    "ReferencedCodeFirst",
    "SelectionRequest",
    "SemanticRecall",
    "Strategy",
    "strategy_defaults",
]

DEFAULT_POLICIES_PATH = Path(__file__).resolve().parent.parent / "presets" / "policies.yaml"

# Referential edges must be surer than ordering edges: a wrong REFERENCES edge injects an
# unrelated document, a wrong FOLLOWS edge only reorders history.
DEFAULT_RELATION_THRESHOLDS: dict[str, float] = {
    "REFERENCES": 0.85,
    "MODIFIES": 0.7,
    "VALIDATES": 0.7,
    "FOLLOWS": 0.6,
    "GENERATES": 0.6,
}

_REL_TYPE_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")


_LAYER_DEFAULTS = {"system": 0.10, "state": 0.20, "task": 0.10, "memory": 0.0, "history": 0.40}
_LATEST_DEFAULT = 0.20


class LayerShares(Frozen):
    """Fractions of the budget per prompt layer; the default is seed 003's split.

    system 10 %, state 20 %, task 10 %, history 40 %, and 20 % kept for the latest user
    input (`latest`): the input is never cut, and when it is longer than its share the
    other layers shrink in proportion. Retrieved memory has no share of its own by default:
    it gets every token the other layers leave unused (memory is first in line for them).
    The "memory_heavy" profile gives memory 40 % instead (see BUDGET_PROFILES).

    Without `latest`, a mapping keeps 20 % for the input only where its other shares leave
    room (a file whose shares add up to 1.0 reserves nothing, as before `latest` existed).
    """

    system: float = Field(default=_LAYER_DEFAULTS["system"], ge=0.0, le=1.0)
    state: float = Field(default=_LAYER_DEFAULTS["state"], ge=0.0, le=1.0)
    task: float = Field(default=_LAYER_DEFAULTS["task"], ge=0.0, le=1.0)
    memory: float = Field(default=_LAYER_DEFAULTS["memory"], ge=0.0, le=1.0)
    history: float = Field(default=_LAYER_DEFAULTS["history"], ge=0.0, le=1.0)
    latest: float = Field(default=_LATEST_DEFAULT, ge=0.0, lt=1.0)

    @model_validator(mode="before")
    @classmethod
    def _latest_where_room(cls, data: Any) -> Any:
        if isinstance(data, dict) and "latest" not in data:
            others = 0.0
            for name, default in _LAYER_DEFAULTS.items():
                value = data.get(name, default)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    others += float(value)
            data = {**data, "latest": round(max(0.0, min(_LATEST_DEFAULT, 1.0 - others)), 9)}
        return data

    @model_validator(mode="after")
    def _sum_at_most_one(self) -> LayerShares:
        layers = self.system + self.state + self.task + self.memory + self.history
        total = layers + self.latest
        if total > 1.0 + 1e-9:
            raise ValueError(f"layer shares add up to {total:.3f}: {self._sum_parts()}")
        if layers <= 0.0:
            raise ValueError("at least one layer share must be above 0")
        return self

    def _sum_parts(self) -> str:
        """What the sum is made of: the shares written, the defaults of the layers left out
        (which count too, so a file writing 1.4 in all is told why it is 2.1) and the
        latest input's reserve."""
        values = self.as_mapping()
        written = [n for n in _LAYER_DEFAULTS if n in self.model_fields_set]
        defaults = [n for n in _LAYER_DEFAULTS if n not in written and values[n] > 0]

        def listed(names: list[str]) -> str:
            return listed_shares({n: values[n] for n in names})

        parts = [f"{listed(written)} as written"] if written else []
        if defaults:
            parts.append(f"the defaults of the layers not written: {listed(defaults)}")
        if self.latest > 0:
            parts.append(f"{self.latest:g} kept for the latest input (`latest`)")
        hint = "; write 0 for a layer that should have no share" if defaults else ""
        return f"{', plus '.join(parts)}; they must not exceed 1.0{hint}"

    def as_mapping(self) -> dict[str, float]:
        """The layers' shares (the latest input's reserve is `latest`)."""
        return {
            "system": self.system,
            "state": self.state,
            "task": self.task,
            "memory": self.memory,
            "history": self.history,
        }


# Named budget profiles: `budget: memory_heavy` in a policy file.
BUDGET_PROFILES: dict[str, LayerShares] = {
    "context_mode": LayerShares(),
    "memory_heavy": LayerShares(
        system=0.10, state=0.20, task=0.10, memory=0.40, history=0.20, latest=0.0
    ),
}


class PolicyMatch(Frozen):
    """When a policy applies. Empty lists mean "any"; `default: true` marks the catch-all."""

    project_id: str = "*"
    agent_roles: Words = ()
    intent_patterns: Words = ()
    intent_keywords: Words = ()
    default: bool = False

    @field_validator("intent_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        return patterns

    def explain(self, request: SelectionRequest) -> list[str] | None:
        """The reasons this match holds for `request`, or None when it does not."""
        why: list[str] = []
        if not fnmatch.fnmatchcase(request.project_id, self.project_id):
            return None
        if self.project_id != "*":
            why.append(f"project {request.project_id!r} matches {self.project_id!r}")
        if self.agent_roles:
            roles = {r.casefold() for r in self.agent_roles}
            if request.agent_role.casefold() not in roles:
                return None
            why.append(f"role {request.agent_role!r} in [{', '.join(self.agent_roles)}]")
        if self.intent_patterns or self.intent_keywords:
            hit = self._intent_hit(request.intent)
            if hit is None:
                return None
            why.append(hit)
        return why

    def _intent_hit(self, intent: str) -> str | None:
        for pattern in self.intent_patterns:
            found = re.search(pattern, intent, flags=re.IGNORECASE)
            if found:
                return f"intent matches /{pattern}/ at {found.group(0)!r}"
        word = find_word(intent, self.intent_keywords)
        return None if word is None else f"intent contains keyword {word!r}"

    def specificity(self) -> int:
        return (
            int(self.project_id != "*")
            + int(bool(self.agent_roles))
            + int(bool(self.intent_patterns or self.intent_keywords))
        )


# What a policy written in the one-strategy form (`strategy: X`) runs beside X, each when
# its trigger fires (multi_agent_consensus needs its agents, so only as X).
ONE_STRATEGY_COMPANIONS = (
    "referenced_code_first",
    "error_driven_repair",
    "semantic_recall",
    "project_scope_fallback",
    "recent_window",
)


def _default_strategies() -> tuple[Strategy, ...]:
    return (RecentWindow(), SemanticRecall())


class Policy(Frozen):
    """One named policy: when it applies and how the context is assembled under it."""

    name: str = Field(min_length=1)
    description: str = ""
    match: PolicyMatch = PolicyMatch()
    priority: int = 0
    strategies: tuple[Strategy, ...] = Field(default_factory=_default_strategies)
    relation_thresholds: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_RELATION_THRESHOLDS)
    )
    default_relation_threshold: float = Field(default=0.7, ge=0.0, le=1.0)
    top_k: int = Field(default=5, ge=1, le=200)
    # cosine similarity at which a hit is about the question by meaning alone; None: the
    # embedder's calibrated floor (retrieve/relevance.py). A search with no hit that matches
    # a keyword or clears the floor brings nothing into the context.
    relevance_floor: float | None = Field(default=None, ge=0.0, le=1.0)
    # halve a memory's score every this many days of age in this policy's searches (None:
    # the search preset's own setting)
    time_decay_half_life_days: float | None = Field(default=None, gt=0)
    # seed 002's dynamic top-k: semantic recall keeps between min and max hits, stopping
    # past min at a weak score or at `memory_token_allowance` tokens (e.g. [3, 7] and 1500)
    dynamic_top_k: tuple[int, int] | None = None
    memory_token_allowance: int | None = Field(default=None, ge=1)

    @field_validator("dynamic_top_k")
    @classmethod
    def _k_range(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
        if value is not None and not 1 <= value[0] <= value[1]:
            raise ValueError("dynamic_top_k must be [min, max] with 1 <= min <= max")
        return value

    budget: LayerShares = LayerShares()
    # task: the current task's state plus session- and project-wide facts (seed 003: state is
    # bound to its task, so another task's facts never leak in); global: every task's facts
    # too, opt-in per role (planners); subtask: only the current task's.
    view: Literal["task", "global", "subtask"] = "task"
    # project: memory shared by the project's sessions; user: the asking user's sessions
    # and knowledge of no session only (no 串台 between users; assemble/user_scope.py)
    memory_scope: Literal["project", "user"] = "project"
    max_tokens: int = Field(default=3000, ge=64)
    assemble_timeout_ms: int = Field(default=2000, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _one_strategy_form(cls, data: Any) -> Any:
        # The short form `strategy: x` + `parameters: {...}` becomes a one-item list. The
        # strategy's own parameters may also sit beside `strategy:` (seed 000's table:
        # `strategy: project_scope_fallback` + `fallback_depth: 3`); a key that is also a
        # policy field (top_k, max_tokens) stays the policy's.
        if isinstance(data, dict) and "strategy" in data:
            if "strategies" in data:
                raise ValueError("give either 'strategy' (+ 'parameters') or 'strategies'")
            data = dict(data)
            name = data.pop("strategy")
            params = data.pop("parameters", None) or {}
            if not isinstance(params, dict):
                raise ValueError("'parameters' must be a mapping")
            params = dict(params)
            own = STRATEGY_CLASSES.get(name) if isinstance(name, str) else None
            own_keys = set(own.model_fields) - {"name"} if own is not None else set()
            for key in [k for k in data if k in own_keys and k not in cls.model_fields]:
                if key in params:
                    raise ValueError(f"{key!r} is given beside 'strategy' and in 'parameters'")
                params[key] = data.pop(key)
            # Seed 000 picks a strategy by its trigger (its table: "刚才" -> referenced_code_first,
            # an error -> error_driven_repair) and gives a policy one: that one leads, and the
            # others run at their defaults when their own trigger fires, so a policy of
            # `multi_agent_consensus` alone still recalls, keeps the history and repairs.
            # `strategies: [...]` lists exactly what may run.
            rest = [{"name": n} for n in ONE_STRATEGY_COMPANIONS if n != name]
            data["strategies"] = [{"name": name, **params}, *rest]
        return data

    @field_validator("budget", mode="before")
    @classmethod
    def _budget_profile(cls, value: Any) -> Any:
        # `budget: memory_heavy` names a profile; a mapping gives the shares.
        if isinstance(value, str):
            if value not in BUDGET_PROFILES:
                names = ", ".join(BUDGET_PROFILES)
                raise ValueError(f"unknown budget profile {value!r}; valid: {names}")
            return BUDGET_PROFILES[value]
        return value

    @field_validator("relation_thresholds", mode="before")
    @classmethod
    def _merge_thresholds(cls, value: Any) -> Any:
        # A file that tunes one relation type keeps the defaults of the others.
        if isinstance(value, dict):
            return {**DEFAULT_RELATION_THRESHOLDS, **value}
        return value

    @field_validator("relation_thresholds")
    @classmethod
    def _thresholds_valid(cls, value: dict[str, float]) -> dict[str, float]:
        for rel_type, threshold in value.items():
            if not _REL_TYPE_RE.match(rel_type):
                raise ValueError(f"relation types are UPPER_SNAKE_CASE (got {rel_type!r})")
            if not 0.0 <= threshold <= 1.0:
                raise ValueError(f"threshold of {rel_type} must be in [0, 1] (got {threshold})")
        return value

    @field_validator("strategies", mode="before")
    @classmethod
    def _bare_names(cls, value: Any) -> Any:
        # `strategies: [recent_window, semantic_recall]`: a name alone is the strategy with
        # its defaults (a misspelt one is then named as an unknown strategy)
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list | tuple):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("strategies")
    @classmethod
    def _strategies_unique(cls, value: tuple[Strategy, ...]) -> tuple[Strategy, ...]:
        names = [s.name for s in value]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"strategy listed more than once: {', '.join(repeated)}")
        return value

    @model_validator(mode="after")
    def _allowance_with_range(self) -> Policy:
        if self.memory_token_allowance is not None and self.dynamic_top_k is None:
            raise ValueError(
                "memory_token_allowance works with dynamic_top_k: semantic recall keeps "
                "[min, max] hits and stops past min at the allowance; set dynamic_top_k: "
                "[min, max] too (seed 002: [3, 7]), or cap memory with budget shares"
            )
        return self

    @model_validator(mode="after")
    def _recall_depth(self) -> Policy:
        # A semantic_recall strategy's own `top_k` is its search's depth; one that sets none
        # takes the policy's `top_k` (filled in here, so the trace shows the value searched).
        filled = tuple(
            s.model_copy(update={"top_k": self.top_k})
            if isinstance(s, SemanticRecall) and "top_k" not in s.model_fields_set
            else s
            for s in self.strategies
        )
        if filled != self.strategies:
            object.__setattr__(self, "strategies", filled)  # frozen: set once, while validated
        return self

    def threshold_for(self, relation_type: str) -> float:
        return self.relation_thresholds.get(relation_type, self.default_relation_threshold)

    def strategy(self, name: str) -> Strategy | None:
        return next((s for s in self.strategies if s.name == name), None)


BUILTIN_DEFAULT_POLICY = Policy(name="builtin_default", match=PolicyMatch(default=True))


class PolicyDocument(Frozen):
    """The whole YAML file."""

    version: Literal[1] = 1
    # true: the file is layered over the shipped presets (a request none of the file's
    # policies matches is matched against the presets' before the default); false: the
    # file replaces them
    inherit_presets: bool = True
    policies: tuple[Policy, ...]

    @model_validator(mode="after")
    def _names_and_default(self) -> PolicyDocument:
        if not self.policies:
            raise ValueError("'policies' must list at least one policy")
        names = [p.name for p in self.policies]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"policy names must be unique; repeated: {', '.join(repeated)}")
        defaults = [p.name for p in self.policies if p.match.default]
        if len(defaults) > 1:
            raise ValueError(f"only one policy may be the default; found: {', '.join(defaults)}")
        return self


# Where policies come from: a file, YAML text or a mapping given inline, the shipped presets.
Origin = Literal["file", "inline", "preset"]


@dataclass(frozen=True)
class PolicySelection:
    """The chosen policy, the strategies that triggered, and why (for the assembly trace)."""

    policy: Policy
    strategies: tuple[Strategy, ...]
    reasons: tuple[str, ...]
    # set when no policy names the role: a typo'd role would otherwise pass unseen
    role_note: str | None = None
    # where the chosen policy is defined: the user's file or inline text, or the shipped
    # presets' file; `origin` says which kind
    source: str = ""
    origin: Origin = "inline"

    @property
    def strategy_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.strategies)


def _ranked(
    policies: Sequence[Policy], request: SelectionRequest
) -> list[tuple[int, int, int, Policy, list[str]]]:
    """The policies that match, best first: priority, then specificity, then file order."""
    found = []
    for index, policy in enumerate(policies):
        why = policy.match.explain(request)
        if why is not None:
            found.append((policy.priority, policy.match.specificity(), -index, policy, why))
    return sorted(found, key=lambda c: c[:3], reverse=True)


@dataclass(frozen=True)
class PolicySet:
    """The loaded policies plus the catch-all used when none matches. With `presets` (a
    user file layered over the shipped policies), a request none of `policies` matches is
    matched against the presets' before it falls to `default`."""

    policies: tuple[Policy, ...]
    default: Policy
    source: str = "<built-in>"
    presets: tuple[Policy, ...] = ()
    origin: Origin = "inline"  # of `policies` (and of `default`, unless `default_is_preset`)
    # where `presets` (and `default`, when `default_is_preset`) come from
    presets_source: str = ""
    default_is_preset: bool = False

    @classmethod
    def from_document(
        cls, document: PolicyDocument, source: str = "inline YAML", origin: Origin = "inline"
    ) -> PolicySet:
        default = next((p for p in document.policies if p.match.default), None)
        others = tuple(p for p in document.policies if not p.match.default)
        default = default or BUILTIN_DEFAULT_POLICY
        return cls(policies=others, default=default, source=source, origin=origin)

    def get(self, name: str) -> Policy | None:
        if self.default.name == name:
            return self.default
        return next((p for p in (*self.policies, *self.presets) if p.name == name), None)

    def roles(self) -> tuple[str, ...]:
        """Every role a policy (or a shipped preset, or the default) names in its match,
        sorted."""
        every = (*self.policies, *self.presets, self.default)
        return tuple(sorted({r for p in every for r in p.match.agent_roles}))

    def select(
        self, project_id: str, agent_role: str, intent: str, *, has_error: bool = False
    ) -> PolicySelection:
        """Pick the matching policy with the highest priority (then the most specific match,
        then the first in the file; the presets only when none of the file's matches) and
        evaluate its strategies' triggers."""
        request = SelectionRequest(project_id, agent_role, intent, has_error)
        candidates, layer = _ranked(self.policies, request), ""
        if not candidates and self.presets:
            candidates = _ranked(self.presets, request)
            layer = "shipped preset, " if candidates else ""
        reasons: list[str] = []
        role_note: str | None = None
        # a preset chosen, or the presets' default (not the file's own default)
        from_presets = bool(layer) or (not candidates and self.default_is_preset)
        source = self.presets_source if from_presets and self.presets_source else self.source
        origin: Origin = "preset" if from_presets else self.origin
        if candidates:
            _, _, _, chosen, why = candidates[0]
            detail = "; ".join(why) if why else "matches any project, role and intent"
            reasons.append(f"policy {chosen.name!r} ({layer}priority {chosen.priority}): {detail}")
            for priority, _, _, other, _ in candidates[1:]:
                reasons.append(f"also matched {other.name!r} (priority {priority}), ranked lower")
        else:
            chosen = self.default
            reasons.append(
                f"no policy matched project {project_id!r}, role {agent_role!r}; "
                f"using default {chosen.name!r}"
            )
            roles = self.roles()
            if agent_role.casefold() not in {r.casefold() for r in roles}:
                role_note = (
                    f"no policy is for role {agent_role!r}, so the default policy was used "
                    f"(roles with a policy: {', '.join(roles) or 'none'})"
                )
        triggered: list[Strategy] = []
        for strategy in chosen.strategies:
            if not strategy.enabled:
                reasons.append(f"{strategy.name}: disabled")
                continue
            reason = (
                strategy.recall_reason(request, chosen.dynamic_top_k, chosen.memory_token_allowance)
                if isinstance(strategy, SemanticRecall)
                else strategy.trigger_reason(request)
            )
            if reason is None:
                reasons.append(f"{strategy.name}: not triggered")
            else:
                triggered.append(strategy)
                reasons.append(reason)
        return PolicySelection(chosen, tuple(triggered), tuple(reasons), role_note, source, origin)

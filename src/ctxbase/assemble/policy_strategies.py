"""The strategies an assembly policy lists (policy.py): each one's parameters, as a policy
file writes them, and the condition it triggers on (`trigger_reason`): a referential word
such as "刚才" or "that SQL", an error word, the agent being one of a consensus group. How
each finds its candidates is strategies.py's.

Also the vocabulary the policy models share with them: the frozen model base, the request
matched (`SelectionRequest`) and the word lists (`Words`, `find_word`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..errors import ValidationError
from ..validation import yes_or_no_for_a_number
from .policy_issues import closest

__all__ = [
    "DEFAULT_ERROR_TRIGGERS",
    "DEFAULT_REFERENCE_TRIGGERS",
    "DEFAULT_SEARCH",
    "DEFAULT_SEARCH_PRESET",
    "STRATEGY_CLASSES",
    "STRATEGY_NAMES",
    "ErrorDrivenRepair",
    "Frozen",
    "MultiAgentConsensus",
    "ProjectScopeFallback",
    "RecentWindow",
    "ReferencedCodeFirst",
    "SelectionRequest",
    "SemanticRecall",
    "Strategy",
    "Words",
    "find_word",
    "strategy_defaults",
]

# Words that point back at something said or produced before; they make the referenced
# entities worth more than whatever merely looks similar.
DEFAULT_REFERENCE_TRIGGERS: tuple[str, ...] = (
    "刚才",
    "刚刚",
    # "刚写的接口", "刚生成的代码": 刚 + a verb of making points back as surely as 刚才.
    "刚写",
    "刚生成",
    "刚改",
    "刚加",
    "刚做",
    "上一个",
    "上个",
    "上次",
    "上份",
    "之前",
    "前面",
    "参考",
    "那个",
    "那段",
    "the previous",
    "previous",
    "last time",
    "the last one",
    "that sql",
    "that query",
    "that function",
    "that file",
    "earlier",
    "as before",
)

# Words that say something failed; they pull in test cases and their logs.
DEFAULT_ERROR_TRIGGERS: tuple[str, ...] = (
    "报错",
    "错误",
    "失败",
    "没生效",
    "不生效",
    "异常",
    "崩溃",
    "不工作",
    "修复",
    "error",
    "exception",
    "traceback",
    "failed",
    "failing",
    "fails",
    "broken",
    "doesn't work",
    "not working",
    "bug",
)


# the pydantic error type of a yes/no given for a number (policy_issues names its key)
YES_OR_NO_FOR_A_NUMBER = "yes_or_no_for_a_number"


class Frozen(BaseModel):
    """A policy file's model: immutable, and an unknown key is an error; so is a yes/no
    where a number belongs (YAML reads `on`, `yes` and `true` as True, which pydantic would
    take as 1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_yes_or_no_for_a_number(cls, data: Any) -> Any:
        if (name := yes_or_no_for_a_number(cls.model_fields, data)) is not None:
            raise PydanticCustomError(
                YES_OR_NO_FOR_A_NUMBER,
                f"must be a number (got {str(data[name]).lower()}: YAML reads yes, on and "
                "true, no, off and false as a yes/no value)",
                {"field": name},
            )
        return data


@dataclass(frozen=True)
class SelectionRequest:
    """What a policy and its strategies are matched against."""

    project_id: str
    agent_role: str
    intent: str
    has_error: bool = False


def find_word(text: str, words: Sequence[str]) -> str | None:
    folded = text.casefold()
    for word in words:
        if word and word.casefold() in folded:
            return word
    return None


class RecentWindow(Frozen):
    """Keep the last messages of the current task, newest first."""

    name: Literal["recent_window"] = "recent_window"
    enabled: bool = True
    max_messages: int = Field(default=20, ge=1, le=1000)
    max_tokens: int | None = Field(default=None, ge=1)

    def trigger_reason(self, request: SelectionRequest) -> str | None:
        limit = f", at most {self.max_tokens} tokens" if self.max_tokens else ""
        return f"recent_window: always on (last {self.max_messages} messages{limit})"


# search_preset "default" is no search preset of its own: the hybrid preset with one hop
# along trusted edges (preset name, graph hops).
DEFAULT_SEARCH_PRESET = "default"
DEFAULT_SEARCH = ("hybrid", 1)


def _one_or_many(value: Any) -> Any:
    # `agent_roles: sql_writer` means the one-item list a file would write as [sql_writer]
    return (value,) if isinstance(value, str) else value


# A list of words or names; a single string is a list of one.
Words = Annotated[tuple[str, ...], BeforeValidator(_one_or_many)]


class SemanticRecall(Frozen):
    """Search memory by meaning with the intent as the query. A hit is kept when its score
    over the best hit's (its relative score) is at least `min_score`. `top_k` is the search's
    depth; left unwritten, it is the policy's `top_k` (Policy fills it in)."""

    name: Literal["semantic_recall"] = "semantic_recall"
    enabled: bool = True
    top_k: int = Field(default=5, ge=1, le=200)
    min_score: float = Field(default=0.3, ge=0.0, le=1.0)
    search_preset: str = Field(default=DEFAULT_SEARCH_PRESET, min_length=1)

    @field_validator("search_preset")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        from ..retrieve.config import PRESETS

        valid = [DEFAULT_SEARCH_PRESET, *sorted(PRESETS)]
        if value not in valid:
            hint = closest(value, valid)
            mean = f" (did you mean {hint!r}?)" if hint else ""
            raise ValueError(
                f"unknown search preset {value!r}{mean}; valid presets: {', '.join(valid)}"
            )
        return value

    def search_label(self) -> str:
        """The search this strategy runs, named as `ctxbase search --preset` takes it."""
        if self.search_preset == DEFAULT_SEARCH_PRESET:
            preset, hops = DEFAULT_SEARCH
            return f"preset {preset!r} + {hops} graph hop"
        return f"preset {self.search_preset!r}"

    def trigger_reason(self, request: SelectionRequest) -> str | None:
        return self.recall_reason(request)

    def recall_reason(
        self,
        request: SelectionRequest,
        dynamic_top_k: tuple[int, int] | None = None,
        token_allowance: int | None = None,
    ) -> str | None:
        """The trigger reason naming the depth that applies: the policy's `dynamic_top_k`
        (and `memory_token_allowance`) when set, which replace a fixed `top_k`."""
        if not request.intent.strip():
            return None
        if dynamic_top_k is None:
            depth = f"top_k={self.top_k}"
        else:
            depth = f"dynamic_top_k=[{dynamic_top_k[0]}, {dynamic_top_k[1]}]"
            if token_allowance is not None:
                depth += f", memory_token_allowance={token_allowance}"
        return (
            f"semantic_recall: intent is searchable ({depth}, "
            f"min_score={self.min_score} relative to the best hit, {self.search_label()})"
        )


class ReferencedCodeFirst(Frozen):
    """When the user points back ("刚才的SQL"), rank referenced entities above similar ones."""

    name: Literal["referenced_code_first"] = "referenced_code_first"
    enabled: bool = True
    trigger_words: Words = DEFAULT_REFERENCE_TRIGGERS
    max_items: int = Field(default=5, ge=1, le=100)
    # An intent pointing back in time at a kind it names ("上次那个SQL", "the query from last
    # time"; retrieve/recency.py) brings this many of the newest of that kind made in
    # conversation, newest first, wherever they were made. 0: off.
    recent_of_kind: int = Field(default=2, ge=0, le=100)

    def refers_back(self, intent: str) -> str | None:
        """The trigger word the intent points back with ("刚才"), if any."""
        return find_word(intent, self.trigger_words)

    def trigger_reason(self, request: SelectionRequest) -> str | None:
        word = self.refers_back(request.intent)
        if word is None:
            return None
        return f"referenced_code_first: intent refers back ({word!r}), up to {self.max_items}"


class ProjectScopeFallback(Frozen):
    """With no pointer in the intent, load the project's documents and latest code as a base."""

    name: Literal["project_scope_fallback"] = "project_scope_fallback"
    enabled: bool = True
    fallback_depth: int = Field(default=3, ge=1, le=100)
    only_without_reference: bool = True

    def trigger_reason(self, request: SelectionRequest) -> str | None:
        if not request.project_id:
            return None
        if self.only_without_reference:
            word = find_word(request.intent, DEFAULT_REFERENCE_TRIGGERS)
            if word is not None:
                return None
        return (
            f"project_scope_fallback: project {request.project_id!r} baseline "
            f"(depth {self.fallback_depth})"
        )


class ErrorDrivenRepair(Frozen):
    """After a failure, bring the test cases that VALIDATE the code, with their logs."""

    name: Literal["error_driven_repair"] = "error_driven_repair"
    enabled: bool = True
    max_retry: int = Field(default=2, ge=0, le=10)
    include_test_cases: bool = True
    include_logs: bool = True
    trigger_words: Words = DEFAULT_ERROR_TRIGGERS

    def trigger_reason(self, request: SelectionRequest) -> str | None:
        if request.has_error:
            return f"error_driven_repair: the previous step failed (max_retry={self.max_retry})"
        word = find_word(request.intent, self.trigger_words)
        if word is None:
            return None
        return f"error_driven_repair: intent reports a failure ({word!r})"


class MultiAgentConsensus(Frozen):
    """Agents working on one task share only entities and relations they agree on."""

    name: Literal["multi_agent_consensus"] = "multi_agent_consensus"
    enabled: bool = True
    agents: Words = Field(min_length=2)
    consensus_threshold: float = Field(default=0.8, ge=0.0, le=1.0)

    def trigger_reason(self, request: SelectionRequest) -> str | None:
        roles = {a.casefold() for a in self.agents}
        if request.agent_role.casefold() not in roles:
            return None
        return (
            f"multi_agent_consensus: role {request.agent_role!r} is one of "
            f"[{', '.join(self.agents)}] (threshold {self.consensus_threshold})"
        )


Strategy = Annotated[
    RecentWindow
    | SemanticRecall
    | ReferencedCodeFirst
    | ProjectScopeFallback
    | ErrorDrivenRepair
    | MultiAgentConsensus,
    Field(discriminator="name"),
]

STRATEGY_NAMES: tuple[str, ...] = (
    "recent_window",
    "semantic_recall",
    "referenced_code_first",
    "project_scope_fallback",
    "error_driven_repair",
    "multi_agent_consensus",
)


# Each strategy's model by name (a file's short form `strategy: x` looks its keys up here).
STRATEGY_CLASSES: dict[str, type[Frozen]] = {
    "recent_window": RecentWindow,
    "semantic_recall": SemanticRecall,
    "referenced_code_first": ReferencedCodeFirst,
    "project_scope_fallback": ProjectScopeFallback,
    "error_driven_repair": ErrorDrivenRepair,
    "multi_agent_consensus": MultiAgentConsensus,
}


def strategy_defaults(name: str) -> Strategy:
    """The strategy `name` with its default parameters (for a caller that asks for it by
    name while the policy does not list it)."""
    cls = STRATEGY_CLASSES.get(name) if name != "multi_agent_consensus" else None
    if cls is None:
        detail = (
            "multi_agent_consensus needs its agents; list it in the policy"
            if name == "multi_agent_consensus"
            else f"unknown strategy {name!r}; valid: {', '.join(STRATEGY_NAMES)}"
        )
        raise ValidationError("strategy", detail)
    made: Strategy = cls()  # type: ignore[assignment]
    return made

"""LlamaIndex over ctxbase: a retriever (for query engines) and a chat memory.

    from ctxbase.integrations.llamaindex import CtxbaseChatMemory, CtxbaseRetriever
    retriever = CtxbaseRetriever(cb, k=5)                    # search hits as NodeWithScore
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    memory = CtxbaseChatMemory.from_defaults(cb=cb, session_id="s1", agent_id="coder")
    await agent.run("...", memory=memory)

The retriever recalls through integrations/recall.py (the same hits and fields as the
LangChain retriever and the tools; `mode="assemble"`: the items of an assembled context).
The memory is a `BaseMemory`: `put` records each chat message as a ctxbase event of the
session (chained to the one before, so other agents find the conversation); `get` returns
the session's last messages, preceded by one system message with what ctxbase recalls for
the input (or the last user message) from the rest of the project. `reset` hides the
messages this memory's `agent_id` recorded in the session, its user turns included
(`cb.restore(ids)` brings them back): other agents' messages in a shared session stay, and
nothing is deleted for good (`cb.forget(session_id=...)` does that).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from . import require

require("llama_index.core", "llamaindex")

from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage, MessageRole  # noqa: E402
from llama_index.core.bridge.pydantic import ConfigDict, Field  # noqa: E402
from llama_index.core.memory import BaseMemory  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

from ..model import Event, check_id  # noqa: E402
from .chat_turns import ChatTurn, hide_own, record_turns  # noqa: E402
from .recall import SESSION_LIMIT, Recalled, assembled, check_recall, searched  # noqa: E402
from .stored_forms import stored_form  # noqa: E402
from .tools import ToolScope, session_events  # noqa: E402

if TYPE_CHECKING:
    from ..contextbase import ContextBase
    from ..serve.sdk import Client

__all__ = ["CtxbaseChatMemory", "CtxbaseRetriever"]

SearchMode = Literal["keyword", "semantic", "hybrid", "hybrid_graph"]
# A message's LlamaIndex form rides in the event's metadata (its data before), so it
# comes back exactly.
_LI_KEY = "llama_index_message"
# The agent of the memory that recorded the message (a user message is written as the
# user's, so the event's agent_id does not say whose memory it came from).
_BY_KEY = "llama_index_memory_agent"
_EVENT_TYPE = {
    MessageRole.USER: "user_message",
    MessageRole.ASSISTANT: "assistant_message",
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
    MessageRole.TOOL: "tool_result",
    MessageRole.FUNCTION: "tool_result",
}
_FROM_TYPE = {
    "user_message": MessageRole.USER,
    "assistant_message": MessageRole.ASSISTANT,
    "system": MessageRole.SYSTEM,
}
RECALL_HEADER = "Relevant memory (from ctxbase, best first):"


# Fields that mean nothing to the model (shown to it: id, type, session, path, repo, ...).
_NOT_FOR_LLM = ("score", "kind", "context_id", "strategies", "truncated", "name", "found_via")


def _node(r: Recalled) -> NodeWithScore:
    node = TextNode(
        id_=r.id,
        text=r.text,
        metadata=r.metadata,
        excluded_llm_metadata_keys=[k for k in r.metadata if k in _NOT_FOR_LLM],
        excluded_embed_metadata_keys=list(r.metadata),  # ctxbase embedded the text already
    )
    return NodeWithScore(node=node, score=r.score)


class CtxbaseRetriever(BaseRetriever):
    """Nodes from ctxbase: search hits (`mode="search"`, best first) or the items of an
    assembled context (`mode="assemble"`: documents, code and events the policy chose).
    Each node's id is the ctxbase id, its score the hit's, its metadata the hit's fields."""

    def __init__(
        self,
        cb: ContextBase | Client,
        *,
        project: str | None = None,
        k: int = 4,
        mode: Literal["search", "assemble"] = "search",
        search_mode: SearchMode = "hybrid",
        session_id: str | None = None,
        agent_role: str = "executor",
        max_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        check_recall(k, mode, "mode")
        super().__init__(**kwargs)
        self.cb = cb
        self.k = k
        self.mode = mode
        self.search_mode = search_mode
        self.session_id = session_id
        self.agent_role = agent_role
        self.max_tokens = max_tokens
        self._scope = ToolScope(cb, project=project, role="read")

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = query_bundle.query_str
        if self.mode == "assemble":
            items = assembled(
                self._scope,
                query,
                agent_role=self.agent_role,
                session_id=self.session_id,
                max_tokens=self.max_tokens,
            )[1][: self.k]
        else:
            items = searched(
                self._scope, query, self.k, mode=self.search_mode, session_id=self.session_id
            )
        return [_node(r) for r in items]


class CtxbaseChatMemory(BaseMemory):
    """A LlamaIndex chat memory kept as ctxbase events of one session: the conversation
    (last `history_messages` messages) plus what ctxbase recalls from the whole project."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    cb: Any = Field(description="a ContextBase (ctxbase.open) or Client (ctxbase.connect)")
    session_id: str = "llamaindex"
    project: str | None = None
    agent_id: str = "assistant"
    user_id: str = "user"
    agent_role: str | None = None
    history_messages: int = Field(default=40, ge=0, le=SESSION_LIMIT)
    k: int = Field(default=5, ge=0, le=50, description="recalled hits (0: history only)")
    search_mode: SearchMode = "hybrid"

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        # a bad id is refused here (ctxbase's ValidationError, as the other adapters say
        # it), not at the first write after reads that answered []
        for name in ("session_id", "agent_id", "user_id"):
            check_id(name, getattr(self, name))

    @classmethod
    def class_name(cls) -> str:
        return "CtxbaseChatMemory"

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> CtxbaseChatMemory:
        """The memory (keyword arguments are its fields; `cb` is required)."""
        return cls(**kwargs)

    @property
    def _project(self) -> str:
        return self.project or str(self.cb.project)

    # -- reading ---------------------------------------------------------------------------
    def get_all(self) -> list[ChatMessage]:
        """Every message of the session (up to SESSION_LIMIT), oldest first, including
        those other agents recorded in it."""
        return self._messages(SESSION_LIMIT)[1]

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The messages among the session's last `history_messages` events (a tool result
        whose call fell out of that window left out), preceded by one system message with
        the hits ctxbase recalls for `input` (else the last user message) that are not
        among them; no system message when nothing is recalled."""
        ids, history = self._messages(self.history_messages)
        while history and history[0].role == MessageRole.TOOL:  # its call is out of the window
            history.pop(0)
        query = input or next(
            (m.content for m in reversed(history) if m.role == MessageRole.USER and m.content),
            None,
        )
        if not query or not self.k:
            return history
        scope = ToolScope(self.cb, project=self._project, role="read")
        hits = [r for r in searched(scope, query, self.k, mode=self.search_mode) if r.id not in ids]
        if not hits:
            return history
        lines = "\n".join(f"[{r.id}] {r.text}" for r in hits)
        return [ChatMessage(role=MessageRole.SYSTEM, content=f"{RECALL_HEADER}\n{lines}"), *history]

    def _messages(self, n: int) -> tuple[set[str], list[ChatMessage]]:
        """The messages among the session's last n events: their event ids, the messages."""
        if n <= 0:
            return set(), []
        events = session_events(self.cb, self.session_id, n, self._project)
        pairs = [(e.id, _message(e)) for e in events]
        return {i for i, m in pairs if m is not None}, [m for _, m in pairs if m is not None]

    # -- writing ---------------------------------------------------------------------------
    def put(self, message: ChatMessage) -> None:
        """Record the message as the session's next event."""
        self.put_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Record the messages as the session's next events, all or nothing (a message the
        store refuses leaves none of them written)."""
        record_turns(self.cb, self.session_id, self._project, self._turns(messages))

    def _turns(self, messages: list[ChatMessage]) -> list[ChatTurn]:
        # the LlamaIndex form in metadata, which no search reads: a message with no text
        # (tool calls only, whitespace) is kept with empty data, never found by its JSON
        return [
            ChatTurn(
                type=_EVENT_TYPE.get(m.role, "assistant_message"),
                text=m.content or "",
                agent_id=self.user_id if m.role == MessageRole.USER else self.agent_id,
                agent_role=None if m.role == MessageRole.USER else self.agent_role,
                metadata={_LI_KEY: m.model_dump(mode="json"), _BY_KEY: self.agent_id},
            )
            for m in messages
        ]

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the conversation: the new messages are written first (all or nothing),
        then what `reset` hides is hidden, the new messages left out; a message the store
        refuses leaves the conversation as it was."""
        events = session_events(self.cb, self.session_id, SESSION_LIMIT, self._project)
        # the first new message follows the session's last event that stays
        stays = [e.id for e in events if not self._recorded_here(e)]
        turns = self._turns(messages)
        after = stays[-1] if stays else None
        new = record_turns(
            self.cb, self.session_id, self._project, turns, after=after, read_last=False
        )
        ids = {e.id for e in new}
        hide_own(
            self.cb,
            self.session_id,
            self._project,
            lambda e: e.id not in ids and self._recorded_here(e),
        )

    def reset(self) -> None:
        """Hide the messages this memory's agent recorded in the session, its user turns
        included (restorable with `cb.restore`): other agents' messages in a shared session
        (another memory's with another `agent_id` too) and the rest of the store stay.
        However long the session (each read sees its last SESSION_LIMIT visible events;
        what is hidden leaves them, so the next read reaches further back)."""
        hide_own(self.cb, self.session_id, self._project, self._recorded_here)

    def _recorded_here(self, event: Event) -> bool:
        form = stored_form(event, _LI_KEY)
        if form is None:
            return False
        if _BY_KEY in form:
            return bool(form[_BY_KEY] == self.agent_id)
        # recorded before memories named themselves: the agent's own (not the user's) turns
        return event.agent_id == self.agent_id


def _message(e: Event) -> ChatMessage | None:
    form = stored_form(e, _LI_KEY)
    if form is not None:
        return ChatMessage.model_validate(form[_LI_KEY])
    if e.type in _FROM_TYPE and e.text:
        return ChatMessage(role=_FROM_TYPE[e.type], content=e.text)
    return None

"""LangChain over ctxbase: a retriever and a chat message history.

    from ctxbase.integrations.langchain import CtxbaseChatHistory, CtxbaseRetriever
    retriever = CtxbaseRetriever(cb=cb, k=5)                      # search hits as Documents
    context = CtxbaseRetriever(cb=cb, mode="assemble", agent_role="coder")  # assembled context
    history = CtxbaseChatHistory(cb, session_id="s1", agent_id="coder")

The retriever recalls through integrations/recall.py (the `search_memory` and
`assemble_context` tools: same hits, same fields as every other adapter); the history
records each message as a ctxbase event of the session, linked to the message before it,
so other agents find the conversation. `clear` hides the messages this history's agent
recorded in the session (`cb.restore(ids)` brings them back); other agents' messages stay.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from . import require

require("langchain_core", "langchain")

from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

with warnings.catch_warnings():  # deprecated in langchain-core 1.6.4, still what chains take
    warnings.simplefilter("ignore")
    from langchain_core.chat_history import BaseChatMessageHistory

from ..capture.tool_calls import call_text  # noqa: E402
from ..model import check_id  # noqa: E402
from .chat_turns import ChatTurn, hide_own, record_turns  # noqa: E402
from .recall import assembled, check_k, searched  # noqa: E402
from .stored_forms import stored_form  # noqa: E402
from .tools import ToolScope, session_events  # noqa: E402

if TYPE_CHECKING:
    from ..contextbase import ContextBase
    from ..model import Event
    from ..serve.sdk import Client

__all__ = ["CtxbaseChatHistory", "CtxbaseRetriever"]

# A message's LangChain form rides in the event's metadata, so it comes back exactly (in
# its data before: read there too); metadata is not searched, so a message with no text
# of its own is not found by the words of its serialisation.
_LC_KEY = "langchain_message"
# The agent of the history that recorded the message (a user message is written as the
# user's, so the event's agent_id does not say whose history it came from).
_BY_KEY = "langchain_history_agent"
_EVENT_TYPE = {"human": "user_message", "ai": "assistant_message", "system": "system"}
_EVENT_TYPE["tool"] = "tool_result"
_FROM_TYPE = {"user_message": HumanMessage, "assistant_message": AIMessage}
_FROM_TYPE["system"] = SystemMessage
HISTORY_LIMIT = 10_000  # events read back per session


class CtxbaseRetriever(BaseRetriever):
    """Documents from ctxbase: search hits (`mode="search"`, best first) or the items of an
    assembled context (`mode="assemble"`: documents, code and events the policy chose)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    cb: Any = Field(description="a ContextBase (ctxbase.open) or Client (ctxbase.connect)")
    project: str | None = None
    k: int = Field(default=4, ge=1, le=50)
    mode: Literal["search", "assemble"] = "search"
    search_mode: Literal["keyword", "semantic", "hybrid", "hybrid_graph"] = "hybrid"
    session_id: str | None = None
    agent_role: str = "executor"
    max_tokens: int | None = None

    def _scope(self) -> ToolScope:
        return ToolScope(self.cb, project=self.project, role="read")

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k = kwargs.get("k", self.k)
        check_k(k)  # named `k`, as the caller wrote it
        if self.mode == "assemble":
            items = assembled(
                self._scope(),
                query,
                agent_role=self.agent_role,
                session_id=self.session_id,
                max_tokens=self.max_tokens,
            )[1][:k]
        else:
            items = searched(
                self._scope(), query, k, mode=self.search_mode, session_id=self.session_id
            )
        return [Document(page_content=r.text, id=r.id, metadata=r.metadata) for r in items]


class CtxbaseChatHistory(BaseChatMessageHistory):
    """A session's conversation, stored as ctxbase events (each message follows the one
    before it); messages recorded by other agents of the session are read back too."""

    def __init__(
        self,
        cb: ContextBase | Client,
        session_id: str,
        *,
        project: str | None = None,
        agent_id: str = "assistant",
        user_id: str = "user",
        agent_role: str | None = None,
    ) -> None:
        self.cb = cb
        # a bad id is refused here, not at the first write after reads that answered []
        self.session_id = check_id("session_id", session_id)
        self.project = project or cb.project
        self.agent_id = agent_id
        self.user_id = user_id
        self.agent_role = agent_role

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages among its last HISTORY_LIMIT events, oldest first."""
        events = session_events(self.cb, self.session_id, HISTORY_LIMIT, self.project)
        out: list[BaseMessage] = []
        for e in events:
            form = stored_form(e, _LC_KEY)
            if form is not None:
                out.extend(messages_from_dict([form[_LC_KEY]]))
            elif e.type in _FROM_TYPE and e.text:
                out.append(_FROM_TYPE[e.type](content=e.text))
        return out

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Record the messages as the session's next events, all or nothing (a message the
        store refuses leaves none of them written). A message with no text to read (empty,
        whitespace, tool calls only) is kept as written: read back exactly, never found by
        a search."""
        turns = []
        for m in messages:
            metadata: dict[str, Any] = {_LC_KEY: message_to_dict(m), _BY_KEY: self.agent_id}
            if isinstance(m, ToolMessage):
                metadata["tool_call_id"] = m.tool_call_id
            human = isinstance(m, HumanMessage)
            # a message made only of tool calls reads as its calls, as capture_messages
            # stores it (`get_weather(city="Paris")`)
            turns.append(
                ChatTurn(
                    type=_EVENT_TYPE.get(m.type, "assistant_message"),
                    text=m.text or _calls_text(m),
                    agent_id=self.user_id if human else self.agent_id,
                    agent_role=None if human else self.agent_role,
                    metadata=metadata,
                )
            )
        record_turns(self.cb, self.session_id, self.project, turns)

    def clear(self) -> None:
        """Hide the messages this history's agent recorded in the session (restorable with
        `cb.restore`), as LlamaIndex's `reset` and AutoGen's `clear` do: other agents'
        messages in a shared session stay, and nothing is deleted for good
        (`cb.forget(session_id=...)` does that, with an admin key over the server). A history
        with nothing of its own stored (never written, or cleared already) is left as it is.
        However long the session: each read sees its last HISTORY_LIMIT visible events, and
        what is hidden leaves them, so the next read reaches further back."""
        hide_own(self.cb, self.session_id, self.project, self._recorded_here)

    def _recorded_here(self, event: Event) -> bool:
        form = stored_form(event, _LC_KEY)
        if form is None:
            return False
        if _BY_KEY in form:
            return bool(form[_BY_KEY] == self.agent_id)
        # recorded before histories named themselves: the agent's own (not the user's) turns
        return event.agent_id == self.agent_id


def _calls_text(message: BaseMessage) -> str:
    """An AI message's tool calls as capture renders them, one per line ("" for none)."""
    if not isinstance(message, AIMessage):
        return ""
    return "\n".join(call_text(c.get("name"), c.get("args")) for c in message.tool_calls)

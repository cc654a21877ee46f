"""AutoGen memory over ctxbase: `autogen_core.memory.Memory` for AutoGen 0.7 agents.

    from ctxbase.integrations.autogen_memory import CtxbaseMemory
    memory = CtxbaseMemory(cb, session_id="support-1", agent_id="planner")
    agent = AssistantAgent("planner", model_client=..., memory=[memory])

`add` records each MemoryContent as an event of the memory's session (text, markdown and
JSON as its text, stored once; a dict's text parses back to it), so `query` gives back
what was added, mime type and metadata included (the metadata's own keys as added; the
hit's id, score and fields beside them). `query` searches the whole project (other
agents' events, documents and code too), with the same hits as the other adapters
(integrations/recall.py). `update_context` runs before each model call, as AutoGen's ListMemory
does: it adds one system message with what ctxbase recalls for the last message, from a
search (`recall="search"`) or an assembly (`recall="assemble"`: the project's facts and the
memory the role's policy recalls, within its token budget; the conversation is in the
model context already, so the assembly names no session).

`clear` hides (soft deletes) the events this memory's `agent_id` added to its session
(another agent's memory on the same session keeps its own): they leave
searches and assemblies, and `cb.restore(ids)` brings them back; nothing else of the store is
touched, and nothing is deleted for good (`cb.forget(session_id=...)` does that). `close`
leaves the context base open: whoever opened it closes it.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Literal

from . import require

require("autogen_core.memory", "autogen")

from autogen_core import CancellationToken  # noqa: E402
from autogen_core.memory import (  # noqa: E402
    Memory,
    MemoryContent,
    MemoryMimeType,
    MemoryQueryResult,
    UpdateContextResult,
)
from autogen_core.model_context import ChatCompletionContext  # noqa: E402
from autogen_core.models import LLMMessage, SystemMessage  # noqa: E402

from ..assemble.quoting import DATA_NOTE, TAG  # noqa: E402
from ..errors import ValidationError  # noqa: E402
from ..model import Event, check_id  # noqa: E402
from .chat_turns import hide_own  # noqa: E402
from .recall import assembled, check_recall, searched  # noqa: E402
from .tools import ToolScope  # noqa: E402

if TYPE_CHECKING:
    from ..contextbase import ContextBase
    from ..serve.sdk import Client

__all__ = ["MIME_TYPES", "CtxbaseMemory"]

# What a MemoryContent looked like rides in the event's data, so `query` gives it back.
_AG_KEY = "autogen_memory"
# The agent of the memory that added the event: `clear` hides only its own.
_BY_KEY = "autogen_memory_agent"
MIME_TYPES = (MemoryMimeType.TEXT.value, MemoryMimeType.MARKDOWN.value, MemoryMimeType.JSON.value)
HEADER = "Relevant memory content (from ctxbase, best first):"


def _mime(content: MemoryContent) -> str:
    mime = content.mime_type
    return mime.value if isinstance(mime, MemoryMimeType) else str(mime)


def _as_text(content: MemoryContent) -> tuple[str, Any]:
    """The event text of a MemoryContent, and the value kept to give it back."""
    mime, value = _mime(content), content.content
    if mime not in MIME_TYPES:
        raise ValidationError(
            "mime_type", f"ctxbase stores text: one of {', '.join(MIME_TYPES)} (got {mime!r})"
        )
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError("content", f"bytes that are not UTF-8 ({exc.reason})") from exc
    if isinstance(value, dict):
        try:  # in the caller's key order, so the text parses back to the same dict
            return json.dumps(value, ensure_ascii=False, allow_nan=False), value
        except (TypeError, ValueError) as exc:
            raise ValidationError("content", f"a dict that is not JSON ({exc})") from exc
    if not isinstance(value, str):
        raise ValidationError("content", f"text, bytes or a dict (got {type(value).__name__})")
    if mime == MemoryMimeType.JSON.value:
        try:
            json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValidationError("content", f"not valid JSON: {exc.msg}") from exc
    return value, value


def _message_text(message: LLMMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    # a user message's list (text and images) or a list of function calls/results
    parts = [
        getattr(part, "content", None) if not isinstance(part, str) else part for part in content
    ]
    return " ".join(p for p in parts if isinstance(p, str))


class CtxbaseMemory(Memory):
    """An AutoGen Memory whose store is a ctxbase (embedded or `ctxbase.connect`); what it
    adds is shared with every other agent of the project, and what they stored is recalled.

    `k` hits are recalled (`search_mode` as in `search_memory`); `recall="assemble"` recalls
    through the `agent_role`'s assembly policy instead (`max_tokens`: its budget). `add`
    records events of `event_type` under `agent_id`. A live context base is no
    configuration, so the memory does not take part in AutoGen's `dump_component`."""

    def __init__(
        self,
        cb: ContextBase | Client,
        *,
        session_id: str = "autogen-memory",
        project: str | None = None,
        agent_id: str = "autogen",
        agent_role: str | None = None,
        k: int = 5,
        search_mode: Literal["keyword", "semantic", "hybrid", "hybrid_graph"] = "hybrid",
        recall: Literal["search", "assemble"] = "search",
        max_tokens: int | None = None,
        event_type: str = "assistant_message",
        name: str | None = None,
    ) -> None:
        check_recall(k, recall, "recall")
        check_id("session_id", session_id)
        self.cb = cb
        self.session_id = session_id
        self.project = project or cb.project
        self.agent_id = agent_id
        self.agent_role = agent_role
        self.k = k
        self.search_mode = search_mode
        self.recall = recall
        self.max_tokens = max_tokens
        self.event_type = event_type
        self.name = name or f"ctxbase:{self.project}/{session_id}"
        self._scope = ToolScope(cb, project=self.project, agent_id=agent_id, role="read")

    # -- Memory --------------------------------------------------------------------------
    async def add(
        self, content: MemoryContent, cancellation_token: CancellationToken | None = None
    ) -> None:
        """Record the content as an event of the memory's session (text, markdown or JSON;
        images and other binary content are refused with a ValidationError)."""
        text, value = _as_text(content)
        # the content is the event's text; only a dict is kept apart (as "json": its text
        # parses back to it), so what is added counts once against the size limit
        kept: dict[str, Any] = {"mime_type": _mime(content)}
        if isinstance(value, dict):
            kept["json"] = True
        if content.metadata:
            kept["metadata"] = content.metadata
        data = {_AG_KEY: kept, _BY_KEY: self.agent_id}
        await asyncio.to_thread(
            self.cb.record,
            self.event_type,
            session_id=self.session_id,
            text=text,
            data=data,
            project=self.project,
            agent_id=self.agent_id,
            agent_role=self.agent_role,
        )

    async def query(
        self,
        query: str | MemoryContent,
        cancellation_token: CancellationToken | None = None,
        **kwargs: Any,
    ) -> MemoryQueryResult:
        """Search the project's memory, best first. Keyword arguments: `k` (hits), `mode`
        (search mode), `session_id` (only that session). What this adapter added comes back
        as it was added; other hits are text/plain. Each result's metadata has the hit's
        id, type, score (and session, agent, repo, path where known)."""
        text = query if isinstance(query, str) else _as_text(query)[0]
        if not text.strip():
            return MemoryQueryResult(results=[])
        args: dict[str, Any] = {
            "query": text,
            "k": kwargs.get("k", self.k),  # checked as `k` by the search
            "mode": kwargs.get("mode", self.search_mode),
            "session_id": kwargs.get("session_id"),
        }
        results = await asyncio.to_thread(self._search, args)
        return MemoryQueryResult(results=results)

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Add what ctxbase recalls for the last message as one system message (nothing
        when the context is empty or nothing is recalled)."""
        messages = await model_context.get_messages()
        if not messages:
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        intent = _message_text(messages[-1])
        if not intent.strip():
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        if self.recall == "assemble":
            # the assembled memory section has its own heading ("Retrieved context ...")
            body, results = await asyncio.to_thread(self._assembled, intent)
        else:
            results = (await self.query(intent)).results
            listed = "\n".join(f"{i}. {_shown(m)}" for i, m in enumerate(results, 1))
            body = f"{HEADER}\n{listed}" if listed else ""
        if body:
            await model_context.add_message(SystemMessage(content=body))
        return UpdateContextResult(memories=MemoryQueryResult(results=results))

    async def clear(self) -> None:
        """Hide the events this memory's agent added to its session (restorable with
        `cb.restore`); other agents' events (another memory's with another `agent_id` on
        the same session too) and the rest of the store stay as they are."""
        await asyncio.to_thread(self._hide_own)

    async def close(self) -> None:
        """Nothing to release: the context base stays open for whoever opened it."""

    # -- the calls, in a worker thread -------------------------------------------------
    def _search(self, args: dict[str, Any]) -> list[MemoryContent]:
        out: list[MemoryContent] = []
        seen: set[str] = set()
        for hit in searched(self._scope, **args):
            if hit.id in seen:  # chunks of one long event: its best one stands for it
                continue
            seen.add(hit.id)
            stored = self._stored(hit.id)
            if stored is None:
                out.append(
                    MemoryContent(content=hit.text, mime_type="text/plain", metadata=hit.metadata)
                )
            else:
                out.append(
                    MemoryContent(
                        content=stored["content"],
                        mime_type=stored["mime_type"],
                        # the metadata as added; the hit's fields where it has no such key
                        metadata={**hit.metadata, **stored.get("metadata", {})},
                    )
                )
        return out

    def _stored(self, hit_id: str) -> dict[str, Any] | None:
        """What `add` kept of an event it recorded, its content included (None for
        anything else)."""
        if not hit_id.startswith("ev_"):
            return None
        event = self.cb.get_event(hit_id, project=self.project)
        data = event.data
        if not isinstance(data, dict) or not isinstance(data.get(_AG_KEY), dict):
            return None
        kept = dict(data[_AG_KEY])
        if "content" not in kept:  # added before the content was kept there as well
            text = event.text or ""
            kept["content"] = json.loads(text) if kept.get("json") else text
        return kept

    def _assembled(self, intent: str) -> tuple[str, list[MemoryContent]]:
        ctx, items = assembled(
            self._scope,
            intent,
            agent_role=self.agent_role or "executor",
            max_tokens=self.max_tokens,
        )
        # No session: the model context holds the conversation, so the assembly has no
        # history layer. Its messages between the policy's own prompt (the agent has one)
        # and the input: facts, task, recalled memory (quoted as data, which the agent's
        # prompt does not explain: the note says it).
        between = ctx["messages"][1:]
        if between and between[-1] == {"role": "user", "content": intent}:
            between = between[:-1]
        parts = [m["content"] for m in between]
        if any(f"<{TAG} " in p for p in parts):
            parts.insert(0, DATA_NOTE)
        results = [
            MemoryContent(content=r.text, mime_type="text/plain", metadata=r.metadata)
            for r in items
        ]
        return "\n\n".join(parts), results

    def _hide_own(self) -> None:
        hide_own(self.cb, self.session_id, self.project, self._added_here)

    def _added_here(self, event: Event) -> bool:
        data = event.data
        if not isinstance(data, dict) or _AG_KEY not in data:
            return False
        if _BY_KEY in data:
            return bool(data[_BY_KEY] == self.agent_id)
        # added before memories named themselves: the events recorded as this agent's
        return event.agent_id == self.agent_id


def _shown(memory: MemoryContent) -> str:
    content = memory.content
    if isinstance(content, dict):
        return json.dumps(content, ensure_ascii=False, sort_keys=True)
    return str(content)

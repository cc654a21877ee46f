"""A chat model that follows a script instead of calling an LLM, so the examples run
offline. Each step is an AIMessage, or a function of the messages so far that returns one
(to answer from a tool result). Everything on the ctxbase side is real."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

Step = AIMessage | Callable[[Sequence[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    steps: list[Any]
    position: list[int] = Field(default_factory=lambda: [0])  # mutable: the model is frozen

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self  # the script already knows which tools it calls

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        step = self.steps[self.position[0]]
        self.position[0] += 1
        message = step(messages) if callable(step) else step
        return ChatResult(generations=[ChatGeneration(message=message)])


def last_tool_result(messages: Sequence[BaseMessage]) -> str:
    return str(next(m.content for m in reversed(messages) if m.type == "tool"))

"""Assembly of `ContextBase`: the context for an agent turn, its trace, the closed loop.

`assemble_context`, `context_manager`, `get_trace` and `record_outcome`, the same calls as
the remote SDK's, over the assemble layer (`Assembler`, `ContextManager`, `assemble.trace`,
`assemble.loop`), which is imported on first use: a base that never assembles loads no
assembler.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import NEW_PROJECT_HINT, UnknownProjectError
from .model import check_id

if TYPE_CHECKING:
    from .assemble.assembler import Assembler
    from .assemble.loop import Outcome
    from .assemble.manager import ContextManager
    from .assemble.trace import AssembledContext
    from .assemble.user_scope import MemoryScope
    from .components import Components

__all__ = ["AssemblyMethods"]


class AssemblyMethods:
    """Mixed into `ContextBase`: it supplies `components`, `debug_mode`, the assembler's
    lock, cache and policies, `_pid` and `_caught_up`."""

    components: Components
    project: str
    debug_mode: bool
    _worker_lock: threading.Lock
    _assembler: Assembler | None
    _policies: Any

    def _pid(self, project: str | None) -> str:
        raise NotImplementedError

    def _caught_up(self) -> None:
        raise NotImplementedError

    @property
    def assembler(self) -> Assembler:
        from .assemble.assembler import Assembler

        with self._worker_lock:
            if self._assembler is None:
                self._assembler = Assembler(self.components, self._policies)
            return self._assembler

    def assemble_context(
        self,
        *,
        agent_role: str,
        user_intent: str,
        project_id: str | None = None,
        session_id: str | None = None,
        max_tokens: int | None = None,
        task_id: str | None = None,
        debug: bool = False,
        require_signature: bool = False,
        signing_key: bytes | str | None = None,
        repos: Sequence[str] | None = None,
        strategy: str | None = None,
        new_project: bool = False,
        memory_scope: MemoryScope | None = None,
        user_id: str | None = None,
    ) -> AssembledContext:
        """The context for one agent turn: messages, structured payload and a context_id.

        `strategy` runs that one strategy (with the policy's parameters for it, if any)
        instead of the ones the policy triggers, as seed 000's
        ``strategy="referenced_code_first"``. The result also reads as seed 000's payload:
        ``ctx["documents"][0]["content"]``. With the base's `debug_mode`, the assembly log
        (documents found, relations, tokens injected) is printed to stderr.
        `require_signature` keeps out entities whose HMAC signature fails or is missing
        (as in `search`) and captured events, the history's turns too, likewise (signed as
        stored when the project has a key); `AssembledContext.tampered` names the tampered
        ones, the trace's drops say "unsigned" or "tampered" for each. `repos`
        keeps out entities ingested from other repositories. `memory_scope="user"` (default:
        the policy's) keeps memory to the asking user's sessions (`user_id`, else the
        session's user) and knowledge of no session. Events captured before the
        call are in it (it waits for them to be written, up to `READ_WAIT_S`).

        A `project_id` other than the base's own that the database holds no data of is a
        typo: `UnknownProjectError` (a NotFoundError) names the projects it holds, as the
        REST route and the command line do, and nothing is stored. The base's own project
        assembles even before anything was captured into it (an empty context), and so does
        another with `new_project=True` (an agent's first turn on a new project)."""
        if session_id is not None:  # as record refuses it: a trace under it could not be
            check_id("session_id", session_id)  # forgotten by its session
        if task_id is not None:
            check_id("task_id", task_id)
        self._caught_up()
        pid = self._pid(project_id)
        if pid != self.project and not new_project:
            known = self.components.store.list_projects()
            if pid not in known:
                raise UnknownProjectError(pid, known, start=NEW_PROJECT_HINT)
        ctx = self.assembler.assemble(
            project_id=pid,
            session_id=session_id,
            agent_role=agent_role,
            user_intent=user_intent,
            max_tokens=max_tokens,
            task_id=task_id,
            debug=debug or self.debug_mode,
            require_signature=require_signature,
            signing_key=signing_key,
            repos=repos,
            strategy=strategy,
            memory_scope=memory_scope,
            user_id=user_id,
        )
        if self.debug_mode:
            from .assemble.trace import print_assembly_log

            print_assembly_log(ctx)
        return ctx

    def context_manager(self, **options: Any) -> ContextManager:
        """Seed 003's layered manager (sessions, tasks, state, messages) over this base."""
        from .assemble.manager import ContextManager

        return ContextManager(self.components, **options)

    def get_trace(self, context_id: str, *, project: str | None = None) -> dict[str, Any]:
        """The stored trace of an assembly: policy, candidates, inclusions, drops, tokens."""
        from .assemble.trace import get_trace

        return get_trace(self.components, context_id, project=self._pid(project))

    def record_outcome(
        self, context_id: str, answer: str, produced: Sequence[Any] = (), **options: Any
    ) -> Outcome:
        """Close the loop: store the model's answer and what it produced, linked to the
        context it was given (GENERATES / MODIFIES)."""
        from .assemble.loop import record_outcome

        return record_outcome(self.components, context_id, answer, produced, **options)

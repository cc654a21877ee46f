"""Budgeted prompt assembly: four context layers, per-role policies, a trace for every prompt.

The prompt order is fixed: system instructions -> known state -> current task -> retrieved
memory -> recent history -> latest user input. Recalled memory, tool output and the summary of
older turns are stored text, not instructions: each is a user message quoting it as data
(quoting.py), and the system prompt says so once. The policy chosen for the agent's role and
intent (policy.py) says which strategies fill the memory layer, the view (by default the
current task's state plus session-wide facts; a planner opts in to every task's, an executor
sees only its subtask's), the relation thresholds, the budget shares and the time limit.
Budgeting (budget.py) decides what fits; the latest input is never cut.

Memory scores share one scale in [0, 1] so strategies mix: referenced code ~1.0, failing
tests and their logs ~0.95, what a relation leads to gets the parent's score times the edge's
confidence times 0.9, semantic hits 0.8 times their score relative to the best hit, the
project baseline 0.2-0.3.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..components import ComponentsSource, components_of
from ..errors import ConflictError, NotFoundError, ValidationError
from ..model import Event, StateFact, id_arg
from ..retrieve.term_bridge import prefetch_term_bridge
from ..retrieve.tokenize import load_segmenter, needs_segmenter, prefetch_segmenter
from ..validation import check_names, check_query, check_role
from .asked_before import drop_unanswered
from .budget import (
    BudgetAllocation,
    BudgetItem,
    CutKind,
    check_max_tokens,
    extract_summary,
    left_out_note,
)
from .consensus import CONFLICT, acts_as_agent, multi_agent_consensus
from .corrections import CORRECTION, add_corrections
from .echoes import mark_echoes
from .fitting import LAYER_QUOTES, fit_messages
from .fixed_layers import state_items, task_items
from .gatherer import Gatherer
from .history_fallback import THOUGHT_TYPE
from .history_plan import HistoryPlan, important, llm_summary, plan_history
from .history_turns import OTHERS_THOUGHT, history_turns
from .lifecycle import Status
from .memory_calls import link_calls, results_with_calls
from .memory_candidate import LINE_TYPES, event_failed
from .memory_section import (
    ITEM_OVERHEAD,
    keep_within_allowance,
    memory_items,
    memory_section_for,
)
from .policy import (
    STRATEGY_NAMES,
    ErrorDrivenRepair,
    MultiAgentConsensus,
    Policy,
    PolicySelection,
    PolicySet,
    ProjectScopeFallback,
    RecentWindow,
    ReferencedCodeFirst,
    SemanticRecall,
    Strategy,
    strategy_defaults,
)
from .policy_loading import PolicyFile, policy_source
from .quoting import DATA_NOTE, SUMMARY, Quote, neutralise, with_data_note
from .role_aliases import agent_aliases
from .signed_turns import keep_signed
from .state import (
    CURRENT_TASK_KEY,
    MESSAGE_SCOPE,
    LLMConfig,
    get_scope_facts,
    lapsed_drops,
    state_scopes,
    statuses_of,
)
from .strategies import (
    error_driven_repair,
    project_scope_fallback,
    referenced_code_first,
    semantic_recall,
)
from .task_cues import new_task, with_task_baseline
from .tokens import TokenCounter, get_token_counter
from .trace import AssembledContext, build_result, log_trace, store_trace
from .turn_roles import TurnView, prompt_name
from .user_scope import MemoryScope, scope_for, session_user

__all__ = ["DEFAULT_SYSTEM_PROMPT", "Assembler", "memory_section_for"]

log = logging.getLogger("ctxbase.assemble")

DEFAULT_SYSTEM_PROMPT = (
    "You are the {role} agent of project {project}. Answer from the context below: 'Known "
    "facts' are confirmed and override older messages; retrieved items are labelled with "
    f"their source and id. {DATA_NOTE}"
)
_SUMMARY_QUOTE = Quote(SUMMARY, "Earlier conversation (summary):")
_OPTIONAL_ORDER = (
    "referenced_code_first",
    "semantic_recall",
    "project_scope_fallback",
    "error_driven_repair",
    "multi_agent_consensus",
)


# The session events an assembly reads: the window and the important older turns it
# compresses come from these (a longer session's earlier turns reach it through memory).
HISTORY_READ = 500


class Assembler:
    """Assembles prompts for one context base under a set of policies.

    `policies` is a PolicySet, a PolicyFile (reloaded when the file changes), a path to a
    YAML file (watched the same way), YAML text, or None: the policies the context base was
    opened with (`ctxbase.open(..., policies=...)`), else the shipped defaults.
    `llm` (or the CTXBASE_LLM_* environment) makes older history summaries abstractive;
    without it they are extractive.
    """

    def __init__(
        self,
        cb: ComponentsSource,
        policies: PolicySet | PolicyFile | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        *,
        counter: TokenCounter | None = None,
        llm: LLMConfig | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        max_item_tokens: int = 600,
    ) -> None:
        self.cb = components_of(cb)
        own = getattr(cb, "assembler", None) if policies is None else None
        # `Assembler(cb)` of a context base opened with `policies=` assembles under them
        self._policies: PolicySet | PolicyFile = (
            own.policy_source if isinstance(own, Assembler) else policy_source(policies)
        )
        self.counter = counter if counter is not None else get_token_counter()
        self.llm = llm if llm is not None else LLMConfig.from_env()
        self.system_prompt = system_prompt
        self.max_item_tokens = max_item_tokens

    @property
    def policy_source(self) -> PolicySet | PolicyFile:
        """The policies as given: a set, or the watched file they load from."""
        return self._policies

    @property
    def policies(self) -> PolicySet:
        src = self._policies
        return src.current() if isinstance(src, PolicyFile) else src

    def policy_status(self) -> dict[str, Any] | None:
        """The watched policy file's state (see `PolicyFile.status`); None without one."""
        src = self._policies
        return src.status() if isinstance(src, PolicyFile) else None

    def assemble(
        self,
        *,
        project_id: str | None = None,
        session_id: str | None = None,
        agent_role: str,
        user_intent: str,
        max_tokens: int | None = None,
        task_id: str | None = None,
        debug: bool = False,
        require_signature: bool = False,
        signing_key: bytes | str | None = None,
        repos: Sequence[str] | None = None,
        strategy: str | None = None,
        intent_from_history: bool = False,
        memory_scope: MemoryScope | None = None,
        user_id: str | None = None,
    ) -> AssembledContext:
        """Assemble the prompt for `agent_role` answering `user_intent` (see module doc).

        The history stays in time order. A user message of the session whose text is the
        intent is the latest input (last in the prompt) only while it is unanswered; an
        answered one keeps its place in the history. `intent_from_history` says the intent
        is that message and no new input (ContextManager.get_prompt_messages without
        `user_input`): when it was answered, no latest input follows the history and the
        intent only steers what the other layers retrieve.

        `repos` keeps out entities ingested from any other repository (events and entities
        of no repository still come in); the trace lists them as dropped ("other
        repository"). `strategy` names the one strategy to run (besides the history window),
        whatever the policy's triggers say; the policy's parameters for it apply when it
        lists it.

        `memory_scope` (default: the policy's, "project") "user" keeps memory to the asking
        user's sessions and knowledge of no session (user_scope.py): `user_id`, else the
        session's user; the trace says which.

        With `require_signature`, entities and captured events (the history's turns too,
        signed_turns.py) whose HMAC signature does not verify (key: `signing_key`, else
        $CTXBASE_HMAC_KEY_<PROJECT>, else $CTXBASE_HMAC_KEY), search units whose text is not
        their signed entity's, relations that do not verify, and unsigned entities, events
        and relations are kept out; the trace lists them as dropped ("tampered",
        "unsigned") and `AssembledContext.tampered` names the tampered ones.

        Raises BudgetTooSmall (naming the least budget) when the system prompt and the latest
        input, as messages, exceed `max_tokens`; both are kept whole, the other layers shrink
        or vanish when the budget is tight. Archived
        sessions are refused; a session with no events yet has an empty history (a note in
        the trace says so).
        """
        t0 = time.perf_counter()
        check_query(user_intent, field="user_intent")
        check_role(agent_role)
        for field, given in (("session_id", session_id), ("task_id", task_id)):
            if given is not None:
                id_arg(field, given)  # a SessionInfo or TaskInfo where its id goes, say so
        pid = self.cb.project if project_id is None else project_id
        if self.cb.embeds:
            # Every policy searches the intent: its embedding runs while the session, the
            # history and the strategies' other reads are fetched.
            self.cb.searcher.prefetch_query(user_intent)
        # A Chinese intent is segmented by every keyword search: the segmenter's dictionary
        # (seconds, once per process) loads meanwhile too. The strategies search nothing
        # but the intent, so an English one never needs it.
        segmented = needs_segmenter(user_intent)
        if segmented:
            prefetch_segmenter()
            prefetch_term_bridge()  # its keyword terms may be carried to English (seconds)
        key = _signing_key(pid, signing_key) if require_signature else None
        repo_set = _repo_set(repos)
        session = None
        if session_id is not None:
            session = self.cb.store.get_session(pid, session_id)
            # A session with no events yet (an agent's first turn assembles before anything
            # is captured) has an empty history; the trace says so.
            if session is not None and session.status == Status.ARCHIVED:
                raise ConflictError(f"session {session_id!r} is archived; assemble in a live one")
        if task_id is None and session is not None:
            current = session.metadata.get(CURRENT_TASK_KEY)
            task_id = str(current) if current else None
        task = self.cb.store.get_task(pid, task_id) if task_id else None
        if task_id and task is None:
            raise NotFoundError("task", task_id)
        events = (
            self.cb.store.list_events(pid, session_id, last_n=HISTORY_READ) if session_id else []
        )
        failing = next((e for e in reversed(events) if e.type == "tool_result"), None)
        failing = failing if failing is not None and event_failed(failing) else None
        selection = self.policies.select(
            pid, agent_role, user_intent, has_error=failing is not None
        )
        if strategy is not None:
            selection = _forced(selection, strategy)
        policy = selection.policy
        store = self.cb.store
        scope_name, scope = scope_for(
            memory_scope, policy.memory_scope, store, pid, session, session_id, events, user_id
        )
        limit = check_max_tokens(policy.max_tokens if max_tokens is None else max_tokens)
        # The deadline bounds the assembly's own work: a model still starting up and the
        # segmenter's dictionary still loading (the first assembly of a process) are waited
        # for, overlapped with the reads above, before it runs.
        clock = t0
        waits: dict[str, float] = {}
        if self.cb.embeds and self.cb.searcher.wait_for_model(user_intent):
            clock = time.perf_counter()
            waits["model_start"] = round((clock - t0) * 1000.0, 3)
        if segmented:
            t = time.perf_counter()
            if load_segmenter():
                clock = time.perf_counter()
                waits["segmenter_load"] = round((clock - t) * 1000.0, 3)
        deadline = clock + policy.assemble_timeout_ms / 1000.0
        stale = self._policies.stale_note() if isinstance(self._policies, PolicyFile) else None
        notes: list[str] = [] if stale is None else [stale]
        if selection.role_note is not None:
            notes.append(selection.role_note)
        if session_id is not None and session is None:
            notes.append(f"session {session_id!r} has no events yet: the history is empty")
        if scope is not None:
            notes.append(scope.describe())

        # Every fact the assembly shows and the session's message statuses: one read.
        others = (
            self.cb.store.list_tasks(pid, session_id)
            if policy.view == "global" and session_id
            else []
        )
        scopes = state_scopes(
            pid, session_id, task_id, policy.view, session_user(session), [t.id for t in others]
        )
        asked = [(scope, scope_id) for scope, scope_id, _ in scopes]
        lapsed: list[StateFact] = []  # facts past their ttl: named in the trace's drops
        facts = get_scope_facts(
            self.cb,
            [*asked, *([(MESSAGE_SCOPE, session_id)] if session_id else [])],
            project=pid,
            lapsed=lapsed,
        )
        statuses = statuses_of(facts[(MESSAGE_SCOPE, session_id)].values()) if session_id else {}
        window = policy.strategy("recent_window")
        if not isinstance(window, RecentWindow) or not window.enabled:
            window = RecentWindow()
            notes.append("recent_window not in the policy; history uses its defaults")
        hist, hist_dropped, input_event, held = history_turns(
            events, statuses, task_id, policy.view, user_intent, viewer=agent_role
        )
        # another agent's thoughts stay out of memory as they do out of the history
        private = {d["id"]: d["reason"] for d in hist_dropped if d["reason"] == OTHERS_THOUGHT}
        fresh = strategy is None and new_task(store, pid, session_id, task_id, events, input_event)
        if fresh and task_id is not None:  # a task's first turn: the role's baseline loads
            selection = with_task_baseline(selection, task_id)
        hist, echoed = mark_echoes(hist, events, statuses)  # repeats of a retracted message
        notes.extend(echoed)
        if key is not None:  # turns that do not verify leave, named in the drops
            hist, held, unverified = keep_signed(hist, held, events, key, user_intent)
            hist_dropped += unverified
        latest = user_intent
        if intent_from_history and input_event is None and hist:
            latest = ""  # the newest user message was answered: nothing new to answer
            notes.append(
                "the newest user message was answered: it stays in the history and no "
                "latest input follows"
            )
        # what the history shows (the window's turns within its quota; important ones,
        # compressed) is not recalled again; a turn it leaves out may be
        intent_tokens, view = self.counter.count(user_intent), TurnView(agent_role, self.counter)

        def plan_for(turns: Sequence[Event]) -> HistoryPlan:
            return plan_history(turns, events, window, policy, limit, intent_tokens, view)

        plan = plan_for(hist)
        shown = plan.shown
        exclude = (
            {e.id for e in shown}
            | set(held)
            | set(private)
            | ({input_event} if input_event else set())
        )
        g = Gatherer(
            self.cb,
            pid,
            policy,
            session_id=session_id,
            intent=user_intent,
            exclude=exclude,
            task_id=task_id,
            signing_key=key,
            repos=repo_set,
            statuses={session_id: statuses} if session_id else None,
            held={
                **{e.id: "a turn of the history" for e in shown},
                **{c: f"a call of {m}, in the history" for c, m in held.items()},
                **private,
            },
            scope=scope,
        )
        timings: dict[str, float] = {"prepare": _ms(t0), **waits}
        from ..retrieve.synced import one_generation  # numpy: not at import

        # one reading of the index generation for every search and rating read of this
        # assembly (each is a round trip on PostgreSQL)
        with one_generation():
            ran, skipped = self._run(
                g,
                selection,
                agent_role,
                failing,
                sum(e.type != THOUGHT_TYPE for e in hist),
                deadline,
                timings,
                consensus=strategy in (None, "multi_agent_consensus"),
                new_task=task_id if fresh else None,
            )
            if skipped:
                notes.append(
                    f"assemble_timeout_ms={policy.assemble_timeout_ms} exceeded after "
                    f"{_ms(clock)} ms; skipped optional strategies: {', '.join(skipped)}"
                )
            g.note_unknown_repos()
            drop_unanswered(g)  # another session's question like the intent: with its answer
            notes.extend(g.notes)
            if g.check is not None:  # an entity found tampered later stays out everywhere
                for refused in [oid for oid in g.cands if oid in g.check.refused]:
                    del g.cands[refused]

            t = time.perf_counter()
            layers = {
                "state": state_items(scopes, facts),
                "task": task_items(task, others),
            }
            # what is rated false or cut from a retracted message leaves the memory layer, and a
            # message rated false the history too (read with the candidates' ratings: one read)
            false = g.drop_withdrawn([e.id for e in hist])
            add_corrections(g, [(e, false[e.id]) for e in hist if e.id in false])
            if false:
                hist = [e for e in hist if e.id not in false]
                plan = plan_for(hist)  # what the history shows, without them
                hist_dropped += [
                    {"id": i, "layer": "history", "reason": "rated false", "detail": c.source}
                    for i, c in false.items()
                ]
        items, roles, quotes, hist_notes = self._layer_items(
            pid, layers, policy, agent_role, g, plan, window, events
        )
        notes.extend(hist_notes)
        alloc, messages = self._fit_with_stand_ins(
            g, items, roles, quotes, policy, limit, latest, notes
        )
        timings["budget"] = _ms(t)
        timings["total"] = _ms(t0)
        context_id = f"ctx_{uuid.uuid4().hex[:20]}"
        request: dict[str, Any] = {
            "project_id": pid,
            "session_id": session_id,
            "task_id": task_id,
            "agent_role": agent_role,
            "intent": user_intent,
            "max_tokens": limit,
            "has_error": failing is not None,
            "require_signature": require_signature,
            "memory_scope": scope_name,
        }
        if scope is not None:
            request["user_id"] = scope.user_id
        if repo_set is not None:
            request["repos"] = sorted(repo_set)
        ctx = build_result(
            self.cb,
            context_id=context_id,
            request=request,
            policy=policy.name,
            policy_source=selection.source or self.policies.source,
            policy_origin=selection.origin,
            view=policy.view,
            reasons=selection.reasons,
            ran=ran,
            skipped=skipped,
            cands=g.cands,
            considered=g.considered,
            dropped=[*g.dropped, *hist_dropped, *lapsed_drops(lapsed)],
            relations=g.relations,
            alloc=alloc,
            messages=messages,
            notes=notes,
            timings=timings,
            counter=self.counter,
            check=g.check,
            threshold_for=policy.threshold_for,
            quoted_layers=LAYER_QUOTES,
            quotes=quotes,
        )
        store_trace(self.cb.store, pid, context_id, ctx.trace)  # redacted for a forget meanwhile
        # the memories this context placed: time decay spares what is often used
        placed = (c for c in ctx.trace["candidates"] if c.get("included"))
        made = (CORRECTION, CONFLICT)  # items of no stored node
        self.cb.searcher.usage.note(pid, (c["id"] for c in placed if c["kind"] not in made))
        log_trace(ctx.trace, full=debug)
        return ctx

    # -- gathering -------------------------------------------------------------------------
    def _run(
        self,
        g: Gatherer,
        selection: PolicySelection,
        role: str,
        failing: Event | None,
        session_messages: int,
        deadline: float,
        timings: dict[str, float],
        *,
        consensus: bool,
        new_task: str | None = None,
    ) -> tuple[list[str], list[str]]:
        by_name: dict[str, Strategy] = {s.name: s for s in selection.strategies}
        listed = selection.policy.strategy("multi_agent_consensus")
        if (
            consensus
            and isinstance(listed, MultiAgentConsensus)
            and listed.enabled
            and listed.name not in by_name
            and acts_as_agent(g, self.policies, listed, role) is not None
        ):
            by_name[listed.name] = listed  # e.g. test_gen shares the tester's policy
        ran = ["recent_window"] if "recent_window" in by_name else []
        skipped: list[str] = []
        for name in _OPTIONAL_ORDER:
            s = by_name.get(name)
            if s is None or (name == "multi_agent_consensus" and not consensus):
                continue
            if time.perf_counter() > deadline:
                skipped.append(name)
                continue
            t = time.perf_counter()
            if isinstance(s, ReferencedCodeFirst):
                referenced_code_first(g, s)
            elif isinstance(s, SemanticRecall):
                semantic_recall(g, s)
            elif isinstance(s, ProjectScopeFallback):
                project_scope_fallback(g, s, session_messages, new_task)
            elif isinstance(s, ErrorDrivenRepair):
                error_driven_repair(g, s, failing)
            elif isinstance(s, MultiAgentConsensus):
                aliases = agent_aliases(self.policies, g.pid, g.intent, s.agents)
                multi_agent_consensus(g, s, role, aliases)
            ran.append(name)
            timings[name] = _ms(t)
        return ran, skipped

    # -- layers ----------------------------------------------------------------------------
    def _layer_items(
        self,
        pid: str,
        layers: dict[str, list[BudgetItem]],
        policy: Policy,
        role: str,
        g: Gatherer,
        plan: HistoryPlan,
        window: RecentWindow,
        events: Sequence[Event],
    ) -> tuple[dict[str, list[BudgetItem]], dict[str, str], dict[str, Quote], list[str]]:
        counter, notes = self.counter, list[str]()
        view = TurnView(role, counter)  # other agents' turns prefixed, tool output quoted
        in_window, before, groups, orphans, whole, to_compress, used, quota = plan
        if orphans:
            notes.append(
                f"recent_window: {len(orphans)} tool result(s) left out with their call, "
                f"older than the window: {', '.join(orphans)}"
            )
        kept = {e.id for e in whole}
        # memory's tool results named by their calls, its messages with their calls; then
        # what the history shows is left out (a window turn past its quota that memory
        # recalls is shown there, not in the history), then repeats within memory
        link_calls(g)
        said = [e for e in in_window if e.id in kept or e.id not in g.cands]
        g.drop_said({e.id: e.text or "" for e in said}, results_with_calls(said, events))
        g.drop_repeats()
        if policy.dynamic_top_k is not None and policy.memory_token_allowance is not None:
            # the allowance counted on what the prompt holds, not on the search's raw texts
            lo, allowance = policy.dynamic_top_k[0], policy.memory_token_allowance
            note = keep_within_allowance(g, counter, self.max_item_tokens, lo, allowance)
            notes.extend([note] if note else [])
        # the prompt says once that quoted data is data, a caller's own prompt too
        system = with_data_note(self.system_prompt).format(role=prompt_name(role), project=pid)
        items: dict[str, list[BudgetItem]] = {
            "system": [BudgetItem("system", system, 1.0, required=True, source="policy")],
            **layers,
            "memory": memory_items(g.cands, counter, self.max_item_tokens),
        }
        roles: dict[str, str] = {}
        quotes: dict[str, Quote] = {}
        # History: the newest messages whole; older important ones compressed into one item.
        outside = [e for e in before if important(e)]
        if to_compress:
            summary = self._summarize(
                [e.text or "" for e in to_compress],
                max(0, quota - used - ITEM_OVERHEAD - _SUMMARY_QUOTE.frame(counter) - 8),
                notes,
            )
            if summary:
                text = neutralise(summary)  # older turns' words, quoted as data
                items.setdefault("history", []).append(
                    BudgetItem(
                        "summary",
                        text,
                        0.5,
                        source="compressed:" + ",".join(e.id for e in to_compress),
                        cut="clauses",
                        overhead=_SUMMARY_QUOTE.cost(text, counter),
                    )
                )
                roles["summary"] = "user"
                quotes["summary"] = _SUMMARY_QUOTE
        kept = {e.id for e in whole}
        compressed = {e.id for e in to_compress}
        n = len(in_window)
        beyond = 0
        for i, e in enumerate(in_window):
            if e.id in compressed:
                continue
            if window.max_tokens is not None and e.id not in kept:
                beyond += e.type != THOUGHT_TYPE  # a window in tokens (seed 004) ends there
                continue
            if e.id not in kept and e.id in g.cands:
                continue  # past the quota and recalled by memory: shown once, there
            # Whole recent messages first, newest first; the rest may use spare tokens.
            score = 1.0 + i / max(n, 1) if e.id in kept else 0.1 + 0.1 * i / max(n, 1)
            cut: CutKind = "lines" if e.type in LINE_TYPES else "prose"  # a tool call or result
            items.setdefault("history", []).append(
                BudgetItem(
                    e.id,
                    view.text(e),
                    score,
                    source=e.type,
                    cut=cut,
                    keep=view.keep(e),  # its label or role prefix
                    group=groups.get(e.id, ""),
                    aside=e.type == THOUGHT_TYPE,
                    overhead=view.overhead(e),
                )
            )
            roles[e.id] = view.role(e)
            if (q := view.quote(e)) is not None:
                quotes[e.id] = q
        if said_before := [e for e in before if e.type != THOUGHT_TYPE]:
            older, read = len(said_before), ""
            if len(events) >= HISTORY_READ:  # the session holds more than was read
                first = events[0]
                held = self.cb.store.event_counts(first.project_id, first.session_id)
                in_session = sum(c.count for c in held if c.type != THOUGHT_TYPE)
                older += max(0, in_session - sum(1 for e in events if e.type != THOUGHT_TYPE))
                read = f" among the last {HISTORY_READ} events read"
            notes.append(
                f"recent_window: {older} older messages "
                f"outside the window ({len(outside)} important{read}, compressed)"
            )
        if beyond:
            notes.append(
                f"recent_window: {beyond} older messages past max_tokens={window.max_tokens}"
            )
        return items, roles, quotes, notes

    def _summarize(self, texts: list[str], max_tokens: int, notes: list[str]) -> str:
        if max_tokens <= 0 or not texts:
            return ""
        if self.llm is not None:
            try:
                return llm_summary(self.llm, texts, max_tokens, self.counter)
            except Exception as exc:  # any endpoint failure: the extractive summary still works
                notes.append(f"LLM summary failed ({type(exc).__name__}); used extractive")
        summary = extract_summary(texts, max_tokens, self.counter)
        if summary.left_out:
            notes.append(left_out_note(summary.left_out, max_tokens))
        return summary.text

    # -- budget and result -----------------------------------------------------------------
    def _fit_with_stand_ins(
        self,
        g: Gatherer,
        items: dict[str, list[BudgetItem]],
        roles: Mapping[str, str],
        quotes: Mapping[str, Quote],
        policy: Policy,
        limit: int,
        intent: str,
        notes: list[str],
    ) -> tuple[BudgetAllocation, list[dict[str, str]]]:
        """`fit_messages`; then what an item the budget left out or cut says, left out as its
        repeat (a decision its message says), comes back and the layers are fitted again."""
        shares, latest_share = policy.budget.as_mapping(), policy.budget.latest
        alloc, messages = fit_messages(
            items, roles, quotes, shares, limit, intent, self.counter, latest_share
        )
        layer = alloc.layers.get("memory")
        cut = {i.item.id: i.text for i in layer.included if i.truncated} if layer else {}
        back = g.stand_in_for((d.item.id for d in alloc.dropped if d.layer == "memory"), cut)
        if not back:
            return alloc, messages
        items["memory"] = memory_items(g.cands, self.counter, self.max_item_tokens)
        alloc, messages = fit_messages(
            items, roles, quotes, shares, limit, intent, self.counter, latest_share
        )
        layer = alloc.layers.get("memory")
        shown = {i.item.id for i in layer.included} if layer else set()
        notes.extend(
            f"budget: {holder} did not fit whole; {owner}, which says part of it, is shown"
            for holder, owner in back
            if owner in shown
        )
        return alloc, messages


def _forced(selection: PolicySelection, name: str) -> PolicySelection:
    """The selection with `name` as its only strategy (plus the policy's history window)."""
    if name not in STRATEGY_NAMES:
        raise ValidationError(
            "strategy", f"unknown strategy {name!r}; valid: {', '.join(STRATEGY_NAMES)}"
        )
    policy = selection.policy
    chosen = policy.strategy(name) or strategy_defaults(name)
    chosen = chosen.model_copy(update={"enabled": True})
    window = policy.strategy("recent_window")
    kept: tuple[Strategy, ...] = (chosen,)
    if name != "recent_window" and window is not None and window.enabled:
        kept = (window, chosen)
    reason = f"strategy {name!r} requested by the caller (the policy's triggers not used)"
    return PolicySelection(
        policy,
        kept,
        (*selection.reasons, reason),
        selection.role_note,
        selection.source,
        selection.origin,
    )


def _ms(t: float) -> float:
    return round((time.perf_counter() - t) * 1000.0, 3)


def _repo_set(repos: Sequence[str] | None) -> frozenset[str] | None:
    if repos is None:
        return None
    if isinstance(repos, str) or not all(isinstance(r, str) and r for r in repos):
        raise ValidationError("repos", f"must be a list of repository names (got {repos!r})")
    check_names("repos", list(repos))
    return frozenset(repos)


def _signing_key(pid: str, given: bytes | str | None) -> bytes:
    from ..anchor.signing import project_key

    key = project_key(pid, given)
    if key is None:
        raise ValidationError(
            "signing_key",
            "require_signature needs a key (argument or CTXBASE_HMAC_KEY_<PROJECT> / "
            "CTXBASE_HMAC_KEY)",
        )
    return key

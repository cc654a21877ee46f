"""Feedback on memories (`FeedbackMethods`, mixed into ContextBase): seed 001's
confidence labels (6.2, "用户的直接反馈如点赞/点踩").

An agent or a user marks an event or entity (or a recalled search unit of one) as liked,
helpful, disliked or wrong, optionally naming the assembled context it was seen in. The
label sets the node's confidence, which search ranking uses (retrieve/signals.py,
score_adjust.weigh_confidence): disliked memories rank lower, liked ones a little higher,
and one below `SearchConfig.min_confidence` (a wrong one) is left out. It is a
correction, not a forget: the memory stays stored, and feedback "neutral" undoes it. A
message's rating holds for the statements anchored from it (a decision, its SQL); an
entity's holds for its message when the two say the same (`_same_statement`). A rating
is on what a memory says: it holds for the events saying the same text (`_copies`), which
search folds into the rated hit (`Candidate.duplicates`), so a hit rated wrong is not
answered by its copy, and the next rating of any of them ("neutral") reaches the others.

The record is a state record keyed by the node (store.base.FEEDBACK_SCOPE): the latest
feedback is current, its history keeps every one given, and a hard forget of the node
removes both. Giving feedback moves the project's index generation on, which searches
cache confidence by (retrieve/signals.py) and the service caches assemblies by.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from .aliases import identity_source
from .errors import NotFoundError, ValidationError
from .model import StateFact, check_id
from .read_your_writes import settles_captures
from .retrieve.signals import feedback_confidence
from .store.base import FEEDBACK_SCOPE

if TYPE_CHECKING:
    from .components import Components
    from .model import Event
    from .store.base import Store

__all__ = [
    "FEEDBACK_LABELS",
    "Feedback",
    "FeedbackMethods",
    "check_label",
    "give_feedback",
    "read_feedback",
]

# Each label's confidence (0.5: neutral, as an item nobody rated). A caller's own
# `confidence` replaces it: "wrong" with 0 leaves the memory out of every search.
FEEDBACK_LABELS: dict[str, float] = {
    "liked": 0.75,
    "helpful": 0.75,
    "neutral": 0.5,
    "disliked": 0.25,
    # false: left out (below SearchConfig.min_confidence), as seed 001's confidence filter
    # does; a low but kept rank is "disliked" or a confidence the caller gives
    "wrong": 0.0,
}
_MAX_NOTE = 2000


class Feedback(BaseModel):
    """The current feedback on one node (event or entity)."""

    model_config = ConfigDict(extra="forbid")

    node_id: str
    label: str
    confidence: float
    context_id: str | None = None  # the assembled context the memory was seen in
    item_id: str | None = None  # the search unit (a chunk) it was given on, if not the node
    note: str | None = None
    by: str
    at: float
    version: int = 1  # how many times feedback was given on this node
    # the nodes given the same feedback: the statements anchoring cut from a rated message
    # (a decision, its SQL), or the message an entity was cut from when it says only that
    same_statement: list[str] = Field(default_factory=list)
    # the message a rated entity was cut from, when it says more: not rated with it (rated
    # "wrong", the entity is left out, and that message still says it)
    also_said_in: list[str] = Field(default_factory=list)
    # the visible events saying the same text (the copies search folds into one hit, its
    # `duplicates`), given the same feedback: a rating is on what a memory says
    same_text: list[str] = Field(default_factory=list)


def _record(fact: StateFact) -> Feedback | None:
    value = fact.value
    if not isinstance(value, dict) or feedback_confidence(value) is None:
        return None
    return Feedback(
        node_id=fact.key,
        label=str(value.get("label")),
        confidence=float(value["confidence"]),
        context_id=value.get("context_id"),
        item_id=value.get("item_id"),
        note=value.get("note"),
        by=str(value.get("by") or ""),
        at=fact.updated_at,
        version=fact.version,
    )


def _owner(store: Store, pid: str, node_id: str) -> tuple[str, str | None]:
    """(the event or entity `node_id` names, the search unit given when it is one). The id
    of an event merged into an aggregated one (a capture burst) names that one."""
    if store.get_events(pid, [node_id], include_inactive=True):
        return node_id, None
    if store.get_entities(pid, [node_id], include_inactive=True):
        return node_id, None
    items = store.get_items(pid, [node_id])
    if items:
        return items[0].owner_id, node_id
    into = store.event_aliases(pid, [node_id]).get(node_id)
    if into is not None:
        return into, None
    if store.forgotten_ids(pid, [node_id], ("event", "entity")):
        # as reads of it say: a rating of a forgotten memory must not read as a typo
        raise NotFoundError.forgotten("node", node_id)
    raise NotFoundError("node", node_id)


def _statements_cut(store: Store, pid: str, events: Sequence[Event]) -> list[str]:
    """The statements capture anchoring cut from `events` (GENERATES, each said within its
    message: a decision, its SQL)."""
    from .assemble.repeats import cut_from

    said = {e.id: e.text or "" for e in events}
    if not said:
        return []
    made = store.list_relations(pid, list(said), direction="out", types=["GENERATES"])
    ids = list(dict.fromkeys(r.to_id for r in made))
    out: list[str] = []
    for entity in store.get_entities(pid, ids, include_inactive=True):
        source = entity.properties.get("event_id")
        if isinstance(source, str) and source in said and cut_from(entity.text, said[source]):
            out.append(entity.id)
    return out


def _same_statement(store: Store, pid: str, owner: str) -> tuple[list[str], list[str]]:
    """(the nodes rated with `owner`, the message `owner` was cut from when that says more).

    A message's rating holds for the statements its anchoring cut from it; an entity's
    rating holds for its message only when the two say the same
    (assemble/repeats.says_the_same): a message that says more is not rated for one of its
    statements, and is named instead."""
    from .assemble.repeats import cut_from, says_the_same

    events = store.get_events(pid, [owner], include_inactive=True)
    if events:
        return _statements_cut(store, pid, events), []
    for entity in store.get_entities(pid, [owner], include_inactive=True):
        source = entity.properties.get("event_id")
        if isinstance(source, str) and source:
            same: list[str] = []
            more: list[str] = []
            for e in store.get_events(pid, [source], include_inactive=True):
                if says_the_same(e.text or "", entity.text):
                    same.append(e.id)
                elif cut_from(entity.text, e.text or ""):
                    more.append(e.id)
            return same, more
    return [], []


def _copies(store: Store, pid: str, owner: str, rated: list[str]) -> list[str]:
    """The visible events saying what `owner` or a statement rated with it says, up to
    whitespace, case and closing punctuation (same_text.py): the copies search folds into
    one hit. Looked up at each rating, none recorded: a record names no other memory,
    which a hard forget of that one would leave behind."""
    from .same_text import same_text_events, texts_said

    nodes = [owner, *rated]
    return same_text_events(store, pid, texts_said(store, pid, nodes), set(nodes))


def check_label(label: str | None) -> str:
    """A feedback's label, always given: a `confidence` replaces the label's value, not the
    label (as REST's 422 and `ctxbase feedback` say)."""
    if label is None:
        raise ValidationError(
            "label",
            f"is missing (one of {sorted(FEEDBACK_LABELS)}; a confidence replaces the "
            "label's value, not the label)",
        )
    if label not in FEEDBACK_LABELS:
        raise ValidationError("label", f"must be one of {sorted(FEEDBACK_LABELS)} (got {label!r})")
    return label


def give_feedback(
    store: Store,
    pid: str,
    node_id: str,
    label: str | None,
    *,
    confidence: float | None = None,
    context_id: str | None = None,
    note: str | None = None,
    by: str,
) -> Feedback:
    """See `FeedbackMethods.feedback`."""
    check_id("node_id", node_id)
    label = check_label(label)
    if confidence is None:
        confidence = FEEDBACK_LABELS[label]
    elif isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise ValidationError("confidence", f"must be a number (got {confidence!r})")
    elif not 0.0 <= confidence <= 1.0:
        raise ValidationError("confidence", f"must be between 0 and 1 (got {confidence})")
    if note is not None and len(note) > _MAX_NOTE:
        raise ValidationError("note", f"must be at most {_MAX_NOTE} characters")
    owner, item_id = _owner(store, pid, node_id)
    if context_id is not None:
        check_id("context_id", context_id)
        if store.trace_project(context_id) != pid:
            raise NotFoundError("context", context_id)
    value: dict[str, Any] = {
        "label": label,
        "confidence": float(confidence),
        "context_id": context_id,
        "item_id": item_id,
        "note": note,
        "by": by,
    }
    cause = f"feedback {label}" + (f" in {context_id}" if context_id else "")
    twins, says_more = _same_statement(store, pid, owner)
    copies = _copies(store, pid, owner, twins)
    # the statements cut from the copies stand or fall with them, as the owner's do
    copied = store.get_events(pid, copies, include_inactive=True) if copies else []
    cut = [i for i in _statements_cut(store, pid, copied) if i != owner and i not in twins]

    def rate(key: str, value: dict[str, Any], cause: str) -> StateFact:
        return store.set_state(
            StateFact(
                project_id=pid, scope=FEEDBACK_SCOPE, scope_id="", key=key, value=value, cause=cause
            )
        )

    stored = rate(owner, value, cause)
    for twin in twins:
        rate(twin, value, f"{cause} (the same statement as {owner})")
    # a copy's record names nothing of the rated memory, which a forget of that one (the
    # copy stays) would leave behind: not its id, nor the chunk the rating was given on
    of_copy = {**value, "item_id": None}
    for copy in copies:
        rate(copy, of_copy, f"{cause} (the same text as the memory rated)")
    for twin in cut:
        rate(twin, of_copy, f"{cause} (cut from a copy of the text rated)")
    store.touch_index(pid)  # searches read confidence again, cached assemblies refresh
    record = _record(stored)
    assert record is not None  # written just above in the shape _record reads
    update = {"same_statement": twins + cut, "also_said_in": says_more, "same_text": copies}
    return record.model_copy(update=update)


def read_feedback(store: Store, pid: str, node_ids: list[str]) -> dict[str, Feedback]:
    """The current feedback on each of `node_ids` that has any."""
    found = store.get_state_keys(pid, FEEDBACK_SCOPE, "", node_ids)
    out: dict[str, Feedback] = {}
    for key, fact in found.items():
        if (record := _record(fact)) is not None:
            out[key] = record
    return out


class FeedbackMethods:
    """Mixed into `ContextBase`: it supplies `store`, `components`, `agent_id`, `_pid` and
    `_settle` (an event captured a moment ago can be rated: read_your_writes)."""

    store: Store
    components: Components
    agent_id: str | None

    def _pid(self, project: str | None) -> str:
        raise NotImplementedError

    def _settle(self, ids: Sequence[str]) -> bool:
        raise NotImplementedError

    @settles_captures
    def feedback(
        self,
        node_id: str,
        label: str | None = None,
        *,
        confidence: float | None = None,
        context_id: str | None = None,
        note: str | None = None,
        by: str | None = None,
        project: str | None = None,
    ) -> Feedback:
        """Mark a memory as "liked", "helpful", "disliked" or "wrong" ("neutral" undoes
        it): an event, an entity, or a search unit (chunk) of one, whose event or entity
        is marked. Its confidence becomes the label's (`FEEDBACK_LABELS`) or `confidence`
        (0..1) and searches rank it by that (`SearchConfig.confidence_weight`; below
        `min_confidence` it is left out, still stored). `context_id` names the assembled
        context it was seen in (NotFoundError if the project has no such context); `by`
        who gives it (default: the base's agent id, else the local user). The latest
        feedback on a node is current; `feedback_history` lists all. A fact a message
        rated false stated is withdrawn, and comes back when its rating is false no more
        (assemble/withheld.py). The visible copies of the same text (a hit's `duplicates`)
        are given the same feedback, named in `same_text`."""
        pid = self._pid(project)
        record = give_feedback(
            self.store,
            pid,
            node_id,
            label,
            confidence=confidence,
            context_id=context_id,
            note=note,
            by=by or identity_source(self.agent_id),
        )
        self._rated_facts(pid, record)
        return record

    def _rated_facts(self, pid: str, record: Feedback) -> None:
        """Withdraw the facts of the rated messages when the rating is false, else bring
        back those an earlier false rating withdrew."""
        from .assemble.withheld import RATED_WRONG, messages_out, reinstate_facts, withdraw_facts
        from .retrieve.config import SearchConfig

        nodes = [record.node_id, *record.same_statement, *record.same_text]
        events = self.store.get_events(pid, nodes, include_inactive=True)
        ids = [e.id for e in events]
        if record.confidence < SearchConfig.model_fields["min_confidence"].default:
            withdraw_facts(self.components, events, RATED_WRONG, project=pid)
            if ids:  # its words stop finding the message they were indexed with
                self.store.set_context_hidden(pid, ids, True)
        else:
            reinstate_facts(self.components, events, f"feedback {record.label}", project=pid)
            back = set(ids) - messages_out(self.components, ids, project=pid)
            if back:
                self.store.set_context_hidden(pid, sorted(back), False)

    @settles_captures
    def get_feedback(self, node_id: str, *, project: str | None = None) -> Feedback | None:
        """The current feedback on an event or entity, or None (NotFoundError when the
        project holds no such node: a mistyped id is not a node without feedback)."""
        check_id("node_id", node_id)
        pid = self._pid(project)
        found = read_feedback(self.store, pid, [node_id]).get(node_id)
        if found is None:  # only on a miss: is the node there at all?
            owner, item_id = _owner(self.store, pid, node_id)
            if item_id is None and owner != node_id:  # merged into an aggregated event
                return read_feedback(self.store, pid, [owner]).get(owner)
        return found

    @settles_captures
    def feedback_history(self, node_id: str, *, project: str | None = None) -> list[Feedback]:
        """Every feedback given on an event or entity, oldest first (NotFoundError when the
        project holds no such node)."""
        check_id("node_id", node_id)
        pid = self._pid(project)
        out: list[Feedback] = []
        for change in self.store.state_history(pid, FEEDBACK_SCOPE, "", node_id):
            fact = StateFact(
                project_id=pid,
                scope=FEEDBACK_SCOPE,
                scope_id="",
                key=node_id,
                value=change.new_value,
                version=change.version,
                updated_at=change.ts,
            )
            if (record := _record(fact)) is not None:
                out.append(record)
        if not out:
            owner, item_id = _owner(self.store, pid, node_id)
            if item_id is None and owner != node_id:  # merged into an aggregated event
                return self.feedback_history(owner, project=project)
        return out

"""Units a user took out that an ingest keeps out when their code changes.

A unit hidden by its own id (`forget --soft --entity`, `set_hidden`) is recorded as hidden
on its own (store/forget_steps.py); when its file changes, the ingest writes its new version
hidden, so `restore` shows it. A unit hard-forgotten (`forget --entity`) leaves a tombstone;
when its code changes, the ingest does not write it again, so it stays forgotten. Units the
ingest removed itself (gone from their file, or their file gone) are recorded as removed,
not hidden, and come back when they reappear. `readmit` writes both kinds back, visible.

A tombstone counts only for a unit its file still lists (the file as last ingested held it):
a unit the ingest removed and a retention purge forgot since comes back when it reappears,
and forgetting a whole repository removes its file entities, so its next ingest brings
every unit back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..components import Components
from ..model import Entity
from ..store.forget_steps import HIDDEN_ON_ITS_OWN, SOFT_DELETED_SCOPE

__all__ = ["FORGOTTEN", "HIDDEN", "held_out_files", "left_out_units"]

HIDDEN = "hidden"
FORGOTTEN = "forgotten"


def left_out_units(
    cb: Components,
    pid: str,
    wanted: Sequence[tuple[Entity | None, str]],
    stored: Mapping[str, Entity],
) -> dict[str, str]:
    """Of the units an ingest is about to write (each with its file's stored entity, None
    for a file new to the project), those a user hid (-> HIDDEN) or hard-forgot (->
    FORGOTTEN). `stored`: the entities of those ids the store holds, active or not."""
    out: dict[str, str] = {}
    inactive = [uid for _, uid in wanted if uid in stored and not stored[uid].active]
    if inactive:
        records = cb.store.get_state_keys(pid, SOFT_DELETED_SCOPE, "", inactive)
        out.update(
            (uid, HIDDEN) for uid, fact in records.items() if fact.cause == HIDDEN_ON_ITS_OWN
        )
    # only a unit its file still lists: one the ingest removed before may have been purged
    # since (`forget --soft-deleted-older-than`), which is no reason to keep it out
    listed = [
        uid
        for file, uid in wanted
        if file is not None and uid not in stored and uid in (file.properties.get("units") or {})
    ]
    if listed:
        out.update((uid, FORGOTTEN) for uid in cb.store.forgotten_ids(pid, listed, ("entity",)))
    return out


def held_out_files(cb: Components, pid: str, files: Sequence[Entity | None]) -> set[str]:
    """Of these stored file entities (of files unchanged), the ids of those listing a unit
    not stored visible: what `readmit` reads again to write such units back."""
    units = {f.id: list(f.properties.get("units") or {}) for f in files if f is not None}
    ids = [uid for group in units.values() for uid in group]
    if not ids:
        return set()
    shown = {e.id for e in cb.store.get_entities(pid, ids)}
    return {fid for fid, group in units.items() if any(uid not in shown for uid in group)}

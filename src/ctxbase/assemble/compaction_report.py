"""What a compaction of archived sessions did (assemble/compaction.py): its own module, so
the remote SDK reads the answer without loading the compaction's code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CompactionReport"]


@dataclass
class CompactionReport:
    """What `compact_archived` did: the sessions compacted now (a summary written, their
    turns hidden), how many turns it hid, and the archived sessions it left: those compacted
    before, those archived more recently than the threshold, and those with no turn left."""

    compacted: list[str] = field(default_factory=list)
    events_hidden: int = 0
    already_compacted: list[str] = field(default_factory=list)
    too_recent: list[str] = field(default_factory=list)
    nothing_to_compact: list[str] = field(default_factory=list)
    # over every project (all_projects): each project's own report, as session ids repeat
    # from one project to another
    by_project: dict[str, CompactionReport] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "compacted": list(self.compacted),
            "events_hidden": self.events_hidden,
            "already_compacted": list(self.already_compacted),
            "too_recent": list(self.too_recent),
            "nothing_to_compact": list(self.nothing_to_compact),
        }
        if self.by_project:
            out["projects"] = {pid: r.as_dict() for pid, r in self.by_project.items()}
        return out

    def add(self, other: CompactionReport, project: str | None = None) -> None:
        """Count `other` (another project's, named `project` over every project) in this
        one."""
        if project is not None:
            self.by_project[project] = other
        self.compacted += other.compacted
        self.events_hidden += other.events_hidden
        self.already_compacted += other.already_compacted
        self.too_recent += other.too_recent
        self.nothing_to_compact += other.nothing_to_compact

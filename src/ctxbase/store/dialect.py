"""The few places where the backends' SQL differs, and the SQL built from them.

Shared statements are written with `?` placeholders; `Dialect.sql` puts in the driver's own
(`?` for sqlite3, `%s` for psycopg). Each backend module defines its dialect; the code here
never asks which backend it serves.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from .records import ItemFilter, KnowledgeView

__all__ = ["Dialect", "filter_sql"]


class Dialect(ABC):
    """What one backend's SQL texts and JSON columns look like."""

    # The driver's parameter placeholder.
    placeholder: str = "?"
    # Prefix of the deliberate cross-project reads (a marker comment, or nothing).
    cross_project: str = ""

    def sql(self, text: str) -> str:
        """A statement written with `?` placeholders, in the driver's placeholder style."""
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    @abstractmethod
    def load(self, value: Any) -> Any:
        """A stored JSON column as a Python value."""

    @abstractmethod
    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """`column` is one of `values`: the condition (with `?`) and its arguments."""

    @abstractmethod
    def starts_with(self, column: str, prefix: str) -> tuple[str, list[Any]]:
        """`column` starts with `prefix`: the condition (with `?`) and its arguments."""

    @abstractmethod
    def json_text(self, column: str, key: str) -> str:
        """The top-level `key` of a JSON column, as text (NULL when missing)."""

    @abstractmethod
    def contains(self, column: str) -> str:
        """`column` (JSON or text, read as its text) contains the `?` argument."""

    @abstractmethod
    def store_json(self, value: Any) -> Any:
        """A Python value as the argument a JSON column is written from."""


def filter_sql(dialect: Dialect, flt: ItemFilter | None, alias: str = "i") -> tuple[str, list[Any]]:
    """ItemFilter as ` AND ...` conditions on the items table, with the same meaning on every
    backend."""
    if flt is None:
        return "", []
    sql = ""
    args: list[Any] = []
    for col, values in (
        ("session_id", flt.session_ids),
        ("agent_id", flt.agent_ids),
        ("agent_role", flt.agent_roles),
        ("type", flt.types),
        ("kind", flt.kinds),
        ("owner_id", flt.owner_ids),
        ("repo", flt.repos),
    ):
        if values is not None:
            cond, cond_args = dialect.any_of(f"{alias}.{col}", values)
            sql += f" AND {cond}"
            args += cond_args
    if flt.path_prefix is not None:
        cond, cond_args = dialect.starts_with(f"{alias}.path", flt.path_prefix)
        sql += f" AND {cond}"
        args += cond_args
    for cond, value in (
        ("line_end >= ?", flt.line_from),
        ("line_start <= ?", flt.line_to),
        ("ts >= ?", flt.since),
        ("ts <= ?", flt.until),
    ):
        if value is not None:
            sql += f" AND {alias}.{cond}"
            args.append(value)
    view = flt.view
    shown: tuple[str, list[Any]] | None = None
    if view is not None and view.shown_owner_ids:
        shown = dialect.any_of(f"{alias}.owner_id", view.shown_owner_ids)
    if flt.latest_only:
        if shown is None:
            sql += f" AND {alias}.latest = 1"
        else:  # a version the pinned tag holds counts as the latest
            sql += f" AND ({alias}.latest = 1 OR {shown[0]})"
            args += shown[1]
    if flt.exclude_session_ids:
        cond, cond_args = dialect.any_of(f"{alias}.session_id", flt.exclude_session_ids)
        sql += f" AND ({alias}.session_id IS NULL OR NOT {cond})"
        args += cond_args
    if view is not None:
        sql_v, args_v = _view_sql(dialect, view, alias, shown)
        sql += sql_v
        args += args_v
    return dialect.sql(sql), args


def _view_sql(
    dialect: Dialect, view: KnowledgeView, alias: str, shown: tuple[str, list[Any]] | None
) -> tuple[str, list[Any]]:
    """Items of the view's repositories: the latest ones not hidden, and the shown ones."""
    repo_in, args = dialect.any_of(f"{alias}.repo", view.repos)
    kept = f"{alias}.latest = 1"
    if view.hidden_owner_ids:
        hidden, hidden_args = dialect.any_of(f"{alias}.owner_id", view.hidden_owner_ids)
        kept += f" AND NOT {hidden}"
        args += hidden_args
    sql = f" AND ({alias}.repo IS NULL OR NOT {repo_in} OR ({kept})"
    if shown is not None:
        sql += f" OR {shown[0]}"
        args += shown[1]
    return sql + ")", args

"""Exceptions raised by ctxbase. Every error that concerns one input names that input's field."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "NEW_PROJECT_HINT",
    "AddressInUseError",
    "ConflictError",
    "CtxbaseError",
    "EmbedderUnavailableError",
    "NotFoundError",
    "RepositoryForgottenError",
    "RepositoryNameTakenError",
    "RepositoryOverlapError",
    "StorageError",
    "UnknownProjectError",
    "UnknownReposError",
    "ValidationError",
]


class CtxbaseError(Exception):
    """Base class of every ctxbase error; `code` is stable and used by the REST layer."""

    code = "error"


class ValidationError(CtxbaseError, ValueError):
    """Bad input. `field` names the offending field (dotted path for nested input)."""

    code = "invalid"

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class RepositoryNameTakenError(ValidationError):
    """An ingest under a repository name another folder holds: nothing was written.

    `repo` is the name, `held_by` the folder whose files it holds, `folder` the one being
    ingested; `options` are how the caller names another repository and says the folder
    moved (`repo=NAME`, `moved=True` in the library; `--repo NAME`, `--moved` on the
    command line)."""

    def __init__(
        self,
        repo: str,
        held_by: str,
        folder: str,
        options: tuple[str, str] = ("repo=NAME", "moved=True"),
    ) -> None:
        self.repo = repo
        self.held_by = held_by
        self.folder = folder
        name, moved = options
        super().__init__(
            "repo",
            f"repository {repo!r} holds the files of {held_by}; {folder} is another folder: "
            f"pass {name} to ingest it under a name of its own, or {moved} if it is that "
            "folder moved here (nothing was changed)",
        )


class RepositoryOverlapError(ValidationError):
    """An ingest whose folder lists files another repository of the project holds: they
    would be stored twice, under two names; nothing was written.

    `repo` is the name this ingest writes under, `held_by` the repository holding `files` of
    them (its folder: `held_root`), `folder` the one being ingested, `example` one of those
    paths. `same_root`: this ingest stores paths relative to `held_root` too, so ingesting
    under `held_by` updates them; else, when `folder` is inside `held_root`, ingesting
    `held_root` does. Forgetting `held_by` first (all of its files) lets them be stored
    under `repo` alone. `options` are how the caller names a repository, keeps both copies
    and forgets one (`repo=NAME`, `allow_overlap=True`, `forget(repo=NAME)` in the library;
    `--repo NAME`, `--allow-overlap`, `ctxbase forget --repo NAME` on the command line)."""

    def __init__(
        self,
        repo: str,
        held_by: str,
        held_root: str,
        folder: str,
        files: int,
        example: str,
        same_root: bool,
        options: tuple[str, str, str] = (
            "repo={name!r}",
            "allow_overlap=True",
            "forget(repo={name!r})",
        ),
    ) -> None:
        self.repo = repo
        self.held_by = held_by
        self.held_root = held_root
        self.folder = folder
        self.files = files
        self.example = example
        self.same_root = same_root
        name_option, allow, forget = options
        inside = folder.startswith(held_root.rstrip("/\\") + "/")
        both = f"pass {allow} to keep both copies"
        only = (
            f"forget {held_by!r} first ({forget.format(name=held_by)}: all of its files) "
            f"to store them as {repo!r} alone"
        )
        if same_root:
            advice = f"Pass {name_option.format(name=held_by)} to update them, {only}, or {both}"
        elif inside:
            advice = f"Ingest {held_root} to update them, {only}, or {both}"
        else:  # the other repository's folder is inside this one: nothing to update here
            advice = f"{only[0].upper()}{only[1:]}, or {both}"
        many = "file" if files == 1 else "files"
        super().__init__(
            "path",
            f"repository {held_by!r} already holds {files} {many} of {folder} (its folder "
            f"is {held_root}; e.g. {example}): ingesting them as {repo!r} would store them "
            f"twice. {advice} (nothing was changed)",
        )


class NotFoundError(CtxbaseError, LookupError):
    """The item does not exist in this project (or is not visible to the caller). `ids`
    lists every id not found when a call named several (the first is `item_id`); `message`
    replaces the default text."""

    code = "not_found"

    def __init__(
        self,
        kind: str,
        item_id: str,
        *,
        ids: Sequence[str] = (),
        message: str | None = None,
    ) -> None:
        self.kind = kind
        self.item_id = item_id
        self.ids = tuple(ids) or (item_id,)
        super().__init__(message or f"{kind} {item_id!r} not found")

    @classmethod
    def forgotten(cls, kind: str, item_id: str) -> NotFoundError:
        """The error for an id the project hard-forgot: said so, so it is not read as a
        typo (one wording for every read, rating and retraction)."""
        return cls(kind, item_id, message=f"{kind} {item_id!r} not found: it was hard-forgotten")


class UnknownReposError(NotFoundError):
    """Repository names the project holds no repository of; the message names those it
    does hold (a typo must not pass for done)."""

    def __init__(self, unknown: Sequence[str], project: str, known: Sequence[str]) -> None:
        listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
        hint = f"its repositories: {listed}" if known else "it has no ingested repository"
        names = ", ".join(repr(r) for r in unknown)
        which = "repositories" if len(unknown) > 1 else "repository"
        message = f"{which} {names} not found in project {project!r} ({hint})"
        super().__init__("repository", unknown[0], ids=list(unknown), message=message)
        self.known = list(known)


# How a read of a project with no data goes on, where the call takes `new_project`.
NEW_PROJECT_HINT = "pass new_project to answer for a project with no data yet"


class UnknownProjectError(NotFoundError):
    """A read of a project the database holds no data of: a typo must not pass for an
    empty answer (nor create the project). The message names the projects `known` (those
    the caller may see; `seen_only`: other projects may hold data), `where` the database
    (a file) when it helps, `choose` how to pick one, `start` how to use a new one."""

    def __init__(
        self,
        project: str,
        known: Sequence[str],
        *,
        where: str = "",
        choose: str = "",
        seen_only: bool = False,
        start: str = "",
    ) -> None:
        listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
        if where:  # the database, named
            hint = f"its projects: {listed}" if known else "it is empty"
        else:
            hint = f"projects with data: {listed}" if known else "no project has data yet"
            if not known and seen_only:
                hint = "no project this key sees has data yet"
        if known and choose:
            hint += f"; {choose}"
        if start:  # how to read a project before its first write, when there is a way
            hint += f"; {start}"
        place = f" in {where}" if where else ""
        message = f"project {project!r} not found{place} ({hint})"
        super().__init__("project", project, message=message)
        self.known = list(known)


class ConflictError(CtxbaseError):
    """The operation is not allowed in the item's current state. `field` names the input
    the conflict is about, when one is (`version` of a conditional write)."""

    code = "conflict"
    field: str | None = None


class RepositoryForgottenError(ConflictError):
    """The repository an ingest was writing was forgotten (`forget(repo=...)`, from this
    process or another) after the ingest started: the ingest stopped, and nothing of the
    repository is kept (what it wrote before the forget went with it, nothing after was
    written). `forgotten_at` is when (a unix time; None when not recorded), `files_done`
    of `files_total` the files the ingest had been through. Ingesting it again holds it
    again."""

    def __init__(
        self,
        repo: str,
        forgotten_at: float | None,
        files_done: int = 0,
        files_total: int = 0,
    ) -> None:
        import datetime as dt

        self.repo = repo
        self.forgotten_at = forgotten_at
        self.files_done = files_done
        self.files_total = files_total
        when = (
            "at a time not recorded"
            if forgotten_at is None
            else "at "
            + dt.datetime.fromtimestamp(forgotten_at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        )
        super().__init__(
            f"repository {repo!r} was forgotten while this ingest ran ({when}): stopped "
            f"after {files_done} of {files_total} files, nothing of it kept (an ingest "
            "started now holds it again)"
        )


class StorageError(CtxbaseError):
    """The storage backend failed or is unusable (bad path, schema newer than this code)."""

    code = "storage"


class EmbedderUnavailableError(CtxbaseError):
    """The embedder cannot work (missing package, endpoint refused or unreachable): vectors
    cannot be made, so waiting for them would never end. The message carries the cause."""

    code = "embedder_unavailable"


class AddressInUseError(CtxbaseError):
    """The address a server should listen on is taken (another server, an earlier run)."""

    code = "address_in_use"

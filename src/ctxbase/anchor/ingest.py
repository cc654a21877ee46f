"""Ingest a repository or a folder of documents: anchor every file, weave the edges.

`ingest_path(cb, path)` lists the files (`git ls-files -co --exclude-standard` in a git
repository, else a .gitignore-aware walk), anchors each one with the parser its language
needs (Python via ast, SQL via sqlglot, Markdown by headings, JavaScript/TypeScript/Go/Java
via tree-sitter or a regex outline, anything else as plain-text chunks; see file_units.py)
and weaves the edges between the units (see weave.py): the same edges whatever order files
came in or however an earlier run ended (ingest_weave.py).

Incremental: each file has a `file` entity holding its content hash, the units it produced
(id -> content hash and place hash) and its parser references. An unchanged file is skipped
without parsing; in a changed file only units whose content changed are re-upserted (and so
re-embedded); a unit that only moved (same text, new line range) is rewritten with its
vector carried over. A changed unit keeps its previous version (see entities.py).

Units that disappear from a file, and files that disappear from the tree, are soft-deleted:
they vanish from every read but their history and edges can be restored, and a unit that
comes back is re-activated; `ContextBase.forget` removes them for good when needed. A unit
a user hid or hard-forgot stays out when its code changes (left_out.py).
A unit a knowledge-base version holds is kept as `<id>@v<n>` first (kb_versions.py).

Bad input never stops an ingest: binary, too large, undecodable and empty files are skipped,
code that does not parse is anchored as plain text, each with its reason in the report. A
file's units, removals and file entity (with its new hash) are written in one store
transaction: if anything fails in between, none of it is kept, the file still has its old
hash and is redone by the next ingest, so nothing stays half-written. A forget of the
repository while the ingest runs stops it, with nothing of the repository kept
(RepositoryForgottenError; forget_watch.py).

Paths are stored relative to the repository top (or, outside git, to the folder given, or
to its parent when the folder is itself a Python package, so module names come out right).
Entities are keyed by repository and path (`<repo>:<path>`, see repository.py), and an
ingest sees only its own repository's files: ingesting a second repository into the same
project leaves the first one's entities alone, and re-ingesting one repository removes only
its own deleted files. A repository is also where it lives: a name another folder holds
(not a checkout of the same remote) is refused before anything is written, so two folders
named alike never take each other's files for deleted ones, and so are files another
repository holds, which would be stored twice (see repository.py). Symbolic links are
never followed (skipped with their reason).

Files ingested before entities had a repository carry no `repo` property: an ingest that
lists a file at the same path replaces such a file (the old entities are soft-deleted, the
file is anchored again under the repository's key); the others stay as they were, since
nothing says which repository they came from.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..components import Components, ComponentsSource, components_of
from ..errors import NotFoundError, RepositoryForgottenError, ValidationError
from ..model import Entity
from .doc_versions import mark_latest_versions
from .entities import (
    EntitySpec,
    restore_vectors,
    unit_vectors,
    upsert_versioned,
    write_entity,
)
from .file_units import anchor_file_text, file_entity_id
from .files import detect_file
from .forget_watch import ForgetWatch
from .gitignore import list_files
from .ingest_weave import WeaveInput, mark_pending, pending, weave
from .kb_versions import deactivate, refresh_pin
from .left_out import HIDDEN, held_out_files, left_out_units
from .plaintext import DEFAULT_CHUNK_CHARS, part_chars
from .repository import (
    RepoPlace,
    check_overlap,
    check_repo_name,
    choose_repo_name,
    default_repo_name,
    record_place,
    remote_identity,
    unsafe_reason,
)
from .weave import StoredRef

__all__ = [
    "ANCHOR_VERSION",
    "FileOutcome",
    "IngestReport",
    "ProgressCallback",
    "anchor_file_text",
    "ingest_path",
]

# Bump when anchoring changes, so the next ingest redoes every file.
ANCHOR_VERSION = "1"
DEFAULT_MAX_FILE_BYTES = 1_000_000
_BATCH_FILES = 100

ProgressCallback = Callable[[int, int, str], None]  # (files done, files total, path)


@dataclass
class FileOutcome:
    path: str
    status: str  # new, changed, unchanged, skipped, deleted, error
    reason: str | None = None
    parser: str | None = None
    units: int = 0
    written: int = 0
    moved: int = 0
    removed: int = 0


@dataclass
class IngestReport:
    """What an ingest did; `written_ids` are the units re-upserted with new content."""

    root: str
    project: str
    git_commit: str | None = None
    repo: str | None = None
    # the folder the repository's paths are relative to, and where it was recorded before
    # when that was another folder (a checkout of the same remote, moved or cloned again)
    repo_root: str | None = None
    moved_from: str | None = None
    files_total: int = 0
    files_new: int = 0
    files_changed: int = 0
    files_unchanged: int = 0
    files_skipped: int = 0
    files_deleted: int = 0
    files_failed: int = 0
    files_fallback: int = 0
    units_total: int = 0
    units_written: int = 0
    units_moved: int = 0
    units_removed: int = 0
    versions_kept: int = 0
    relations_written: int = 0
    relations_closed: int = 0
    # documents and sections of unchanged files whose mentions were woven again, and
    # whether a run that stopped before weaving left this one its repository's edges
    units_rewoven: int = 0
    weave_resumed: bool = False
    # files ingested before entities had a repository, replaced by this ingest's own
    legacy_replaced: int = 0
    # with a key: entities of unchanged files stored unsigned before, signed in place now
    signed_in_place: int = 0
    # by repository: how many of the files listed it holds too (allow_overlap, once)
    shared_with: dict[str, int] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    fallbacks: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    written_ids: list[str] = field(default_factory=list)
    # units a user hid or hard-forgot whose code changed: (id, "hidden" | "forgotten"); a
    # hidden one's new version is written hidden, a forgotten one is not written (left_out.py)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    # units brought back visible by `readmit`
    readmitted: list[str] = field(default_factory=list)
    files: list[FileOutcome] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        n = self.signed_in_place
        signed = f"; {n} stored unsigned, signed now" if n else ""
        if self.left_out:
            signed += (
                f"; {len(self.left_out)} units left out: hidden or forgotten before "
                "(ctxbase restore --entity ID / ctxbase ingest --readmit)"
            )
        if self.readmitted:
            signed += f"; {len(self.readmitted)} hidden or forgotten units readmitted"
        if self.weave_resumed:
            signed += "; edges of a run that stopped before weaving woven now"
        return (
            f"{self.files_total} files: {self.files_new} new, {self.files_changed} changed, "
            f"{self.files_unchanged} unchanged, {self.files_skipped} skipped, "
            f"{self.files_deleted} deleted, {self.files_failed} failed; "
            f"{self.units_written} units written, {self.units_moved} moved, "
            f"{self.units_removed} removed; {self.relations_written} relations"
            f"{signed} in {self.seconds:.2f}s"
        )


@dataclass
class _Plan:
    path: str
    file_id: str
    data_hash: str
    outcome: FileOutcome
    old: Entity | None
    specs: list[EntitySpec] = field(default_factory=list)
    refs: list[StoredRef] = field(default_factory=list)
    contains: list[tuple[str, str]] = field(default_factory=list)
    mention_texts: list[tuple[str, str]] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    gone: list[str] = field(default_factory=list)  # units removed from the file


# A file swapped for a link after it was listed is refused when it is opened; a FIFO must
# not block the open.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_BINARY", 0)
)


def _read(full: Path, rel: str, max_bytes: int) -> tuple[bytes | None, str | None]:
    try:
        fd = os.open(full, _OPEN_FLAGS)
    except OSError as error:
        return None, f"unreadable: {error.strerror or error}"
    with os.fdopen(fd, "rb") as handle:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None, "not a regular file"
            size = info.st_size
            if size > max_bytes:
                return None, f"{size} bytes is over the {max_bytes} limit"
            return handle.read(), None
        except OSError as error:
            return None, f"unreadable: {error.strerror or error}"


def _base_and_prefix(root: Path, toplevel: Path | None) -> tuple[Path, str]:
    """The folder stored paths are relative to, and the ingested folder's path within it."""
    folder = root if root.is_dir() else root.parent
    if toplevel is not None:
        base = toplevel.resolve()
    elif (folder / "__init__.py").is_file():
        base = folder.parent
    else:
        base = folder
    prefix = folder.relative_to(base).as_posix()
    return base, "" if prefix == "." else prefix


def ingest_path(
    cb: ComponentsSource,
    path: str | os.PathLike[str],
    *,
    project: str | None = None,
    progress: ProgressCallback | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    keep_history: bool = True,
    sign_key: bytes | None = None,
    repo: str | None = None,
    moved: bool = False,
    allow_overlap: bool = False,
    readmit: bool = False,
) -> IngestReport:
    """Anchor every file under `path` (or that one file) and weave their edges.

    `repo` names the repository the files belong to (default: the name this folder or its
    remote was ingested under, else the git remote `origin`'s name, else the name of the
    folder paths are relative to); a name another folder holds raises
    RepositoryNameTakenError unless `moved` says this is that folder, moved here (its
    files this folder lacks are then removed). Files another repository of the project
    holds (the same folder under another name, a folder inside or around an ingested one)
    raise RepositoryOverlapError, unless `allow_overlap` keeps both copies; see
    repository.py.

    A unit a user hid or hard-forgot stays out when its code changes (its new version is
    written hidden, or not at all; `IngestReport.left_out`); `readmit` writes such units
    back, visible, re-reading the unchanged files that hold one (see left_out.py)."""
    cb = components_of(cb)
    started = time.perf_counter()
    started_at = time.time()  # a forget of the repository after it stops this ingest
    pid = cb.resolve_project(project)
    if repo is not None:
        check_repo_name(repo)
    # A limit under 1 byte would skip every file, and so remove what they stored before.
    if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int):
        raise ValidationError("max_file_bytes", f"must be an integer (got {max_file_bytes!r})")
    if max_file_bytes < 1:
        raise ValidationError("max_file_bytes", f"must be at least 1 (got {max_file_bytes})")
    root = Path(path).resolve()
    held_back: dict[str, str] = {}  # listed by git, in a tool or dependency folder
    if root.is_dir():
        listed, git, held_back = list_files(root)
    else:
        listed, git = [root.name], None
        from .gitignore import git_info

        git = git_info(root.parent)
    base, prefix = _base_and_prefix(root, git.toplevel if git else None)
    stored = cb.store.list_entities(pid, type="file", latest_only=False)
    remote = git.remote if git else None
    place = RepoPlace(str(base), remote_identity(remote))
    derived = default_repo_name(base, remote)
    repo, held = choose_repo_name(
        cb.store, pid, place, given=repo, derived=derived, files=stored, moved=moved
    )
    commit = git.commit if git else None
    rels = [posixpath.join(prefix, rel) if prefix else rel for rel in listed]
    # before anything is written (the legacy replacement in _in_scope writes)
    place, shared = check_overlap(
        cb.store,
        pid,
        repo,
        place,
        held,
        folder=str(root),
        rels=rels if root.exists() else [],
        files=stored,
        allow=allow_overlap,
    )
    # from here each write is refused once the repository is forgotten (forget_watch.py)
    watch = ForgetWatch.start(cb.store, pid, repo, started_at, len(rels))
    report = IngestReport(
        root=str(root),
        project=pid,
        git_commit=commit,
        repo=repo,
        repo_root=place.root,
        moved_from=held.root if held is not None and held.root != place.root else None,
        files_total=len(rels),
        shared_with=shared,
    )
    in_scope = _in_scope(cb, pid, stored, repo, prefix, root.is_dir(), rels, report, watch)
    if not root.exists() and not in_scope:  # nothing to read, nothing ingested to delete
        raise NotFoundError("path", str(path))
    if held != place:
        with watch.writing():
            record_place(cb.store, pid, repo, place)
    # plain-text parts sized by the chunking setting, which cuts their search units
    from ..retrieve.chunking import DEFAULT_CHUNKING

    part_size = part_chars((cb.chunking or DEFAULT_CHUNKING).max_tokens)
    woven = WeaveInput()
    # a run that stopped before weaving left this: its files' edges are woven again (all)
    resume = marked = pending(cb, pid, repo)
    plans_props: list[dict[str, Any]] = []
    done = 0

    def tick(rel: str) -> None:
        nonlocal done
        done += 1
        watch.files_done = done
        if progress is not None:
            progress(done, len(rels), rel)

    for start in range(0, len(rels), _BATCH_FILES):
        watch.check()  # a batch of unchanged files writes nothing: it would not notice
        batch = rels[start : start + _BATCH_FILES]
        plans = [
            _plan(base, rel, in_scope.get(rel), commit, max_file_bytes, repo, part_size)
            for rel in batch
        ]
        if readmit:  # an unchanged file holding a unit that is out is read again
            same = [p.old for p in plans if p.outcome.status == "unchanged"]
            again = held_out_files(cb, pid, same)
            plans = [
                _plan(base, p.path, p.old, commit, max_file_bytes, repo, part_size, force=True)
                if p.file_id in again
                else p
                for p in plans
            ]
        if not marked and any(_writes(plan) for plan in plans):
            with watch.writing():
                mark_pending(cb, pid, repo)
            marked = True
        _apply(cb, pid, plans, report, keep_history, sign_key, tick, watch, readmit)
        if sign_key is not None:
            report.signed_in_place += _sign_unchanged(cb, pid, plans, sign_key, watch)
        for plan in plans:
            failed = plan.outcome.status == "error"
            # A file that failed keeps what it had: its new units may not all be stored.
            props = (plan.old.properties if plan.old else {}) if failed else plan.properties
            plans_props.append(props)
            woven.refs.extend(StoredRef.from_json(r) for r in props.get("refs", []))
            woven.contains.extend((a, b) for a, b in props.get("contains", []))
            if plan.outcome.status in ("new", "changed"):
                woven.mention_texts.extend(plan.mention_texts)
                woven.changed_from.update(plan.properties.get("units", {}))
                woven.changed_from.add(plan.file_id)
            woven.touched.update(plan.gone)
    listed_set = set(rels)
    gone = [(r, e) for r, e in in_scope.items() if r not in listed_set and e.active]
    if gone and not marked:
        with watch.writing():
            mark_pending(cb, pid, repo)
        marked = True
    for rel, entity in gone:
        units = list(entity.properties.get("units", {}))
        woven.touched.update([*units, entity.id])
        with watch.writing():
            deactivate(cb, pid, [*units, entity.id], sign_key)  # tagged ones are kept
        report.files_deleted += 1
        report.units_removed += len(units)
        report.files.append(FileOutcome(rel, "deleted", removed=len(units)))
    # versions of one document in separate files: the newest is the latest
    woven.touched.update(mark_latest_versions(cb, pid, repo, watch.writing))
    woven.touched.update(woven.changed_from)
    if resume:
        woven.repo_units = _repo_units(stored, repo, plans_props)
        report.weave_resumed = True
    report.relations_written, report.relations_closed, report.units_rewoven = weave(
        cb, pid, repo, woven, full=resume, sign_key=sign_key, writing=watch.writing, done=marked
    )
    for rel, folder in held_back.items():
        path = posixpath.join(prefix, rel) if prefix else rel
        why = f"in a tool or dependency folder ({folder}/), never ingested"
        report.files_total += 1
        report.files_skipped += 1
        report.skipped.append((path, why))
        report.files.append(FileOutcome(path, "skipped", why))
    refresh_pin(cb, pid)  # a pinned version hides what this ingest wrote
    cb.notify_embedder()
    watch.check()  # forgotten since its last write: what it wrote went with it
    report.seconds = time.perf_counter() - started
    return report


def _writes(plan: _Plan) -> bool:
    """Whether applying the plan writes to the store."""
    status = plan.outcome.status
    if status in ("new", "changed"):
        return True
    old = plan.old
    return status == "skipped" and (
        old is None or old.properties.get("content_hash") != plan.data_hash
    )


def _repo_units(stored: Iterable[Entity], repo: str, current: Iterable[dict[str, Any]]) -> set[str]:
    """Every unit and file id of the repository: its stored files', and this run's."""
    ids: set[str] = set()
    for props in [*(e.properties for e in stored if e.active), *current]:
        if props.get("repo") == repo:
            ids.update(props.get("units") or {})
    ids.update(e.id for e in stored if e.properties.get("repo") == repo)
    return ids


def _within(path: str, prefix: str, is_dir: bool, rels: Sequence[str]) -> bool:
    if not is_dir:
        return path in rels
    return not prefix or path == prefix or path.startswith(prefix + "/")


def _in_scope(
    cb: Components,
    pid: str,
    stored: Sequence[Entity],
    repo: str,
    prefix: str,
    is_dir: bool,
    rels: Sequence[str],
    report: IngestReport,
    watch: ForgetWatch,
) -> dict[str, Entity]:
    """This repository's file entities under the ingested folder, by path.

    A file stored before entities had a repository (no `repo` property) at a path this
    ingest lists is soft-deleted with its units: the file is anchored again under this
    repository's key. Other repositories' files are never in scope."""
    own: dict[str, Entity] = {}
    legacy: list[Entity] = []
    listed = set(rels)
    for entity in stored:
        path = str(entity.properties.get("path"))
        if not _within(path, prefix, is_dir, rels):
            continue
        owner = entity.properties.get("repo")
        if owner == repo:
            own[path] = entity
        elif owner is None and entity.active and path in listed:
            legacy.append(entity)
    for entity in legacy:
        units = list(entity.properties.get("units") or {})
        with watch.writing():
            cb.store.set_active(pid, [*units, entity.id], False, removed=True)
        report.legacy_replaced += 1
    return own


def _plan(
    base: Path,
    rel: str,
    old: Entity | None,
    commit: str | None,
    max_bytes: int,
    repo: str,
    part_size: int = DEFAULT_CHUNK_CHARS,
    force: bool = False,
) -> _Plan:
    """Read, classify and (when changed, or `force`) parse one file; writes nothing."""
    file_id = file_entity_id(rel, repo)
    unsafe = unsafe_reason(base, rel)
    data, reason = (None, unsafe) if unsafe else _read(base / rel, rel, max_bytes)
    outcome = FileOutcome(rel, "skipped", reason)
    if data is None:
        props = _skip_props(rel, reason, old, repo=repo)
        return _Plan(rel, file_id, "", outcome, old, properties=props)
    data_hash = hashlib.sha256(data).hexdigest()[:32] + ":" + ANCHOR_VERSION
    same = old is not None and old.active and old.properties.get("content_hash") == data_hash
    if same and not force and old is not None:
        status = str(old.properties.get("status") or "text")
        props = dict(old.properties)
        outcome = FileOutcome(
            rel, "unchanged" if status == "text" else "skipped", old.properties.get("reason")
        )
        outcome.units = len(props.get("units", {}))
        outcome.parser = props.get("parser")
        return _Plan(rel, file_id, data_hash, outcome, old, properties=props)
    verdict = detect_file(rel, data, max_bytes)
    if not verdict.ok or verdict.text is None or not verdict.text.strip():
        why = verdict.reason or "no text"
        props = _skip_props(rel, why, old, data_hash, repo=repo)
        return _Plan(
            rel, file_id, data_hash, FileOutcome(rel, "skipped", why), old, properties=props
        )
    try:
        result, specs, refs, pairs = anchor_file_text(
            verdict.text,
            rel,
            verdict.language,
            git_commit=commit,
            repo=repo,
            plain_part_chars=part_size,
        )
    except Exception as error:  # keep going: one bad file must not stop an ingest
        outcome = FileOutcome(rel, "error", f"{type(error).__name__}: {error}")
        return _Plan(rel, file_id, data_hash, outcome, old)
    status = "new" if old is None or not old.properties.get("units") else "changed"
    outcome = FileOutcome(rel, status, parser=result.parser, units=len(specs))
    if result.fallback and result.warnings:
        outcome.reason = result.warnings[0]
    props = {
        "path": rel,
        "repo": repo,
        "content_hash": data_hash,
        "status": "text",
        "language": verdict.language,
        "encoding": verdict.encoding,
        "size": verdict.size,
        "parser": result.parser,
        "fallback": result.fallback,
        "warnings": list(result.warnings[:5]),
        "git_commit": commit,
        "units": {s.id: [s.unit_hash, s.place_hash] for s in specs},
        "refs": [r.to_json() for r in refs],
        "contains": [list(p) for p in pairs],
    }
    mentions = [(s.id, s.text) for s in specs if s.type in ("section", "document") and s.text]
    return _Plan(rel, file_id, data_hash, outcome, old, specs, refs, pairs, mentions, props)


def _skip_props(
    rel: str, reason: str | None, old: Entity | None, data_hash: str = "", *, repo: str
) -> dict[str, Any]:
    return {
        "path": rel,
        "repo": repo,
        "content_hash": data_hash,
        "status": "skipped",
        "reason": reason,
        "units": {},
        "refs": [],
        "contains": [],
        "previous_units": list((old.properties.get("units") or {}) if old else {}),
    }


def _sign_unchanged(
    cb: Components, pid: str, plans: Sequence[_Plan], key: bytes, watch: ForgetWatch
) -> int:
    """Sign the stored entities of unchanged files that carry no signature (ingested before
    a key was configured): an incremental ingest would otherwise never sign them."""
    from .signing import SIGNATURE_PROPERTY, sign_stored_entities

    ids: list[str] = []
    for plan in plans:
        if plan.outcome.status == "unchanged" and plan.old is not None:
            ids += [plan.file_id, *(plan.old.properties.get("units") or {})]
    if not ids:
        return 0
    found = cb.store.get_entities(pid, ids)
    unsigned = [e.id for e in found if SIGNATURE_PROPERTY not in e.properties]
    if not unsigned:
        return 0
    with watch.writing():
        return sign_stored_entities(cb, unsigned, key, project=pid)


def _apply(
    cb: Components,
    pid: str,
    plans: Sequence[_Plan],
    report: IngestReport,
    keep_history: bool,
    sign_key: bytes | None,
    on_done: Callable[[str], None],
    watch: ForgetWatch,
    readmit: bool = False,
) -> None:
    """Write a batch of planned files: changed units, removed units, then the file entity."""
    rewrites: list[str] = []
    # units to be written (changed or new; with readmit every one), with their file
    wanted: list[tuple[Entity | None, str]] = []
    for plan in plans:
        old_units = (plan.old.properties.get("units") or {}) if plan.old is not None else {}
        for spec in plan.specs:
            same = list(old_units.get(spec.id) or ()) == [spec.unit_hash, spec.place_hash]
            if spec.id in old_units and not same:
                rewrites.append(spec.id)
            if readmit or not same:  # a file deleted and back again is new: asked too
                wanted.append((plan.old, spec.id))
    # The file entity is rewritten too; its search unit (the path) keeps its vector.
    rewrites += [p.file_id for p in plans if p.old is not None and p.outcome.status != "unchanged"]
    asked = list(dict.fromkeys([*rewrites, *(uid for _, uid in wanted)]))
    found = cb.store.get_entities(pid, asked, include_inactive=True) if asked else []
    stored = {e.id: e for e in found}
    out = left_out_units(cb, pid, wanted, stored) if wanted else {}
    vectors: dict[str, Any] = {}
    if rewrites:
        vectors = unit_vectors(cb, pid, [stored[i] for i in rewrites if i in stored])
    for plan in plans:
        held = {s.id: out[s.id] for s in plan.specs if s.id in out}
        _apply_one(cb, pid, plan, report, keep_history, sign_key, vectors, watch, held, readmit)
        on_done(plan.path)


def _apply_one(
    cb: Components,
    pid: str,
    plan: _Plan,
    report: IngestReport,
    keep_history: bool,
    sign_key: bytes | None,
    vectors: dict[str, Any],
    watch: ForgetWatch,
    held: dict[str, str],
    readmit: bool,
) -> None:
    outcome = plan.outcome
    report.files.append(outcome)
    if outcome.status == "unchanged":
        report.files_unchanged += 1
        report.units_total += outcome.units
        return
    if outcome.status == "error":
        report.files_failed += 1
        report.errors.append((plan.path, outcome.reason or "error"))
        return
    if outcome.status == "skipped":
        report.files_skipped += 1
        report.skipped.append((plan.path, outcome.reason or "skipped"))
        if plan.old is not None and plan.old.properties.get("content_hash") == plan.data_hash:
            return  # skipped before for the same content: nothing to write
    # One transaction per file (one commit, not one per unit): a failure anywhere leaves
    # nothing of the file written and its old hash in place, so the next ingest redoes it.
    counts = (report.units_written, report.units_moved, report.units_removed)
    kept, ids = report.versions_kept, len(report.written_ids)
    outs, readmitted = len(report.left_out), len(report.readmitted)
    try:
        with watch.writing():
            _write_plan(cb, pid, plan, report, keep_history, sign_key, vectors, held, readmit)
    except RepositoryForgottenError:
        raise  # not this file's failure: the ingest stops
    except Exception as error:  # rolled back: the report counts none of it
        report.units_written, report.units_moved, report.units_removed = counts
        report.versions_kept = kept
        del report.written_ids[ids:]
        del report.left_out[outs:]
        del report.readmitted[readmitted:]
        outcome.written = outcome.moved = outcome.removed = 0
        report.files_failed += 1
        report.errors.append((plan.path, f"{type(error).__name__}: {error}"))
        outcome.status = "error"
        outcome.reason = str(error)
        return
    if outcome.status == "new":
        report.files_new += 1
    elif outcome.status == "changed":
        report.files_changed += 1
    if outcome.status in ("new", "changed"):
        report.units_total += outcome.units
        if plan.properties.get("fallback") and outcome.reason:
            # A parser gave up (plain text for a YAML file is not a failure).
            report.files_fallback += 1
            report.fallbacks.append((plan.path, outcome.reason))


def _write_plan(
    cb: Components,
    pid: str,
    plan: _Plan,
    report: IngestReport,
    keep_history: bool,
    sign_key: bytes | None,
    vectors: dict[str, Any],
    held: dict[str, str],
    readmit: bool,
) -> None:
    old_units: dict[str, Any] = dict(plan.old.properties.get("units") or {}) if plan.old else {}
    outcome = plan.outcome
    hide: list[str] = []
    for spec in plan.specs:
        previous = old_units.get(spec.id)
        same = previous is not None and list(previous) == [spec.unit_hash, spec.place_hash]
        if same and not (readmit and spec.id in held):
            continue  # unchanged unit: re-upserting it would throw its vector away
        if spec.id in held and not readmit:
            report.left_out.append((spec.id, held[spec.id]))
            if held[spec.id] != HIDDEN:
                continue  # hard-forgotten: not written, its tombstone stays
            hide.append(spec.id)  # written, then hidden again below
        if readmit and spec.id in held:
            report.readmitted.append(spec.id)
        wrote = upsert_versioned(
            cb,
            spec,
            project=pid,
            keep_history=keep_history,
            sign_key=sign_key,
            notify=False,
            prefetched=vectors,
        )
        if not wrote.changed or spec.id in hide:
            continue
        if previous is not None and previous[0] == spec.unit_hash:
            outcome.moved += 1
            report.units_moved += 1
        else:
            outcome.written += 1
            report.units_written += 1
            report.written_ids.append(spec.id)
            if wrote.archived_id is not None:
                report.versions_kept += 1
    if hide:  # recorded as hidden on their own still: `restore` brings them back
        cb.store.set_active(pid, hide, False)
    readmitted = [s.id for s in plan.specs if readmit and held.get(s.id) == HIDDEN]
    if readmitted:  # written visible above; this drops their records of being hidden
        cb.store.set_active(pid, readmitted, True)
    gone = [uid for uid in old_units if uid not in {s.id for s in plan.specs}]
    gone += [u for u in plan.properties.get("previous_units", []) if u not in gone]
    plan.gone = gone
    if gone:
        deactivate(cb, pid, gone, sign_key)  # a unit a tag holds is kept (kb_versions.py)
        outcome.removed += len(gone)
        report.units_removed += len(gone)
    file_entity = Entity(
        id=plan.file_id,
        project_id=pid,
        type="file",
        name=plan.path,
        text=_file_summary(plan),
        properties={k: v for k, v in plan.properties.items() if k != "previous_units"},
        version=1,
        created_at=plan.old.created_at if plan.old is not None else time.time(),
    )
    if sign_key is not None:
        from .signing import signed_entity

        file_entity = signed_entity(file_entity, sign_key)
    write_entity(cb, file_entity, notify=False)
    if plan.old is not None and (plan.old.name, plan.old.text) == (
        file_entity.name,
        file_entity.text,
    ):
        kept = {i: vectors[i] for i in _item_ids(cb, file_entity) if i in vectors}
        restore_vectors(cb, pid, kept)


def _file_summary(plan: _Plan) -> str:
    """What a file holds, in a few lines: a search unit for "which file does X"."""
    if not plan.specs:
        return ""
    language = plan.properties.get("language") or "text"
    root = plan.specs[0]
    doc = str(root.properties.get("docstring") or root.properties.get("title") or "")
    names = [
        str(s.properties.get("title") or s.name)
        for s in plan.specs
        if s.kind in ("class", "function", "table", "view", "section")
        and s.parent_qualname in (None, root.qualname)
    ]
    lines = [f"{language} file {plan.path}", doc.split("\n", 1)[0]]
    if names:
        lines.append("Defines: " + ", ".join(dict.fromkeys(names)))
    return "\n".join(line for line in lines if line)[:800]


def _item_ids(cb: Components, entity: Entity) -> list[str]:
    return [item.item_id for item in cb.entity_items(entity)]

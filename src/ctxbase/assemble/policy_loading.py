"""Loading assembly policies: YAML text or a file, and a file watched for edits.

`PolicyFile` reloads a policy file when it changes on disk (checked on access: no thread, no
inotify). A file that stops parsing, or disappears, does not take the service down: the
last good policies stay in use, and the problem is not silent: it is logged once per change
(WARNING, naming the file and the problem), `status()` reports it (the server's `/readyz`
answer carries it), and every assembly made with the stale policies says so in its trace
notes (`stale_note`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError as PydanticValidationError

from .policy import (
    DEFAULT_POLICIES_PATH,
    STRATEGY_NAMES,
    Origin,
    PolicyDocument,
    PolicySelection,
    PolicySet,
)
from .policy_issues import PolicyError, PolicyIssue, as_written, issue_from_error
from .policy_storage import drop_storage_keys

__all__ = [
    "PolicyFile",
    "layer_over_presets",
    "load_default_policies",
    "load_policies",
    "parse_policies",
    "policies_from_data",
    "policy_source",
]

log = logging.getLogger("ctxbase.assemble")


def parse_policies(
    text: str, *, source: str = "inline YAML", presets: bool = True, origin: Origin = "inline"
) -> PolicySet:
    """Parse and validate policy YAML text; `source` names it in error messages and in the
    traces of the assemblies it decides, `origin` says what it is (a file, text given
    inline, the shipped presets). The policies are layered over the shipped presets
    (`layer_over_presets`) unless the text says `inherit_presets: false` or `presets` is
    False."""
    try:
        data = yaml.load(text, Loader=_PolicyLoader)  # a SafeLoader: builds no objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PolicyError(source, [PolicyIssue(where, f"invalid YAML: {exc.problem}")]) from None
    except yaml.YAMLError as exc:
        raise PolicyError(source, [PolicyIssue("", f"invalid YAML: {exc}")]) from None
    if data is None:
        raise PolicyError(source, [PolicyIssue("", "the policy file is empty")])
    return policies_from_data(data, source=source, presets=presets, origin=origin)


class _PolicyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key written twice in one mapping: YAML would keep the
    last one without a word, and a second `max_tokens:` or `match:` changed a policy."""


def _unique_keys(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            again = key in seen
        except TypeError:  # an unhashable key: the constructor below says so
            break
        if again:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping",
                node.start_mark,
                f"found the key {key!r} twice (the second would replace the first)",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_PolicyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_keys)


def policies_from_data(
    data: Any, *, source: str = "inline mapping", presets: bool = True, origin: Origin = "inline"
) -> PolicySet:
    """`parse_policies` of what the YAML loads to (a mapping with a 'policies' list), as
    `ctxbase.open(..., policies={...})` passes it: validated the same way."""
    if not isinstance(data, dict):
        raise PolicyError(
            source, [PolicyIssue("", "the top level must be a mapping with a 'policies' list")]
        )
    data, _ = drop_storage_keys(data, source)  # seed 000's nebula_config / milvus_config
    try:
        document = PolicyDocument.model_validate(data)
    except PydanticValidationError as exc:
        issues = [
            as_written(issue_from_error(e, PolicyDocument, STRATEGY_NAMES), data)
            for e in exc.errors()
        ]
        raise PolicyError(source, issues) from None
    own = PolicySet.from_document(document, source=source, origin=origin)
    has_default = any(p.match.default for p in document.policies)
    if not presets:  # (the shipped presets themselves)
        return own
    if not document.inherit_presets:  # the file replaces the presets, not their default
        if has_default:
            return own
        shipped = load_default_policies()
        return dataclasses.replace(
            own, default=shipped.default, presets_source=shipped.source, default_is_preset=True
        )
    return layer_over_presets(own, load_default_policies(), keep_default=has_default)


def layer_over_presets(own: PolicySet, presets: PolicySet, *, keep_default: bool) -> PolicySet:
    """`own` over `presets`: a request is matched against `own`'s policies first, against
    the presets' only when none of them matches, then falls to the default: `own`'s when
    it has one (`keep_default`), else the presets'. A preset named as one of `own`'s is
    left out (the file replaces it)."""
    names = {p.name for p in own.policies} | {own.default.name}
    return PolicySet(
        policies=own.policies,
        default=own.default if keep_default else presets.default,
        source=f"{own.source} (over the shipped presets)",
        presets=tuple(p for p in presets.policies if p.name not in names),
        presets_source=presets.source,
        default_is_preset=not keep_default,
        origin=own.origin,
    )


def _is_file(name: str) -> bool:
    try:
        return Path(name).is_file()
    except (OSError, ValueError):  # too long a name, or a NUL byte: not a path
        return False


def load_policies(path_or_text: str | os.PathLike[str]) -> PolicySet:
    """Load policies from a file path, or from YAML text.

    A string is a path when it is one line that names an existing file or ends in .yaml/.yml;
    anything else is YAML text. Use `parse_policies` to be explicit.
    """
    if isinstance(path_or_text, str):
        one_line = "\n" not in path_or_text
        is_path = one_line and (
            path_or_text.endswith((".yaml", ".yml"))
            or _is_file(path_or_text)
            or os.path.isdir(path_or_text)  # a folder is no YAML text: say what it is
        )
        if not is_path:
            if one_line and not isinstance(_one_line_yaml(path_or_text), (dict, list)):
                # no mapping, so no policies: a path with a typo, or a file not made yet
                issue = PolicyIssue("", "no such policy file (nor YAML policies text)")
                raise PolicyError(repr(path_or_text), [issue])
            return parse_policies(path_or_text)
    path = Path(path_or_text)
    if path.is_dir():
        raise PolicyError(str(path), [PolicyIssue("", "is a directory, not a policy file")])
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(str(path), [PolicyIssue("", f"cannot read: {exc.strerror}")]) from exc
    except UnicodeDecodeError as exc:
        issue = PolicyIssue("", f"is not UTF-8 text (byte {exc.start}): not a YAML policy file")
        raise PolicyError(str(path), [issue]) from exc
    return parse_policies(text, source=str(path), origin="file")


def _one_line_yaml(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return {}  # broken YAML text: parse_policies says where


@lru_cache(maxsize=1)
def load_default_policies() -> PolicySet:
    """The policies shipped with ctxbase (planner, coder, tester, reviewer, executor, default)."""
    path = DEFAULT_POLICIES_PATH
    text = path.read_text(encoding="utf-8")
    return parse_policies(text, source=f"{path} (shipped presets)", presets=False, origin="preset")


def policy_source(
    policies: PolicySet | PolicyFile | Mapping[str, Any] | str | os.PathLike[str] | None,
) -> PolicySet | PolicyFile:
    """What an Assembler's `policies` argument names: None the shipped policies, a path to a
    file a `PolicyFile` (reloaded on change, no restart), a mapping the loaded YAML, anything
    else YAML text. Each is validated here: a bad one raises `PolicyError`."""
    if policies is None:
        return load_default_policies()
    if isinstance(policies, PolicySet | PolicyFile):
        return policies
    if isinstance(policies, Mapping):
        return policies_from_data(dict(policies))
    if not isinstance(policies, str | os.PathLike):
        what = type(policies).__name__
        issue = PolicyIssue("", f"must be a file path, YAML text or a mapping (got {what})")
        raise PolicyError("policies", [issue])
    text = os.fspath(policies)
    if "\n" not in text and _is_file(text):
        return PolicyFile(text)
    return load_policies(text)


class PolicyFile:
    """A policy file that reloads itself when it changes on disk.

    `current()` stats the file and reloads when its modification time or size moved. A file
    that stops parsing (or is deleted) keeps the last good policies in use; `last_error`
    says what is wrong, the problem is logged once per change, and `stale_note()` is the
    line assemblies made meanwhile carry in their trace.
    """

    def __init__(self, path: str | os.PathLike[str], *, fallback: PolicySet | None = None):
        self._path = Path(path)
        self._stamp: tuple[int, int] | None = None
        self._last_error: PolicyError | None = None
        self._reported: str | None = None  # the problem last logged: one line per change
        self._policies: PolicySet | None = fallback
        self._loaded_at: float | None = None
        self._reloads = 0
        if not self.reload_if_changed() and self._policies is None:
            assert self._last_error is not None
            raise self._last_error

    @property
    def path(self) -> Path:
        return self._path

    @property
    def last_error(self) -> PolicyError | None:
        """The error of the latest reload attempt, or None when it succeeded."""
        return self._last_error

    @property
    def reload_count(self) -> int:
        return self._reloads

    def _failed(self, error: PolicyError, *, changed: bool) -> None:
        self._last_error = error
        if self._policies is None or (not changed and str(error) == self._reported):
            return  # nothing loaded yet: the caller raises it; or already said
        self._reported = str(error)
        log.warning(
            "policy file %s not loaded; still using the policies loaded %s: %s",
            self._path,
            self._loaded_when(),
            error,
        )

    def _loaded_when(self) -> str:
        if self._loaded_at is None:
            return "before it (the fallback)"
        return time.strftime("at %Y-%m-%d %H:%M:%S", time.localtime(self._loaded_at))

    def reload_if_changed(self) -> bool:
        """Reload when the file changed since the last attempt; True when new policies loaded."""
        try:
            stat = self._path.stat()
        except OSError as exc:
            error = PolicyError(str(self._path), [PolicyIssue("", f"cannot read: {exc.strerror}")])
            self._stamp = None
            self._failed(error, changed=False)
            return False
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return False
        # Remember the stamp even when parsing fails, so a broken file is not re-parsed on
        # every access; the next edit changes the stamp and triggers a new attempt.
        self._stamp = stamp
        try:
            policies = load_policies(self._path)
        except PolicyError as exc:
            self._failed(exc, changed=True)
            return False
        if self._reported is not None:
            log.warning("policy file %s loaded again; its earlier problem is fixed", self._path)
        self._policies = policies
        self._last_error = self._reported = None
        self._loaded_at = time.time()
        self._reloads += 1
        return True

    def current(self) -> PolicySet:
        self.reload_if_changed()
        assert self._policies is not None
        return self._policies

    def select(
        self, project_id: str, agent_role: str, intent: str, *, has_error: bool = False
    ) -> PolicySelection:
        return self.current().select(project_id, agent_role, intent, has_error=has_error)

    def stale_note(self) -> str | None:
        """A trace note while the file has a problem and older policies are used, else None."""
        if self._last_error is None:
            return None
        first = str(self._last_error).splitlines()[0]
        return (
            f"policies: {self._path} has a problem, so the policies loaded "
            f"{self._loaded_when()} were used ({first})"
        )

    def status(self) -> dict[str, Any]:
        """The file, whether its latest version is in use, and its problem when it is not."""
        self.reload_if_changed()
        return {
            "file": str(self._path),
            "ok": self._last_error is None,
            "error": None if self._last_error is None else str(self._last_error),
            "loaded_at": self._loaded_at,
            "reloads": self._reloads,
        }

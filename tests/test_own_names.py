"""A bad call (an unknown keyword, a missing argument) names the method of the class the
caller holds, `ContextBase.search()`, not the mixin or the request builder it comes from
(own_names.py): on every public method of the embedded base, the remote clients and the
remote context manager."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.serve.sdk import AsyncClient, Client


def _methods(obj: object) -> Iterator[tuple[str, Any]]:
    """The public methods of `obj` a bogus keyword is refused by (no **kwargs)."""
    for name in dir(type(obj)):
        attr = inspect.getattr_static(type(obj), name)
        if name.startswith("_") or not inspect.isfunction(attr):
            continue
        kinds = {p.kind for p in inspect.signature(attr).parameters.values()}
        if inspect.Parameter.VAR_KEYWORD not in kinds:
            yield name, getattr(obj, name)


def _named(cls: type, name: str, method: Any) -> None:
    """A bogus keyword is refused naming `cls` and the method (an alias, as create_edge is
    of upsert_relationship, by the name it was defined under)."""
    with pytest.raises(TypeError) as raised:
        out = method(bogus_keyword=1)
        if inspect.iscoroutine(out):
            asyncio.run(out)
    said = str(raised.value)
    prefix, _, rest = said.partition("() got an unexpected keyword argument 'bogus_keyword'")
    owner, _, called = prefix.partition(".")
    assert (owner, rest) == (cls.__name__, ""), said
    assert inspect.getattr_static(cls, called) is inspect.getattr_static(cls, name), said


def test_the_embedded_base_names_itself(tmp_path: Path) -> None:
    cb = ContextBase(str(tmp_path / "n.db"), project="p", embedder="hash")
    try:
        checked = dict(_methods(cb))
        assert {"feedback", "forget", "assemble_context", "set_fact", "list_sessions"} <= set(
            checked
        )
        for name, method in checked.items():
            _named(ContextBase, name, method)
        with pytest.raises(TypeError, match=r"^ContextBase\.get_feedback\(\) missing 1"):
            cb.get_feedback()  # type: ignore[call-arg]
        # the code is where it was: a traceback still points into the mixin's module
        assert ContextBase.feedback.__wrapped__.__code__.co_filename.endswith(  # type: ignore[attr-defined]
            "memory_feedback.py"
        )
    finally:
        cb.close()


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_the_remote_clients_name_themselves(cls: type) -> None:
    client = cls("http://127.0.0.1:9", project="p")  # never reached: the call is refused
    checked = dict(_methods(client))
    assert {"feedback", "forget", "set_fact", "list_sessions"} <= set(checked)
    for name, method in checked.items():
        _named(cls, name, method)
    with pytest.raises(TypeError, match=rf"^{cls.__name__}\.search\(\) missing 1"):
        out = client.search()  # keywords go to the server's config: a missing query is named
        if inspect.iscoroutine(out):
            asyncio.run(out)
    manager = client.context_manager()
    _named(type(manager), "create_session", manager.create_session)

"""`ctxbase.connect(...)` mistakes a new user makes: a server that is not running, a URL
without its scheme, an option only the server sets. Each is a ctxbase error naming the URL
or the option, not an httpx exception or a TypeError."""

from __future__ import annotations

import inspect
import socket
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.errors import CtxbaseError, ValidationError
from ctxbase.open_options import REMOTE_ONLY, SERVER_SIDE
from ctxbase.serve.errors import RemoteError
from ctxbase.serve.sdk import Client


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connect_to_a_server_that_is_not_running(tmp_path: object) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(RemoteError) as err:
        ctxbase.connect(url, api_key="cb_0123456789abcdef_x")  # looks up the key's project
    assert err.value.code == "unreachable" and url in str(err.value)
    assert isinstance(err.value, CtxbaseError)
    with pytest.raises(RemoteError) as err:
        ctxbase.connect_async(url, api_key="cb_0123456789abcdef_x")
    assert err.value.code == "unreachable"


def test_a_url_without_its_scheme_is_named(tmp_path: object) -> None:
    for make in (ctxbase.connect, ctxbase.connect_async):
        for kwargs in ({"api_key": "cb_0123456789abcdef_x"}, {"project": "p"}):
            with pytest.raises(ValidationError) as err:
                make("127.0.0.1:8765", **kwargs)  # type: ignore[operator]
            assert err.value.field == "url" and "http://" in err.value.message


def test_options_only_the_server_sets_are_named_not_a_type_error(tmp_path: Path) -> None:
    # chunking, embedder, ... decide how the server stores what it is given: connect says
    # where they are set instead of failing with a TypeError (before any request)
    url = f"http://127.0.0.1:{_closed_port()}"
    for connect in (ctxbase.connect, ctxbase.connect_async):
        for option, value in (("chunking", "fine"), ("embedder", "hash")):
            with pytest.raises(ValidationError) as err:
                connect(url, api_key="cb_0123456789abcdef_x", **{option: value})
            assert err.value.field == option and "server" in err.value.message
    with pytest.raises(ValidationError, match="ctxbase serve --chunking"):
        ctxbase.connect(url, chunking="fine")
    # no server setting changes the capture queue: the message says so, once parenthesised
    with pytest.raises(ValidationError) as err:
        ctxbase.connect(url, bus_config={"batch_size": 3})
    message = err.value.message
    assert "no ctxbase serve flag or ServerSettings field sets its capture queue" in message
    assert "create_app(cb=ContextBase(..., bus_config=...))" in message
    assert "((" not in message and "set it there" not in message
    with pytest.raises(ValidationError) as err:
        ctxbase.connect(url, max_content_bytes=10)
    assert "((" not in err.value.message and "--max-body-bytes" in err.value.message
    # and open says the same of the remote client's own options
    with pytest.raises(ValidationError) as err:
        ctxbase.open(str(tmp_path / "x.db"), timeout=5)
    assert err.value.field == "timeout" and not (tmp_path / "x.db").exists()


def test_the_option_lists_match_the_signatures() -> None:
    # each side's own options really are its own: the lists cannot drift from the code
    embedded = inspect.signature(ContextBase).parameters
    remote = {**inspect.signature(Client).parameters, "api_key": None}
    for name in SERVER_SIDE:
        assert name in embedded and name not in remote, name
    for name in REMOTE_ONLY:
        assert name in remote and name not in embedded, name
    both = (set(embedded) & set(remote)) - {"self"}
    assert both == {"project", "agent_id", "debug_mode"}
    assert set(embedded) - both - {"store"} == set(SERVER_SIDE)

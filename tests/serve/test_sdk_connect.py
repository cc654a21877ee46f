"""`ctxbase.connect(...)` mistakes a new user makes: a server that is not running, a URL
without its scheme. Each is a ctxbase error naming the URL, not an httpx exception."""

from __future__ import annotations

import socket

import pytest

import ctxbase
from ctxbase.errors import CtxbaseError, ValidationError
from ctxbase.serve.errors import RemoteError


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

"""`ctxbase mcp --url URL` checks the service before it serves a client: a wrong URL, a
refused key, a project the key may not use or a bad --agent-role stop it at once with one
line naming the problem and a non-zero exit, instead of a proxy whose every tool call fails."""

from __future__ import annotations

import pytest
from live_server import Live

from ctxbase.cli import main


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXBASE_API_KEY", raising=False)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["mcp", *args])
    err = capsys.readouterr().err
    return code, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    return lines[0]


def test_a_refused_key_stops_the_proxy(
    live: Live, pid: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(capsys, "--url", live.url, "--api-key", "cb_nokey_notasecret")
    assert code != 0
    line = one_line(err)
    assert f"{live.url} refused the API key" in line and "invalid or revoked" in line


def test_a_missing_key_is_named_with_the_ways_to_give_one(
    live: Live, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(capsys, "--url", live.url)
    assert code != 0
    assert "needs an API key: give --api-key or set $CTXBASE_API_KEY" in one_line(err)


def test_a_url_that_is_not_the_service_stops_the_proxy(
    live: Live, pid: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = live.key(pid)
    code, err = run(capsys, "--url", live.url + "/v1", "--api-key", key)
    assert code != 0
    line = one_line(err)
    assert f"{live.url}/v1 does not answer as a ctxbase service" in line
    assert "HTTP 404" in line


def test_an_unreachable_url_stops_the_proxy(
    live: Live, pid: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxbase.serve.server import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code, err = run(capsys, "--url", url, "--api-key", live.key(pid))
    assert code != 0
    assert f"cannot reach {url}" in one_line(err)


def test_a_project_the_key_may_not_use_stops_the_proxy(
    live: Live, pid: str, other_pid: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = live.key(pid)
    code, err = run(capsys, "--url", live.url, "--api-key", key, "--project", other_pid)
    assert code == 2
    line = one_line(err)
    assert f"--project: this key may not use {other_pid!r}" in line and pid in line


@pytest.mark.parametrize(
    ("role", "said"),
    [("co\nder", "holds the control character U+000A"), (" ", "must be a non-empty string")],
)
def test_a_bad_agent_role_stops_the_proxy(
    live: Live, pid: str, role: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = live.key(pid)
    code, err = run(capsys, "--url", live.url, "--api-key", key, "--agent-role", role)
    assert code == 2
    assert f"--agent-role: {said}" in one_line(err)


def test_a_bad_agent_role_stops_the_local_server_too(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--db", f"{tmp_path}/x.db", "--embedder", "none", "mcp", "--agent-role", "a\x1bb"])
    assert code == 2
    assert "--agent-role: holds the control character U+001B" in one_line(capsys.readouterr().err)

"""A served policy file that breaks is reported: in /readyz (and the SDK's health()) and
in the trace notes of assemblies made with the policies last loaded."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from live_server import make_project, start

import ctxbase

GOOD = """
version: 1
policies:
  - name: sql_writer
    match: {agent_roles: [sql_writer]}
    strategies:
      - {name: recent_window, max_messages: 4}
"""


def test_a_broken_served_policy_file_shows_in_readyz_and_traces(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(GOOD, encoding="utf-8")
    server = start(tmp_path, policies=str(path), no_auth=True)
    try:
        project = f"p-{uuid.uuid4().hex[:8]}"
        make_project(server.settings.db, project)
        with ctxbase.connect(server.url, project=project) as client:
            assert client.health()["policies"]["ok"] is True
            ctx = client.assemble_context(agent_role="sql_writer", user_intent="分页 SQL")
            assert not any("policies:" in n for n in ctx.trace["notes"])

            path.write_text(GOOD.replace("max_messages: 4", "max_mesages: 4"), encoding="utf-8")
            stat = path.stat()
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
            health = client.health()
            assert health["status"] == "ready"  # still serving, with the last good policies
            assert health["policies"]["ok"] is False
            assert str(path) in health["policies"]["error"]
            assert "max_mesages" in health["policies"]["error"]
            ctx = client.assemble_context(agent_role="sql_writer", user_intent="分页 SQL 改一下")
            assert ctx.policy == "sql_writer"
            (note,) = [n for n in ctx.trace["notes"] if n.startswith("policies:")]
            assert str(path) in note and "max_mesages" in note
    finally:
        server.stop()

"""Corrections and echoes of retracted messages over real HTTP: the remote SDK's assembled
prompt carries a wrong memory's note in its place, and marks an assistant turn that
repeats a retracted message, as the embedded base does; the REST search reports the note
on the withheld match."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from live_server import Live

import ctxbase

SAID = "The orders API timeout is 30 s for every client."
NOTE = "it is 20 s, not 30 s"
ASK = "what is the orders API timeout?"
MARK = "[answers a retracted message]"


def _scenario(api: Any) -> dict[str, Any]:
    wrong = api.record("user_message", session_id="s1", text=SAID)
    api.feedback(wrong.id, "wrong", note=NOTE)
    ctx = api.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2")
    body = "\n".join(str(m["content"]) for m in ctx.messages)
    said = api.record("user_message", session_id="s3", text="The billing report is due Friday.")
    api.record("assistant_message", session_id="s3", text="OK, billing report due Friday noted.")
    api.expire_message("s3", said.id)
    later = api.assemble_context(
        agent_role="coder", user_intent="when is the billing report due?", session_id="s3"
    )
    held = next(c for c in api.search(ASK).considered if c.item.owner_id == wrong.id)
    return {
        "corrected": f'{NOTE} -- replaces: "{SAID}"' in body,
        "once": body.count("30 s for every client"),
        "correction_in_trace": [
            c["explain"]["replaces"] == [wrong.id]
            for c in ctx.trace["candidates"]
            if c["kind"] == "correction"
        ],
        "marked": [
            str(m["content"]).startswith(MARK) for m in later.messages if m["role"] == "assistant"
        ],
        "search_note": held.correction,
    }


def test_the_remote_sdk_carries_corrections_and_marks_echoes(live: Live, tmp_path: Path) -> None:
    embedded = ctxbase.open(
        str(tmp_path / "embedded.db"), project=f"emb-{uuid.uuid4().hex[:8]}", embedder="hash"
    )
    try:
        local = _scenario(embedded)
    finally:
        embedded.close()
    project = f"rem-{uuid.uuid4().hex[:8]}"
    with ctxbase.connect(live.url, api_key=live.key(project, role="admin"), project=project) as c:
        remote = _scenario(c)
    assert remote == local
    assert local == {
        "corrected": True,
        "once": 1,
        "correction_in_trace": [True],
        "marked": [True],
        "search_note": NOTE,
    }

    with live.client(live.key(project, role="read")) as http:
        body = {"query": ASK, "include_considered": True}
        found = http.post(f"/v1/projects/{project}/search", json=body)
        assert found.status_code == 200, found.text
        notes = {h["item"]["owner_id"]: h.get("correction") for h in found.json()["considered"]}
        assert sorted(n for n in notes.values() if n) == [NOTE]

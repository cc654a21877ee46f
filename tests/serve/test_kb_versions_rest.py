"""Knowledge-base versions over REST and the SDK: the same tag, pin and unpin as embedded,
the server's searches and assemblies seeing the pinned version, errors as the library's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from live_server import Live

import ctxbase
from ctxbase.anchor.kb_versions import KnowledgeTag, PinReport
from ctxbase.errors import NotFoundError, ValidationError
from ctxbase.serve.sdk import Client
from ctxbase.store.base import ItemFilter, KnowledgeView


def _ingest(db: str, pid: str, doc: Path, text: str) -> None:
    doc.write_text(f"# Refunds\n\nThe refund window is {text} days.\n", encoding="utf-8")
    with ctxbase.open(db, project=pid, embedder="hash", background_embedding=False) as cb:
        cb.ingest(str(doc.parent))


def _found(client: Client, **overrides: object) -> str:
    response = client.search("refund window", preset="keyword", top_k=5, **overrides)  # type: ignore[arg-type]
    return "\n".join(c.item.text for c in response.results)


def test_tag_pin_unpin_through_the_sdk(live: Live, pid: str, tmp_path: Path) -> None:
    doc = tmp_path / "shop" / "refunds.md"
    doc.parent.mkdir()
    _ingest(live.db, pid, doc, "fourteen")
    with ctxbase.connect(live.url, api_key=live.key(pid), project=pid) as client:
        assert isinstance(client, Client)
        tag = client.tag_knowledge("v1.2", repos=["shop"])
        assert isinstance(tag, KnowledgeTag) and tag.repos == ("shop",) and tag.entities > 0
        with pytest.raises(ValidationError):
            client.tag_knowledge("v1.2")
        _ingest(live.db, pid, doc, "thirty")
        assert "thirty" in _found(client)
        report = client.pin_knowledge("v1.2")
        assert isinstance(report, PinReport) and (report.tag, report.missing) == ("v1.2", 0)
        assert report.replaced is None  # nothing was pinned before
        pinned = _found(client)
        assert "fourteen" in pinned and "thirty" not in pinned
        assert "thirty" in _found(client, kb_version="latest")
        ctx = client.assemble_context(agent_role="coder", user_intent="refund window days")
        assert "fourteen" in str(ctx.messages) and "thirty" not in str(ctx.messages)
        assert [(t.name, t.pinned) for t in client.knowledge_tags()] == [("v1.2", True)]
        with pytest.raises(NotFoundError):
            client.pin_knowledge("v9")
        with pytest.raises(ValidationError):  # a view is the server's: kb_version names one
            client.search("refund", filters=ItemFilter(view=KnowledgeView(("shop",))))
        client.tag_knowledge("v1.3")
        assert client.pin_knowledge("v1.3").replaced == "v1.2"  # one pin per project
        assert client.pin_knowledge("v1.2").replaced == "v1.3"
        assert client.unpin_knowledge() == "v1.2"
        assert client.unpin_knowledge() is None
        assert "thirty" in _found(client)
    # the embedded base sees the same tags as the server
    with ctxbase.open(live.db, project=pid, embedder=None) as cb:
        assert [t.name for t in cb.knowledge_tags()] == ["v1.2", "v1.3"]

    async def run() -> list[str]:
        async with ctxbase.connect_async(live.url, api_key=live.key(pid), project=pid) as client:
            await client.pin_knowledge("v1.2")
            tags = await client.knowledge_tags()
            await client.unpin_knowledge()
            return [t.name for t in tags if t.pinned]

    assert asyncio.run(run()) == ["v1.2"]


def test_rest_answers(live: Live, pid: str, tmp_path: Path) -> None:
    doc = tmp_path / "shop" / "refunds.md"
    doc.parent.mkdir()
    _ingest(live.db, pid, doc, "fourteen")
    with live.client(live.key(pid)) as http:
        base = f"/v1/projects/{pid}/kb"
        made = http.post(f"{base}/versions", json={"name": "v1"})
        assert made.status_code == 201 and made.json()["repos"] == ["shop"]
        assert http.post(f"{base}/versions", json={"name": "v1"}).status_code == 422
        assert http.post(f"{base}/versions", json={"name": "latest"}).status_code == 422
        assert http.post(f"{base}/versions", json={"name": "v2", "repos": ["x"]}).status_code == 404
        assert http.put(f"{base}/pin", json={"tag": "nope"}).status_code == 404
        pinned = http.put(f"{base}/pin", json={"tag": "v1"})
        assert pinned.status_code == 200 and pinned.json()["tag"] == "v1"
        assert pinned.json()["replaced"] is None
        assert http.post(f"{base}/versions", json={"name": "v1b"}).status_code == 201
        again = http.put(f"{base}/pin", json={"tag": "v1b"})
        assert again.status_code == 200 and again.json()["replaced"] == "v1"  # one pin each
        assert http.put(f"{base}/pin", json={"tag": "v1"}).json()["replaced"] == "v1b"
        search = http.post(
            f"/v1/projects/{pid}/search",
            json={"query": "refund", "preset": "keyword", "options": {"kb_version": "v1"}},
        )
        assert search.status_code == 200 and search.json()["results"]
        assert http.delete(f"{base}/pin").json() == {"unpinned": "v1"}
    with live.client(live.key(pid, role="read")) as http:
        assert http.get(f"/v1/projects/{pid}/kb/versions").status_code == 200
        assert http.delete(f"/v1/projects/{pid}/kb/pin").status_code == 403

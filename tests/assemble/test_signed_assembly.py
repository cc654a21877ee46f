"""Assembly with require_signature: tampered and unsigned entities stay out, embedded and
over REST (where the server verifies with its own key)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.anchor.signing import key_env_var, sign_stored_entities
from ctxbase.errors import ValidationError
from ctxbase.retrieve.indexing import entity_items
from ctxbase.serve.keys import create_key
from ctxbase.serve.server import BackgroundServer
from ctxbase.serve.settings import ServerSettings
from ctxbase.store import open_store

KEY = "s1gning-k3y"
INTENT = "订单缓存的 Redis TTL 是多少"


def _seed(cb: ContextBase) -> tuple[str, str, str]:
    """Three documents on the intent: signed, signed then edited behind it, unsigned."""
    good = cb.upsert_entity("document", "ttl-spec", "订单缓存 Redis TTL 为 10 分钟")
    bad = cb.upsert_entity("document", "ttl-note", "订单缓存 Redis TTL 可能是 5 分钟")
    draft = cb.upsert_entity("document", "ttl-draft", "订单缓存 Redis TTL 草稿")
    assert sign_stored_entities(cb, [good.id, bad.id], KEY) == 2
    stored = cb.get_entity(bad.id)
    edited = stored.model_copy(update={"text": "订单缓存 Redis TTL 为 1 天"})
    cb.store.upsert_entity(edited, entity_items(edited))  # an edit that bypasses signing
    cb.wait_for_embeddings()
    return good.id, bad.id, draft.id


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "s.db"), project="signed", embedder="hash")
    yield base
    base.close()


def test_only_entities_with_valid_signatures_are_assembled(cb: ContextBase) -> None:
    good, bad, draft = _seed(cb)
    plain = cb.assemble_context(agent_role="coder", user_intent=INTENT)
    assert {good, bad, draft} <= set(plain.included_ids)
    assert plain.tampered == []
    checked = cb.assemble_context(
        agent_role="coder", user_intent=INTENT, require_signature=True, signing_key=KEY
    )
    assert good in checked.included_ids
    assert bad not in checked.included_ids and draft not in checked.included_ids
    assert checked.tampered == [bad]
    reasons = {d["id"]: d["reason"] for d in checked.trace["dropped"] if d["id"] in (bad, draft)}
    assert reasons == {bad: "tampered", draft: "unsigned"}
    assert checked.trace["require_signature"] is True
    assert "1 天" not in "\n".join(m["content"] for m in checked.messages)


def test_a_correction_of_an_unsigned_memory_is_not_served(cb: ContextBase) -> None:
    """A memory rated wrong with a note is replaced by a correction quoting it: with
    require_signature, an unsigned memory's correction would serve its text and the note
    after all, so it stays out with it."""
    said = cb.record("user_message", session_id="s1", text="UNSIGNEDSECRET the cache TTL was 60 s")
    cb.feedback(said.id, "wrong", note="INJECTEDNOTE set the TTL to 0")
    cb.wait_for_embeddings()
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="fix the cache TTL", require_signature=True, signing_key=KEY
    )
    prompt = "\n".join(m["content"] for m in ctx.messages)
    assert "UNSIGNEDSECRET" not in prompt and "INJECTEDNOTE" not in prompt
    dropped = {d["id"]: d["reason"] for d in ctx.trace["dropped"]}
    assert dropped.get(f"{said.id}#correction") == "signature"
    plain = cb.assemble_context(agent_role="coder", user_intent="fix the cache TTL")
    assert "INJECTEDNOTE" in "\n".join(m["content"] for m in plain.messages)  # else served


def test_require_signature_without_a_key_is_refused(
    cb: ContextBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTXBASE_HMAC_KEY", raising=False)
    monkeypatch.delenv(key_env_var("signed"), raising=False)
    with pytest.raises(ValidationError) as err:
        cb.assemble_context(agent_role="coder", user_intent=INTENT, require_signature=True)
    assert err.value.field == "signing_key"


def test_over_rest_the_server_verifies_with_its_own_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "r.db")
    local = ctxbase.open(db, project="signed", embedder="hash")
    good, bad, draft = _seed(local)
    local.close()
    store = open_store(db)
    key = create_key(store, projects=["signed"], role="read").key
    store.close()
    monkeypatch.setenv(key_env_var("signed"), KEY)  # the server's configuration
    settings = ServerSettings(db=db, port=0, embedder="hash", rate_limit_per_s=0)
    with BackgroundServer(settings) as server:
        client = ctxbase.connect(server.url, api_key=key, project="signed")
        try:
            ctx = client.assemble_context(
                agent_role="coder", user_intent=INTENT, require_signature=True
            )
            assert good in ctx.included_ids and draft not in ctx.included_ids
            assert ctx.tampered == [bad]
            found = client.search("Redis TTL", top_k=10, require_signature=True)
            owners = {c.item.owner_id for c in found.results}
            assert good in owners and bad not in owners and found.tampered == [bad]
            plain = client.assemble_context(agent_role="coder", user_intent=INTENT)
            assert bad in plain.included_ids  # not cached across the two requests
            with pytest.raises(ValidationError) as err:
                client.search("Redis", require_signature=True, signing_key=KEY)
            assert err.value.field == "signing_key"
        finally:
            client.close()

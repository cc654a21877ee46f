"""Writing follows the configured HMAC key: ingest and anchoring sign when a key is set,
and a require_signature search or assembly counts the unsigned entities it left out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.anchor.signing import SIGNATURE_PROPERTY, key_env_var, verify_entity
from ctxbase.cli import main
from ctxbase.errors import ValidationError

KEY = "configured-secret"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "auth-repo"
    root.mkdir()
    (root / "verify.py").write_text(
        "def legacy_verifier(token):\n    return token.alg == 'HS256zebra'\n"
    )
    return root


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(key_env_var("p"), raising=False)
    monkeypatch.setenv("CTXBASE_HMAC_KEY", KEY)


def _open(tmp_path: Path) -> ContextBase:
    return ctxbase.open(str(tmp_path / "s.db"), project="p", embedder="hash")


def test_ingest_signs_with_the_configured_key(tmp_path: Path, repo: Path, keyed: None) -> None:
    with _open(tmp_path) as cb:
        cb.ingest(str(repo))
        entities = cb.list_entities()
        assert entities and all(verify_entity(e, KEY) for e in entities)
        r = cb.search("HS256zebra legacy verifier", require_signature=True, preset="keyword")
        assert r.results and r.unsigned == 0 and r.tampered == []


def test_an_unsigned_ingest_is_counted_then_signed_in_place(
    tmp_path: Path, repo: Path, keyed: None
) -> None:
    with _open(tmp_path) as cb:
        cb.ingest(str(repo), sign=False)
        assert not any(SIGNATURE_PROPERTY in e.properties for e in cb.list_entities())
        r = cb.search("HS256zebra legacy verifier", require_signature=True, preset="keyword")
        assert r.results == [] and r.tampered == [] and r.unsigned >= 1
        ctx = cb.assemble_context(
            agent_role="coder", user_intent="HS256zebra legacy_verifier", require_signature=True
        )
        assert ctx.unsigned >= 1 and ctx.payload()["unsigned"] == ctx.unsigned
        # the files did not change, yet the next ingest with the key signs what it holds
        report = cb.ingest(str(repo))
        assert report.files_unchanged == 1 and report.signed_in_place >= 2
        assert "signed now" in report.summary()
        assert all(verify_entity(e, KEY) for e in cb.list_entities())
        r = cb.search("HS256zebra legacy verifier", require_signature=True, preset="keyword")
        assert r.results and r.unsigned == 0


def test_sign_true_without_a_key_writes_nothing(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTXBASE_HMAC_KEY", raising=False)
    monkeypatch.delenv(key_env_var("p"), raising=False)
    with _open(tmp_path) as cb:
        with pytest.raises(ValidationError) as err:
            cb.ingest(str(repo), sign=True)
        assert err.value.field == "sign" and "CTXBASE_HMAC_KEY" in err.value.message
        with pytest.raises(ValidationError):
            cb.ingest(str(repo), sign=False, sign_key=b"k")
        assert cb.list_entities() == []
        cb.ingest(str(repo))  # no key configured: stored unsigned, as before
        assert not any(SIGNATURE_PROPERTY in e.properties for e in cb.list_entities())


def test_anchoring_a_document_signs_with_the_project_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTXBASE_HMAC_KEY", raising=False)
    monkeypatch.setenv(key_env_var("p"), KEY)
    with _open(tmp_path) as cb:
        report = cb.anchor_document("# Ops\n\nRotate the zebra keys every week.\n", title="ops")
        made = cb.store.get_entities("p", report.entity_ids)
        assert made and all(verify_entity(e, KEY) for e in made)


def test_the_cli_signs_on_request_and_notes_the_unsigned(
    tmp_path: Path, repo: Path, keyed: None, capsys: Any
) -> None:
    db = ["--db", str(tmp_path / "c.db"), "--project", "p", "--embedder", "hash"]
    assert main([*db, "ingest", str(repo), "--no-sign"]) == 0
    capsys.readouterr()
    search = [*db, "search", "HS256zebra", "--preset", "keyword", "--require-signature"]
    assert main(search) == 0
    out = capsys.readouterr()
    assert "legacy_verifier" not in out.out
    assert "unsigned entit" in out.err and "left out" in out.err
    assert main([*db, "ingest", str(repo), "--sign"]) == 0
    assert "signed now" in capsys.readouterr().out
    assert main(search) == 0
    out = capsys.readouterr()
    assert "legacy_verifier" in out.out and "unsigned" not in out.err

"""Every example under examples/, and the README's LlamaIndex and AutoGen snippets, run
offline against a real ctxbase and give their answer."""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import ctxbase
from ctxbase.assemble.trace import AssembledContext

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("openai_tools", "run_sql(SELECT * FROM orders WHERE month = '2026-10')"),
        ("langgraph_agent", "From memory: Alice prefers PostgreSQL 18"),
        ("langchain_rag", "order:{user_id}:{page} (from document:"),
        ("mcp_client", "the release freezes on Friday"),
    ],
)
def test_example_runs(
    name: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The MCP example starts `python -m ctxbase mcp`: it must import this checkout.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "src"), *sys.path]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        answer = load(name).main(str(tmp_path / "memory.db"))
    assert expected in answer


def test_langgraph_example_shows_the_memory_ctxbase_search_finds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The printed hit must show the stored value, not a cut-off namespace.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        load("langgraph_agent").main(str(tmp_path / "memory.db"))
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("ctxbase search"))
    assert "Alice prefers PostgreSQL 18 for new services" in line


def readme_snippet(marker: str) -> str:
    """The first Python block of the README after `marker`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text[text.index(marker) :]
    start = after.index("```python\n") + len("```python\n")
    return after[start : after.index("```", start)]


@pytest.mark.parametrize(
    ("marker", "expected"),
    [
        ("**LlamaIndex** (", "['user_message', 'assistant_message']"),
        ("**AutoGen** (", "{'budget': 50000}\nRelevant memory content"),
    ],
)
def test_readme_snippet_runs(
    marker: str,
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # the snippets write memory.db where they run
    code = compile(readme_snippet(marker), f"README.md {marker}", "exec")
    exec(code, {"__name__": "__main__"})
    out = capsys.readouterr().out
    assert expected in out
    assert "Alice prefers PostgreSQL 18" in out or "section:" in out


def test_readme_first_snippet_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first code a new user copies, verbatim: every line runs, its last one included
    (forgetting the repository the snippet ingested)."""
    monkeypatch.chdir(tmp_path)  # the snippet writes memory.db and shop/ where it runs
    source = readme_snippet("# ctxbase\n")
    assert source.rstrip().splitlines()[-1].startswith('cb.forget(repo="shop")')
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(source, "README.md (first snippet)", "exec"), namespace)
    cb = namespace["cb"]
    assert isinstance(cb, ctxbase.ContextBase)
    try:
        ctx = namespace["ctx"]
        assert isinstance(ctx, AssembledContext) and ctx.context_id
        assert cb.store.list_repos("shop") == []  # the ingested repository is forgotten
        assert (tmp_path / "memory.db").exists() and (tmp_path / "shop" / "orders.sql").exists()
    finally:
        cb.close()

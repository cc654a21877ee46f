"""Optional frameworks: a missing one is named with the extra to install, and the service
starts without the MCP endpoint when the mcp package is absent."""

from __future__ import annotations

import importlib
import sys

import pytest

from ctxbase.integrations import require


def test_missing_framework_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r"pip install 'ctxbase\[langgraph\]'"):
        require("langgraph_not_installed_here", "langgraph")


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("ctxbase.integrations.mcp_server", "mcp", "mcp"),
        ("ctxbase.integrations.langgraph_store", "langgraph.store.base", "langgraph"),
        ("ctxbase.integrations.langchain", "langchain_core", "langchain"),
        ("ctxbase.integrations.autogen_memory", "autogen_core.memory", "autogen"),
        ("ctxbase.integrations.llamaindex", "llama_index.core", "llamaindex"),
    ],
)
def test_each_integration_says_what_to_install(
    module: str, blocked: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, blocked, None)  # makes `import blocked` fail
    with pytest.raises(ImportError, match=rf"ctxbase\[{extra}\]"):
        importlib.import_module(module)


def test_service_runs_without_the_mcp_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxbase.serve.app import create_app

    with_mcp = {getattr(r, "path", None) for r in create_app().routes}
    assert "/v1/projects/{project_id}/mcp" in with_mcp
    monkeypatch.setitem(sys.modules, "ctxbase.integrations.mcp_server", None)
    without = {getattr(r, "path", None) for r in create_app().routes}
    assert "/v1/projects/{project_id}/mcp" not in without


def test_mcp_command_without_mcp_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxbase.cli import main

    monkeypatch.delitem(sys.modules, "ctxbase.integrations.mcp_server", raising=False)
    monkeypatch.setitem(sys.modules, "mcp", None)
    assert main(["--embedder", "none", "mcp"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "pip install 'ctxbase[mcp]'" in err

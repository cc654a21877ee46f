"""What a process loads before it does anything: `import ctxbase`, `ctxbase --help` and the
light commands import only what they use (the server, the parsers, the assembler's tables
and the optional extras load when first needed), and the names the packages hand out
lazily are all there. Checked in a fresh interpreter, by the modules it holds at the end:
no timing, so the test means the same on a loaded machine."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ctxbase

SRC = str(Path(ctxbase.__file__).resolve().parent.parent)

# Never needed to import the package or print help: the server, the parsers, the tables of
# assembly, the optional extras, and the third-party packages the layers use.
SERVER = ("fastapi", "uvicorn", "starlette", "httpx", "prometheus_client")
PARSERS = ("tree_sitter", "sqlglot", "jieba", "yaml", "pathspec")
LAYERS = (
    "ctxbase.contextbase",
    "ctxbase.anchor.capture_anchor",
    "ctxbase.assemble.facts",
    "ctxbase.retrieve.search",
    "ctxbase.store.sqlite",
)
HEAVY_FOR_HELP = (*SERVER, *PARSERS, *LAYERS, "numpy", "pydantic", "tqdm")
# A status or a search on a store (English query, hash embedder) needs the store, the
# search and numpy, but neither the server, the parsers nor the assembler.
NOT_FOR_LIGHT_COMMANDS = (
    *SERVER,
    *PARSERS,
    "tqdm",
    "ctxbase.serve.app",
    "ctxbase.anchor.fenced",
    "ctxbase.anchor.sql",
    "ctxbase.anchor.python_code",
    "ctxbase.anchor.documents",
    "ctxbase.anchor.treesitter_code",
    "ctxbase.anchor.ingest",
    "ctxbase.assemble.assembler",
    "ctxbase.assemble.facts",
    "ctxbase.assemble.policy",
)
CLI = "import sys; from ctxbase.cli import main; code = main(sys.argv[1:])"


def _loaded(code: str, *argv: str, cwd: Path | None = None) -> set[str]:
    """The modules a fresh interpreter holds after running `code` (with `argv`)."""
    script = (
        f"import json, sys\ntry:\n    {code}\nexcept SystemExit:\n    pass\n"
        "sys.stdout.flush()\nprint('\\n@@' + json.dumps(sorted(sys.modules)))"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("CTXBASE_DB", None)
    done = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    modules: list[str] = json.loads(done.stdout.rsplit("\n@@", 1)[1])
    return set(modules)


def _heavy(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in modules)


def test_import_ctxbase_loads_no_layer_and_no_dependency() -> None:
    assert _heavy(_loaded("import ctxbase"), HEAVY_FOR_HELP) == []


@pytest.mark.parametrize(
    "argv",
    [("--help",), ("--version",), ("search", "--help"), ("serve", "--help"), ("keys", "--help")],
    ids=" ".join,
)
def test_help_loads_no_layer_and_no_dependency(argv: tuple[str, ...]) -> None:
    modules = _loaded(CLI, *argv)
    assert "ctxbase.cli" in modules  # the guard: the command did run
    assert _heavy(modules, HEAVY_FOR_HELP) == []


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("startup")
    with ctxbase.open(str(folder / "ctxbase.db"), project="p", embedder="hash") as cb:
        for i in range(20):
            cb.capture("user_message", session_id="s1", text=f"the orders cache is cold ({i})")
        cb.flush()
        cb.wait_for_embeddings()
    return folder


@pytest.mark.parametrize(
    "argv", [("status",), ("search", "orders cache", "-k", "3"), ("events", "s1")], ids=" ".join
)
def test_light_commands_load_neither_server_nor_parsers_nor_assembler(
    small_store: Path, argv: tuple[str, ...]
) -> None:
    modules = _loaded(CLI, "--project", "p", "--embedder", "hash", *argv, cwd=small_store)
    assert {"ctxbase.contextbase", "ctxbase.store.sqlite"} <= modules  # it opened the store
    assert _heavy(modules, NOT_FOR_LIGHT_COMMANDS) == []


@pytest.mark.parametrize("argv", [("events", "s1"), ("sessions",), ("entities",)], ids=" ".join)
def test_commands_that_read_no_vector_load_no_numpy(
    small_store: Path, argv: tuple[str, ...]
) -> None:
    modules = _loaded(CLI, "--project", "p", *argv, cwd=small_store)
    assert "ctxbase.store.sqlite" in modules
    assert _heavy(modules, ("numpy", *NOT_FOR_LIGHT_COMMANDS)) == []


def test_a_plain_capture_loads_no_parser(small_store: Path) -> None:
    argv = ("--project", "p", "--embedder", "hash", "capture", "--session", "s2", "--text", "hi")
    modules = _loaded(CLI, *argv, cwd=small_store)
    assert "ctxbase.anchor.capture_rules" in modules  # capture anchoring ran
    assert _heavy(modules, NOT_FOR_LIGHT_COMMANDS) == []


@pytest.mark.parametrize(
    "package", ["ctxbase", "ctxbase.anchor", "ctxbase.assemble", "ctxbase.retrieve.embed"]
)
def test_every_lazily_exported_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = module.__all__
    for name in names:
        value = getattr(module, name)
        assert value is not None, name
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        _ = module.not_a_name
    star: dict[str, object] = {}
    exec(f"from {package} import *", star)
    assert set(names) <= set(star)


def test_the_lazy_names_are_the_modules_own_objects() -> None:
    from ctxbase.anchor.capture_rules import anchor_events
    from ctxbase.assemble.assembler import Assembler
    from ctxbase.contextbase import ContextBase
    from ctxbase.model import Event

    assert ctxbase.ContextBase is ContextBase and ctxbase.Event is Event
    assert ctxbase.anchor.anchor_events is anchor_events
    assert ctxbase.assemble.Assembler is Assembler


def test_open_validates_policies_only_when_given(small_store: Path) -> None:
    """`open` checks the policies it is given at once (the parser loads then), and loads no
    parser for a base opened without them."""
    plain = "import ctxbase; ctxbase.open('ctxbase.db', project='p', embedder='hash').close()"
    modules = _loaded(plain, cwd=small_store)
    assert "ctxbase.contextbase" in modules
    assert _heavy(modules, ("yaml", "ctxbase.assemble.policy", "ctxbase.assemble.assembler")) == []
    given = plain.replace(
        "embedder='hash')", "embedder='hash', policies={'policies': [{'name': 'x'}]})"
    )
    modules = _loaded(given, cwd=small_store)
    assert {"yaml", "ctxbase.assemble.policy"} <= modules
    assert "ctxbase.assemble.assembler" not in modules  # validated, not assembled

"""The layers under the facade never import it, and import each other in one direction.

Every module of the package is parsed (ast: module level, TYPE_CHECKING blocks and imports
inside functions alike). The data runs capture -> anchor -> store -> retrieve -> assemble;
the imports run the other way (a later stage uses the earlier ones) with one difference,
stated in ALLOWED: anchoring persists what it finds, so it uses the store and the index
(anchor -> store, anchor -> retrieve); neither of those imports anchor. What the layers get
of a context base is `ctxbase.components.Components`, built by the facade.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import ctxbase

SRC = Path(ctxbase.__file__).parent
LAYERS = ("capture", "anchor", "store", "retrieve", "assemble")
# Modules outside the layers that a layer may import: the shared vocabulary, and the
# components the facade hands down (anchor and assemble only, see ALLOWED).
SHARED = frozenset(
    {
        "ctxbase.background",
        "ctxbase.cjk_terms",
        "ctxbase.errors",
        "ctxbase.lazy_names",
        "ctxbase.model",
        "ctxbase.process_owner",
        "ctxbase.sql_cues",
        "ctxbase.validation",
    }
)
COMPONENTS = "ctxbase.components"

# Every edge between subpackages, with why it exists (each one is checked to be real).
ALLOWED: dict[tuple[str, str], str] = {
    ("retrieve", "store"): "search, indexing and the embedding worker read the store",
    ("anchor", "capture"): "entity properties are checked with capture's validators",
    ("anchor", "store"): "anchoring writes entities and relations through the Store protocol",
    ("anchor", "retrieve"): "entities are written with their search units (indexing), "
    "mentions are matched with the index's tokenizer, signed search filters search results",
    ("anchor", "components"): "the store, searcher and embedder of the base being anchored",
    ("assemble", "store"): "sessions, tasks, state, traces and candidates are read and saved",
    ("assemble", "retrieve"): "strategies search (configs, relevance floor, indexing)",
    ("assemble", "anchor"): "require_signature: the assembled context is checked by signing",
    ("assemble", "components"): "the store, searcher and write paths of the base assembled over",
    ("components", "store"): "Components holds the Store",
    ("components", "retrieve"): "Components holds the Searcher and the Embedder",
}
# Ranks of the allowed order: an allowed edge goes from a higher rank to a lower one.
RANK = {"capture": 0, "store": 0, "retrieve": 1, "components": 2, "anchor": 3, "assemble": 4}
# Edges against that order, module to module, with the reason. They close no circle
# between modules (checked below).
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("ctxbase.retrieve.chunking", "ctxbase.assemble.tokens"): (
        "chunks are sized in the tokens the assembler counts (tokens imports no layer)"
    ),
    ("ctxbase.retrieve.search", "ctxbase.assemble.tokens"): (
        "snippets are cut to a token budget with the assembler's counter"
    ),
    ("ctxbase.retrieve.retracted", "ctxbase.assemble.repeats"): (
        "a retraction holds for the statements cut from the message, by the assembly's own "
        "text rule (repeats imports no layer)"
    ),
    ("ctxbase.anchor.capture_rules", "ctxbase.assemble.loop"): (
        "an anchored answer is linked to the context entities it used by record_outcome's "
        "evidence rule (used_evidence), imported when such an answer is anchored"
    ),
}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in SRC.rglob("*.py"):
        parts = ("ctxbase", *path.relative_to(SRC).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _targets(module: str, path: Path) -> Iterator[str]:
    """The ctxbase modules `module` imports, anywhere in its source."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            # `from pkg import submodule` imports the submodule; other names come from pkg
            names = [
                f"{origin}.{a.name}" if f"{origin}.{a.name}" in MODULES else origin
                for a in node.names
            ]
        else:
            continue
        for name in names:
            while name not in MODULES and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in MODULES and name != module:
                yield name


EDGES = {m: sorted(set(_targets(m, p))) for m, p in MODULES.items()}


def _group(module: str) -> str | None:
    """The layer (or `components`) a module belongs to; None for any other module."""
    if module == COMPONENTS:
        return "components"
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in LAYERS else None


def test_the_parser_sees_the_imports_it_must_judge() -> None:
    # guards the test itself: a relative, a TYPE_CHECKING and a function-local import
    assert "ctxbase.store.base" in EDGES["ctxbase.retrieve.search"]
    assert "ctxbase.retrieve.search" in EDGES["ctxbase.anchor.signing"]
    assert "ctxbase.assemble.loop" in EDGES["ctxbase.anchor.capture_rules"]
    assert "ctxbase.components" in EDGES["ctxbase.contextbase"]


def test_layers_never_import_the_facade_or_anything_above_them() -> None:
    """No module under capture/anchor/store/retrieve/assemble (nor components) imports
    `ctxbase.contextbase`, the package root (`ctxbase.ContextBase`, `ctxbase.open`...),
    its mixins or the services above it: only other layers and the shared modules."""
    wrong = [
        f"{m} imports {t}"
        for m, targets in EDGES.items()
        if _group(m) is not None
        for t in targets
        if _group(t) is None and t not in SHARED
    ]
    assert wrong == []


def test_imports_between_layers_follow_the_allowed_order() -> None:
    seen: set[tuple[str, str]] = set()
    wrong: list[str] = []
    for m, targets in EDGES.items():
        for t in targets:
            a, b = _group(m), _group(t)
            if a is None or b is None or a == b or (m, t) in EXCEPTIONS:
                continue
            seen.add((a, b))
            if (a, b) not in ALLOWED:
                wrong.append(f"{m} -> {t}")
    assert wrong == []
    # every allowed edge is real: the list says how the layers use each other today
    assert sorted(seen) == sorted(ALLOWED)
    assert [e for e in ALLOWED if not RANK[e[0]] > RANK[e[1]]] == []
    assert [e for e in EXCEPTIONS if e[1] not in EDGES.get(e[0], [])] == []


def test_no_circle_between_modules_of_different_layers_or_the_facade() -> None:
    """Strongly connected components (Tarjan) over the whole package: a circle may only
    stay inside one subpackage (a module importing a sibling lazily); the facade and the
    other top-level modules are in none."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in EDGES[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in MODULES:
        if v not in index:
            visit(v)

    def unit(module: str) -> str:  # a subpackage, or a top-level module on its own
        return ".".join(module.split(".")[:2])

    crossing = [c for c in circles if len({unit(m) for m in c}) > 1]
    assert crossing == []

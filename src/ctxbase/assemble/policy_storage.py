"""Storage settings in a policy file: accepted, named in a warning, and not used.

Seed 000's deployment configures a graph database (NebulaGraph) and a vector engine (Milvus)
next to its policies (`nebula_config: {address: ...}`, `milvus_config: {uri: ...}`). ctxbase
keeps the graph and the vectors in its own store (SQLite, or PostgreSQL with pgvector), so
such a key has nothing to configure. Refusing the file over it would make the article's
configuration fail for a setting that does not apply; it is dropped instead, with a warning
that names the key and where it was written.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["STORAGE_KEYS", "drop_storage_keys"]

log = logging.getLogger("ctxbase.assemble")

# key -> what it configures elsewhere
STORAGE_KEYS: dict[str, str] = {
    "nebula_config": "the graph database",
    "nebula": "the graph database",
    "graph_config": "the graph database",
    "graph_store": "the graph database",
    "graph_db": "the graph database",
    "milvus_config": "the vector engine",
    "milvus": "the vector engine",
    "vector_config": "the vector engine",
    "vector_store": "the vector engine",
    "vector_db": "the vector engine",
}


def _dropped(data: dict[str, Any], where: str, found: list[str]) -> dict[str, Any]:
    keys = [k for k in data if k in STORAGE_KEYS]
    for key in keys:
        found.append(f"{where}{key}")
    return {k: v for k, v in data.items() if k not in STORAGE_KEYS} if keys else data


def drop_storage_keys(data: dict[str, Any], source: str) -> tuple[dict[str, Any], list[str]]:
    """`data` (a loaded policy file) without its storage keys, at the top level and in each
    policy, and the YAML paths of the keys dropped; each one is logged as a WARNING."""
    found: list[str] = []
    out = _dropped(data, "", found)
    policies = out.get("policies")
    if isinstance(policies, list):
        kept = [
            _dropped(p, f"policies[{i}].", found) if isinstance(p, dict) else p
            for i, p in enumerate(policies)
        ]
        out = {**out, "policies": kept}
    for path in found:
        key = path.rsplit(".", 1)[-1]
        log.warning(
            "policies %s: %s is ignored: ctxbase keeps the graph and the vectors in its own "
            "store (SQLite or PostgreSQL), so %s needs no settings here",
            source,
            path,
            STORAGE_KEYS[key],
        )
    return out, found

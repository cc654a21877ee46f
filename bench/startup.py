"""Start-up time: what every `ctxbase` call and every process importing the library pays
before it does anything, side by side in one run.

Run: PYTHONPATH=src python bench/startup.py [--runs 15] [--trees before=../main/src,after=src]
                                            [--bytecode cached,source] [--json OUT]

Each command is a new interpreter (`sys.executable`), timed from start to exit (wall
clock), stdout discarded:

- `python -c pass`: the floor, the interpreter alone;
- `import ctxbase`;
- `ctxbase --help` and `ctxbase search --help` (the console script's own code:
  `from ctxbase.cli import main`);
- `ctxbase status`, `ctxbase search "..."` and `ctxbase events s1` on a small temporary
  store (200 events, the deterministic "hash" embedder, vectors made up front), the light
  commands.

Every tree named by `--trees` (LABEL=PATH to a `src` folder holding `ctxbase`; default
this checkout's) is copied to a temporary folder first, so its own `__pycache__` folders
play no part and none are written into it. Bytecode modes: `cached` writes and reads the
copy's `.pyc` files (what an installed package does; one warm-up run of each command
first), `source` compiles ctxbase's modules at every start (`PYTHONDONTWRITEBYTECODE=1`,
as a checkout run without bytecode does). Runs alternate: every round times each
(mode, tree, command) once, in an order shuffled per round. p50 / p95 in milliseconds, and
the modules each command imports (counted once per tree with `-X importtime`, the
interpreter's own included), which no machine load moves.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from assemble_scale import percentiles

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent
CLI = "import sys; from ctxbase.cli import main; sys.exit(main())"
QUERY = "why is the orders cache cold"


def commands(db: str) -> dict[str, list[str]]:
    """Label -> the interpreter's arguments."""
    light = ["--db", db, "--project", "bench", "--embedder", "hash"]
    return {
        "python -c pass": ["-c", "pass"],
        "import ctxbase": ["-c", "import ctxbase"],
        "ctxbase --help": ["-c", CLI, "--help"],
        "ctxbase search --help": ["-c", CLI, "search", "--help"],
        "ctxbase status": ["-c", CLI, *light, "status"],
        "ctxbase search": ["-c", CLI, *light, "search", QUERY, "-k", "5"],
        "ctxbase events": ["-c", CLI, *light, "events", "s1", "--last", "5"],
    }


def make_store(src: Path, db: str, events: int) -> None:
    """A small project, written by the first tree's library in a child process."""
    script = (
        "import sys, ctxbase\n"
        "cb = ctxbase.open(sys.argv[1], project='bench', embedder='hash')\n"
        "for i in range(int(sys.argv[2])):\n"
        "    cb.capture('user_message' if i % 2 else 'assistant_message',"
        " session_id=f's{i % 10}', text=f'note {i}: the orders cache (Redis) is cold after"
        " deploy {i % 7}; 订单查询 {i % 13} 缓存没生效')\n"
        "cb.flush()\n"
        "cb.wait_for_embeddings()\n"
        "cb.close()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(src)}
    subprocess.run([sys.executable, "-c", script, db, str(events)], env=env, check=True)


def _env(src: Path, mode: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE",)}
    env["PYTHONPATH"] = str(src)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if mode == "source":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _time(args: Sequence[str], env: dict[str, str], cwd: str) -> float:
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    elapsed = (time.perf_counter() - t) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed


def _modules(args: Sequence[str], env: dict[str, str], cwd: str) -> int:
    """How many modules the command imports (`-X importtime` lines): the same on any load."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=True,
        text=True,
    )
    return sum(line.startswith("import time:") for line in done.stderr.splitlines()) - 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs of each command")
    parser.add_argument(
        "--trees",
        default=f"current={ROOT / 'src'}",
        help="LABEL=PATH,... : src folders to compare (default this checkout's)",
    )
    parser.add_argument("--bytecode", default="cached,source", help="modes: cached, source")
    parser.add_argument("--events", type=int, default=200, help="events in the small store")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    modes = [m for m in args.bytecode.split(",") if m]
    if not set(modes) <= {"cached", "source"}:
        parser.error("--bytecode takes cached and/or source")
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="ctxbase-startup-") as tmp:
        copies: dict[tuple[str, str], Path] = {}
        for label, path in trees.items():
            if not (Path(path) / "ctxbase" / "__init__.py").is_file():
                parser.error(f"{path} holds no ctxbase package")
            for mode in modes:
                dest = Path(tmp) / mode / label
                shutil.copytree(
                    Path(path) / "ctxbase",
                    dest / "ctxbase",
                    ignore=shutil.ignore_patterns("__pycache__"),
                )
                copies[(mode, label)] = dest
        db = str(Path(tmp) / "small.db")
        make_store(next(iter(copies.values())), db, args.events)
        cmds = commands(db)
        for (mode, _), src in copies.items():
            if mode == "cached":  # write the .pyc files once, outside the timing
                for cmd in cmds.values():
                    _time(cmd, _env(src, mode), tmp)
        imported = {
            (label, name): _modules(cmd, _env(copies[(modes[0], label)], modes[0]), tmp)
            for label in trees
            for name, cmd in cmds.items()
        }
        samples: dict[tuple[str, str, str], list[float]] = {
            (mode, label, name): [] for (mode, label) in copies for name in cmds
        }
        keys = list(samples)
        for r in range(args.runs):
            rng.shuffle(keys)
            for mode, label, name in keys:
                src = copies[(mode, label)]
                samples[(mode, label, name)].append(_time(cmds[name], _env(src, mode), tmp))
            print(f"round {r + 1}/{args.runs}", file=sys.stderr, flush=True)
    figures = {f"{m}/{t}/{c}": percentiles(v) for (m, t, c), v in samples.items()}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"start-up, {args.runs} runs per command, {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), load {load:.1f} at the end; "
        f"Python {platform.python_version()}"
    )
    columns = [(m, t) for m in modes for t in trees]
    header = "".join(f"{f'{t} ({m})':>26}" for m, t in columns)
    counts = "".join(f"{f'{t} modules':>{len(t) + 10}}" for t in trees)
    print(f"{'p50 / p95 ms':<24}{header}  {counts}")
    for name in cmds:
        cells = "".join(
            f"{figures[f'{m}/{t}/{name}']['p50_ms']:>15.0f} / "
            f"{figures[f'{m}/{t}/{name}']['p95_ms']:>6.0f}"
            for m, t in columns
        )
        n = "".join(f"{imported[(t, name)]:>{len(t) + 10}}" for t in trees)
        print(f"{name:<24}{cells}  {n}")
    if args.json:
        out: dict[str, Any] = {
            "runs": args.runs,
            "events": args.events,
            "trees": trees,
            "modes": modes,
            "python": platform.python_version(),
            "figures": figures,
            "modules_imported": {f"{t}/{c}": n for (t, c), n in imported.items()},
        }
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

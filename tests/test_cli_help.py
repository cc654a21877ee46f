"""Every command and option of `ctxbase` says what it is for, and every --help works."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

import pytest

from ctxbase.cli import build_parser, main


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str | None]]:
    """(command path, parser, the help the parent's command list shows), depth first."""
    yield path, parser, None
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {a.dest: a.help for a in action._choices_actions}
            for name, child in action.choices.items():
                for sub_path, sub, listed_help in _parsers(child, (*path, name)):
                    yield sub_path, sub, listed.get(name) if sub is child else listed_help


def _missing_help(parser: argparse.ArgumentParser) -> list[str]:
    missing = []
    for action in parser._actions:
        name = "/".join(action.option_strings) or action.dest
        if not action.help or not str(action.help).strip() or action.help == argparse.SUPPRESS:
            missing.append(name)
    return missing


ALL = list(_parsers(build_parser()))


def test_the_walk_reaches_every_command() -> None:
    paths = {" ".join(path) for path, _, _ in ALL}
    expected = {"", "ingest", "migrate-data", "serve", "keys create", "bench memory", "status"}
    assert expected <= paths
    assert len(paths) >= 24


@pytest.mark.parametrize("path", [p for p, _, _ in ALL], ids=lambda p: " ".join(p) or "ctxbase")
def test_every_command_option_and_positional_has_help(path: tuple[str, ...]) -> None:
    _, parser, listed = next(item for item in ALL if item[0] == path)
    assert _missing_help(parser) == []
    if path:  # a subcommand: shown in its parent's list, and described on its own page
        assert listed and listed.strip(), f"{path} has no help in its parent's list"
        assert parser.description and parser.description.strip(), f"{path} has no description"


def test_the_top_level_description_is_written_for_users() -> None:
    parser = build_parser()
    text = parser.format_help()
    assert parser.description and "shared memory for LLM agents" in parser.description
    # not the module docstring meant for developers
    assert "thin layer" not in text and "exit codes" not in parser.description.lower()
    assert "examples:" in text and "ctxbase COMMAND --help" in text


@pytest.mark.parametrize("path", [p for p, _, _ in ALL], ids=lambda p: " ".join(p) or "ctxbase")
def test_help_exits_0_for_every_command(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([*path, "--help"])
    assert stopped.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: ctxbase {' '.join(path)}".rstrip())


def test_ctxbase_help_in_a_real_process() -> None:
    for argv in (["--help"], ["ingest", "--help"], ["bench", "locomo", "--help"]):
        done = subprocess.run(
            [sys.executable, "-m", "ctxbase", *argv], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: ctxbase") and done.stderr == ""


@pytest.mark.parametrize("path", [p for p, _, _ in ALL], ids=lambda p: " ".join(p) or "ctxbase")
def test_every_option_with_a_default_says_it(path: tuple[str, ...]) -> None:
    """A default a user cannot see is one they cannot rely on (rate limiting is on unless
    --rate-limit 0 says otherwise)."""
    _, parser, _ = next(item for item in ALL if item[0] == path)
    silent = [
        "/".join(a.option_strings)
        for a in parser._actions
        if a.option_strings
        and a.default not in (None, False, argparse.SUPPRESS)
        and not isinstance(a, argparse._HelpAction | argparse._VersionAction)
        and "default" not in str(a.help)
    ]
    assert silent == []


def test_serve_help_defaults_are_the_servers() -> None:
    from ctxbase.serve.server import _OPTIONS
    from ctxbase.serve.settings import ServerSettings

    _, serve, _ = next(item for item in ALL if item[0] == ("serve",))
    options = {v: k for k, v in _OPTIONS.items()}
    checked = 0
    for action in serve._actions:
        flag = next(iter(action.option_strings), "")
        field = options.get(flag, flag[2:].replace("-", "_"))
        if field in ServerSettings.model_fields and action.default is not None:
            if action.default is argparse.SUPPRESS:
                continue
            assert action.default == ServerSettings.model_fields[field].default, flag
            checked += 1
    assert checked >= 8


def _readme_command_lines() -> list[tuple[str, str]]:
    """(command line, the line with its comment continuations) of README's Command line
    block."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = text.split("\nctxbase demo ", 1)[1].split("\n```", 1)[0]
    entries: list[list[str]] = []
    for line in ("ctxbase demo " + block).splitlines():
        if line.startswith("ctxbase "):
            entries.append([line])
        elif entries:
            entries[-1].append(line)
    return [(e[0], "\n".join(e)) for e in entries]


def _command_parsers(line: str) -> list[argparse.ArgumentParser]:
    parsers = {path: parser for path, parser, _ in ALL}
    tokens = line.split("#", 1)[0].split()[1:]
    words: list[str] = []
    skip = False
    for token in tokens:
        if skip:
            skip = False
        elif token in ("--db", "--project", "--embedder"):
            skip = True
        elif not token.startswith("-"):
            words.append(token)
    if "|" in words:  # `projects | sessions | entities`: any of them
        return [parsers[(w,)] for w in words if (w,) in parsers]
    path: tuple[str, ...] = ()
    for word in words:
        if (*path, word) in parsers:
            path = (*path, word)
    assert path, line
    return [parsers[path]]


@pytest.mark.parametrize(("line", "entry"), _readme_command_lines(), ids=lambda v: v[:40])
def test_readme_command_block_names_only_options_of_its_command(line: str, entry: str) -> None:
    """A flag written on a command's line (or its comment lines) is one of its options:
    `--no-auth` on the `keys create` line sent readers to the wrong command."""
    import re

    options = {o for p in _command_parsers(line) for o in p._option_string_actions}
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*[a-z])", entry))
    assert sorted(flags - options) == [], line

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

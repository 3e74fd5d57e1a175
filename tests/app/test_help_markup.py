"""Typer renders help with Rich, whose markup reads "[key=value]" and "[@SPLIT]" as tags and
drops them: `facet embedders --help` said "set one as NAME, e.g. 'instemb'", the option syntax
gone where it was explained, and `facet eval --help` "beir:FOLDER". Every help text of every
command is checked for such a bracket left unescaped, and the two are shown as written."""

from __future__ import annotations

import re

from typer.main import get_command

from app.cli import cli
from tests.app.cli_runner import invoke_cli

# Rich's markup tag: "[" then a letter, "#", "/" or "@" up to the next "]", unless escaped.
TAG = re.compile(r"(\\*)\[([a-z#/@][^[]*?)]")


def _helps(command, path):
    yield path, command.help or ""
    for param in getattr(command, "params", []):
        yield [*path, param.name], getattr(param, "help", None) or ""
    for name, sub in getattr(command, "commands", {}).items():
        yield from _helps(sub, [*path, name])


def test_no_help_text_holds_a_bracket_rich_would_eat() -> None:
    eaten = [(path, match.group(0)) for path, text in _helps(get_command(cli), ["facet"])
             for match in TAG.finditer(text) if not match.group(1)]
    assert eaten == []


def test_the_option_syntax_is_shown_as_written() -> None:
    embedders = invoke_cli("embedders", "--help")
    assert "NAME[key=value], e.g. 'instemb[text_quotes=keep]'" in " ".join(embedders.stdout.split())
    assert "beir:FOLDER[@SPLIT]" in invoke_cli("eval", "--help").stdout

"""A refused option value is named as the command line spells it: the services name the HTTP
API's fields ("rerank_depth must be from 1 to 1000"), and `facet search --rerank-depth 0` said
so, naming a field the user never typed (2026-12-05)."""

from __future__ import annotations

import pytest

from app.commands.common import as_flag
from tests.app.cli_runner import invoke_cli, tiny_data_folder


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return tiny_data_folder(tmp_path_factory.mktemp("flags"))


@pytest.mark.parametrize(("args", "said"), [
    (["search", "card", "-c", "tiny", "--rerank-depth", "0"],
     "error: --rerank-depth must be from 1 to 1000, got 0\n"),
    (["search", "card", "-c", "tiny", "--score-threshold", "nan"],
     "error: --score-threshold must be a finite number, got nan\n"),
    (["documents", "tiny", "--limit", "0"], "error: --limit must be from 1 to 1000, got 0\n"),
])
def test_refused_values_name_the_flag(data, args, said) -> None:
    r = invoke_cli(*args, env={"FACET_DATA_DIR": str(data)})
    assert r.returncode == 2 and r.stderr.endswith(said), r.stderr
    assert r.stdout == ""


def test_only_an_opening_field_of_the_command_is_renamed() -> None:
    class Option:
        def __init__(self, name: str, *opts: str, kind: str = "option") -> None:
            self.name, self.opts, self.param_type_name = name, list(opts), kind

    class Command:
        def __init__(self, *params: Option) -> None:
            self.params = list(params)

    cmd = Command(Option("rerank_depth", "--rerank-depth"), Option("collection", "-c", "--collection"),
                  Option("query", "query", kind="argument"))
    assert as_flag("rerank_depth must be from 1", "rerank_depth", cmd) == "--rerank-depth must be from 1"
    # Not at the opening, a field the command has no option for, an argument: as they were.
    assert as_flag("collection 'x' is being deleted", "collection", cmd) == \
        "collection 'x' is being deleted"
    assert as_flag("the rerank_depth must be", "rerank_depth", cmd) == "the rerank_depth must be"
    assert as_flag("mode must be one of", "mode", cmd) == "mode must be one of"
    assert as_flag("query must be text", "query", cmd) == "query must be text"
    assert as_flag("rerank_depth must be", None, cmd) == "rerank_depth must be"
    assert as_flag("rerank_depth must be", "rerank_depth", None) == "rerank_depth must be"


def test_an_empty_text_is_counted_as_typed() -> None:
    """`facet embed a ""` said "texts[1] is empty": the API's 0-based list index, for the
    second text typed."""
    r = invoke_cli("embed", "-e", "minilm", "a", "b", "  ")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.endswith("error: text 3 is empty; every text must contain something to embed\n")

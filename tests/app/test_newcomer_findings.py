"""What a newcomer met first: `facet serve --preload minlm` (or FACET_DEFAULT_EMBEDDER=minlm)
ended in uvicorn's 44-line "Application startup failed" traceback; a csv `id,review,stars`
embedded its ids; `facet train` said "unknown method ''"; options with no help; Gradio's
"set `share=True` in `launch()`" under `facet ui`; a "Loading weights" bar in examples/rag.py."""

from __future__ import annotations

import re
from unittest import mock

import pytest

from tests.app.cli_runner import invoke_cli
from tests.app.served import free_port


@pytest.mark.parametrize("command", ["serve", "ui"])
@pytest.mark.parametrize(("args", "env", "said"), [
    (["--preload", "minlm"], {}, "error: --preload names 'minlm', which cannot be loaded: unknown embedder 'minlm'"),
    ([], {"FACET_DEFAULT_EMBEDDER": "minlm"},
     "error: FACET_DEFAULT_EMBEDDER names 'minlm', which cannot be loaded: unknown embedder 'minlm'"),
    # The default embedder is checked too when --preload names others (a request naming none gets it).
    (["--preload", "minilm"], {"FACET_DEFAULT_EMBEDDER": "minlm"}, "error: FACET_DEFAULT_EMBEDDER names 'minlm'"),
    # [options] are checked without loading the model.
    (["--preload", "minilm", "--preload", "minilm[bogus=1]"], {},
     "error: --preload names 'minilm[bogus=1]', which cannot be loaded: embedder 'minilm' has no option 'bogus'"),
], ids=["preload", "default", "default-besides-preload", "options"])
def test_a_server_refuses_an_embedder_it_cannot_load_in_one_line(tmp_path, command, args, env, said) -> None:
    data = tmp_path / "data"
    with mock.patch("uvicorn.run", side_effect=AssertionError("the server started")), \
            mock.patch("ui.app.launch_ui", side_effect=AssertionError("the UI started")):
        result = invoke_cli(command, "--port", str(free_port()), *args, env={"FACET_DATA_DIR": str(data), **env})
    assert result.returncode == 2, result
    assert result.stderr.startswith(said), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (data / "facet.db").exists()  # refused before the data folder was opened


def test_a_csv_without_a_text_column_is_refused_not_its_ids_embedded(tmp_path) -> None:
    """`id,review,stars` embedded the id column (already the document id) with a warning; a
    jsonl record without a text field, and `facet cluster` of the same csv, were refused."""
    from indexer.parsing import DocumentError, ParsedDocument, parse_file

    reviews = tmp_path / "r.csv"
    reviews.write_text("id,review,stars\n1,great kettle,5\n2,burnt toast,1\n")
    [refused] = list(parse_file(reviews))
    assert isinstance(refused, DocumentError), refused
    assert refused.message == (
        f"{reviews}: no text column; expected one of text, contents, content, body (found id, review, "
        "stars); no rows were read, name the one holding the text as the text column (`facet index "
        "--text-column`, text_column in POST /jobs)")
    named = list(parse_file(reviews, text_column="review"))
    assert [(d.key, d.text) for d in named if isinstance(d, ParsedDocument)] == [
        ("1", "great kettle"), ("2", "burnt toast")]
    only_ids = tmp_path / "ids.csv"
    only_ids.write_text("ID\n1\n2\n")  # its one column is the id
    [refused] = list(parse_file(only_ids))
    assert isinstance(refused, DocumentError) and "no text column" in refused.message, refused
    # One column that is not an id is the text (as `facet cluster` reads it); nothing to choose.
    one = tmp_path / "one.csv"
    one.write_text("review\ngreat kettle\nburnt toast\n")
    docs = list(parse_file(one))
    assert [(d.text, d.warnings) for d in docs if isinstance(d, ParsedDocument)] == [
        ("great kettle", []), ("burnt toast", [])]

    indexed = invoke_cli("index", str(reviews), "-c", "rev", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert indexed.returncode == 4, indexed
    assert "no text column; expected one of text" in indexed.stderr and "--text-column" in indexed.stderr


def test_train_without_a_method_says_one_is_needed(tmp_path) -> None:
    result = invoke_cli("train", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 2, result
    assert result.stderr.startswith("error: facet train needs a METHOD, one of causal-eos, "), result.stderr
    assert "unknown method ''" not in result.stderr and "`facet train --list`" in result.stderr


@pytest.mark.parametrize(("command", "option"), [
    ("demo", "--embedder"), ("demo", "--rerank"), ("bench", "--embedder"), ("bench", "--rerank"),
    ("cluster", "--seed"), ("train", "--seed"), ("serve", "--port"), ("ui", "--port")])
def test_options_say_what_they_do(command, option) -> None:
    import typer.main

    from app.cli import cli

    group = typer.main.get_command(cli)
    [param] = [p for p in group.commands[command].params if option in p.opts]  # type: ignore[attr-defined]
    assert param.help and len(param.help) > 15, (command, option, param.help)


def test_every_option_of_every_command_has_a_help_text() -> None:
    """`facet worker --loglevel` (and the eight above) showed only a default in --help."""
    import typer.main

    from app.cli import cli

    group = typer.main.get_command(cli)
    bare = [(name, p.opts) for name, command in group.commands.items()  # type: ignore[attr-defined]
            for p in command.params
            if getattr(p, "param_type_name", "") == "option" and not getattr(p, "help", None)]
    assert bare == [], bare


def test_the_ui_does_not_print_gradios_share_advice(tmp_path) -> None:
    """`facet ui` printed "* To create a public link, set `share=True` in `launch()`": advice
    to Python code, which a facet user cannot follow. Facet's own line says where it runs."""
    import gradio

    port = free_port()
    with mock.patch.object(gradio.Blocks, "block_thread", return_value=None):  # returns at once
        result = invoke_cli("ui", "--port", str(port), "--preload", "",
                            env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 0, result
    assert f"Facet UI on http://127.0.0.1:{port} " in result.stdout, result.stdout
    assert "share=True" not in result.stdout + result.stderr, result.stdout


# examples/rag.py drew transformers' "Loading weights: 100%" bar: asserted by the one run of the
# example in tests/examples/test_rag_example.py (test_rag_example_..._and_draws_no_loading_bar).


def test_the_demos_steering_search_finds_what_its_instruction_names(tmp_path) -> None:
    """`facet demo`'s "how long does it take" under "Find messages about top-ups" found card
    deliveries and transfers with the default minilm (which blends in a quarter of an
    instruction): a newcomer's first look at instruction-aware search showed it failing. It is
    run as minilm reads a steering instruction whole, and says so."""
    done = invoke_cli("demo", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 0, done.stderr
    block = done.stdout.split("instruction: Find messages about top-ups", 1)[1].split("\n\n", 1)[0]
    intents = re.findall(r"intent=(\S+)", block)
    assert len(intents) == 3 and all("top_up" in i for i in intents), block
    assert "(a steering instruction: read whole, as minilm[instruction_weight=1]" in done.stdout


def test_cluster_refuses_a_csv_whose_one_column_is_its_ids(tmp_path) -> None:
    """`facet index` refuses a csv without a text column; `facet cluster` clustered a csv whose
    only column is `id` as its texts."""
    ids = tmp_path / "ids.csv"
    ids.write_text("id\nr1\nr2\nr3\n")
    done = invoke_cli("cluster", str(ids), "-i", "topic", "--k", "2", "--embedder", "minilm",
                      "--explain", "", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 4 and "no column of texts" in done.stderr, done.stderr


def test_the_demo_run_again_without_e_searches_with_the_collections_embedder(tmp_path, monkeypatch, minilm) -> None:
    """`facet demo -e E`, then `facet demo`: the second indexed nothing new (the collection's own
    embedder) but searched the steering query with minilm's spec, which the collection has no
    vectors of: three results, then "has no vectors from 'minilm'", exit 2. (A second minilm
    under another name stands for E; the sample cut to 24 messages.)"""
    import app.commands.demo as demo
    from embedders.registry import register_embedder, unregister_embedder

    class Renamed:
        def __init__(self) -> None:
            self.name = "minilm-two"

        def __getattr__(self, key: str) -> object:
            return getattr(minilm, key)

        @property
        def identity(self) -> str:
            return minilm.identity.replace("minilm", "minilm-two", 1)

    small = tmp_path / "sample.jsonl"
    with demo.SAMPLE_FILE.open(encoding="utf-8") as f:
        small.write_text("".join(line for i, line in enumerate(f) if i % 13 == 0), encoding="utf-8")
    monkeypatch.setattr(demo, "SAMPLE_FILE", small)
    register_embedder("minilm-two", lambda device=None, **_kw: Renamed(), "minilm under another name")
    try:
        env = {"FACET_DATA_DIR": str(tmp_path / "data")}
        first = invoke_cli("demo", "-e", "minilm-two", env=env)
        assert first.returncode == 0, first.stderr
        again = invoke_cli("demo", env=env)
        assert again.returncode == 0, again.stderr
        assert "demo done" in again.stdout and "steering instruction" not in again.stdout
    finally:
        unregister_embedder("minilm-two")

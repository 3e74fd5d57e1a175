"""An empty or blank embedder or rerank spec: refused as a Facet error naming its field, or (an
empty rerank) read as no rerank; never Python's ``ValueError: PosixPath('.') has an empty name``
(``""`` was read as the path of the current folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import FacetError, UnknownModelError
from app.services.search import SearchRequest
from embedders.errors import UnknownEmbedderError
from tests.app.cli_runner import invoke_cli, tiny_data_folder
from tests.app.services.conftest import write_corpus


@pytest.mark.parametrize("spec", ["", "  "])
def test_registry_refuses_an_empty_spec_as_unknown_embedder(spec, tmp_path, monkeypatch) -> None:
    from embedders.registry import check_embedder, saved_name

    monkeypatch.chdir(tmp_path)
    for call in (saved_name, check_embedder):
        with pytest.raises(UnknownEmbedderError, match="non-empty name or path"):
            call(spec)


@pytest.mark.parametrize("path", ["", ".", "/"])
def test_checkpoint_lookups_of_a_nameless_path_do_not_raise(path, tmp_path, monkeypatch) -> None:
    from embedders.base import recover_checkpoint
    from embedders.registry import is_checkpoint_dir

    monkeypatch.chdir(tmp_path)  # no facet_config.json here
    assert is_checkpoint_dir(path) is False
    assert recover_checkpoint(path) is False


@pytest.fixture
def long_facet(facet, tmp_path: Path):
    write_corpus(tmp_path / "src", 3)
    facet.index(tmp_path / "src", "long")
    return facet


def test_empty_embedder_is_refused_naming_it(long_facet) -> None:
    from app.integrations.langchain import FacetRetriever

    with pytest.raises(UnknownModelError, match="embedder must be a non-empty") as e:
        long_facet.search(SearchRequest(query="bank", collection="long", embedder=""))
    assert e.value.param == "embedder"
    with pytest.raises(FacetError, match="embedder must be a non-empty"):
        FacetRetriever(collection="long", facet=long_facet, embedder="").invoke("bank")


def test_blank_rerank_is_refused_naming_rerank_and_empty_is_none(long_facet) -> None:
    with pytest.raises(UnknownModelError, match=r"^rerank must be a non-empty") as e:
        long_facet.search(SearchRequest(query="bank", collection="long", rerank="  "))
    assert e.value.param == "rerank"
    plain = long_facet.search(SearchRequest(query="bank", collection="long"))
    empty = long_facet.search(SearchRequest(query="bank", collection="long", rerank=""))
    assert empty.reranker is None and empty.reranker_spec is None
    assert [r.doc_id for r in empty.results] == [r.doc_id for r in plain.results]


def test_cli_search_with_an_empty_embedder_says_why_without_a_traceback(tmp_path) -> None:
    data = tiny_data_folder(tmp_path)
    done = invoke_cli("search", "card", "--collection", "tiny", "--embedder", "",
                      env={"FACET_DATA_DIR": str(data)})
    assert done.returncode != 0
    assert "embedder must be a non-empty" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_an_empty_embedder_to_index_or_embed_is_refused_as_search_refuses_it(facet, tmp_path) -> None:
    """`facet index --embedder ''`, ``IndexOptions(embedder="")`` and ``embed(embedder="")``
    silently used the default while a search refused the same "" (and the API refuses it for
    /jobs and /v1/embeddings): one rule, nothing indexed nor any collection made."""
    from app.core import IndexOptions

    write_corpus(tmp_path / "src", 2)
    for run in (lambda: facet.index(tmp_path / "src", "fresh", IndexOptions(embedder="")),
                lambda: facet.submit_index(tmp_path / "src", "fresh", IndexOptions(embedder=" ")),
                lambda: facet.embed(["a text"], embedder="")):
        with pytest.raises(UnknownModelError, match=r"^embedder must be a non-empty") as e:
            run()
        assert e.value.param == "embedder"
    assert "fresh" not in [c.name for c in facet.collections()]
    (tmp_path / "cli").mkdir()
    data = tiny_data_folder(tmp_path / "cli")
    for args in (("index", str(tmp_path / "src"), "--collection", "other", "--embedder", ""),
                 ("embed", "a text", "--embedder", "")):
        done = invoke_cli(*args, env={"FACET_DATA_DIR": str(data)})
        assert done.returncode == 2, (args, done.stderr)
        assert "embedder must be a non-empty" in done.stderr and "Traceback" not in done.stderr

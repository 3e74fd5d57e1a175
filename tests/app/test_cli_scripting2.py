"""Found driving `facet` from scripts (2026-11-30): every model name of a cluster request is
checked before any model loads (`facet cluster -e nosuch` loaded the inbedder explainer first,
13.9 s, then said "unknown embedder"); a job resumed after a cancel is logged as cancelled, not
"interrupted"; `facet search -` reads the query from standard input (it searched for "-").
Real minilm, SQLite, edge store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from app.errors import UnknownModelError
from app.services.clustering import ClusterRequest
from app.services.indexing import IndexOptions, Progress
from tests.app.cli_runner import invoke_cli, tiny_data_folder
from tests.app.services.conftest import write_corpus

TEXTS = [f"text number {i} about the card payment" for i in range(6)]


@pytest.mark.parametrize("entry", ["cluster", "validate"])
def test_an_unknown_embedder_is_refused_before_the_explainer_loads(facet, entry) -> None:
    """``ClusterService.cluster`` (the CLI's and POST /cluster's) and ``validate`` (the API's and
    the workers' early refusal) refuse the embedder's name before the explainer is loaded."""
    request = ClusterRequest(instruction="What is it about?", texts=TEXTS, embedder="nosuch",
                             explainer="inbedder", k=2)
    run = facet.clustering.cluster if entry == "cluster" else facet.clustering.validate
    with pytest.raises(UnknownModelError, match="unknown embedder 'nosuch'") as caught:
        run(request)
    embedders = facet.clustering.ctx.embedders
    assert embedders.peek("inbedder") is None, "the explainer was loaded before the embedder's name was checked"
    assert embedders.peek("nosuch") is None
    assert caught.value.param == "embedder"


def test_facet_cluster_with_an_unknown_embedder_loads_no_model(tmp_path: Path) -> None:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n")
    done = invoke_cli("cluster", str(path), "-i", "x", "-e", "nosuch", "--k", "2", "--json",
                      env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode != 0
    assert "error: unknown embedder 'nosuch'" in done.stderr
    assert "loading" not in done.stderr, done.stderr
    assert done.stdout == ""


def test_a_job_resumed_after_a_cancel_is_logged_as_cancelled(facet, tmp_path, caplog) -> None:
    write_corpus(tmp_path / "src", 4)
    asked: list[object] = []

    def cancel_once(_progress: Progress) -> None:
        if not asked:
            asked.append(facet.cancel_job(facet.jobs("c")[0].id))

    report = facet.index(tmp_path / "src", "c", IndexOptions(batch_chunks=1), progress=cancel_once)
    assert report.state == "cancelled"
    with caplog.at_level("INFO", logger="app.services.indexing"):
        again = facet.index(tmp_path / "src", "c")
    assert facet.job(again.job_id).resumed_from == report.job_id
    assert f"resuming cancelled job {report.job_id} as job {again.job_id}" in caplog.text, caplog.text
    assert "resuming interrupted" not in caplog.text


def _search_stdin(data: Path, stdin: str | bytes, *args: str) -> subprocess.CompletedProcess[str]:
    """``facet search - -c tiny ARGS`` in this process with ``stdin`` on standard input."""
    return invoke_cli("search", "-", "-c", "tiny", *args, env={"FACET_DATA_DIR": str(data)},
                      input=stdin)


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    return tiny_data_folder(tmp_path_factory.mktemp("stdin"))


def test_search_dash_reads_the_query_from_standard_input(tiny_data: Path) -> None:
    done = _search_stdin(tiny_data, "\ufeffcard payment\ndeclined\r\n", "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["query"] == "card payment\ndeclined"  # all of it, stripped
    assert payload["results"][0]["doc_id"].endswith("d0.txt")


@pytest.mark.parametrize("stdin", ["", "\r\n", "\ufeff  \n"])
def test_search_dash_with_nothing_on_standard_input_is_an_empty_query(tiny_data: Path, stdin: str) -> None:
    done = _search_stdin(tiny_data, stdin)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: the query is empty: give the text to search for\n"

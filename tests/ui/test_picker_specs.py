"""Embedder specs with options (``minilm[instruction_weight=1]``) in the page's pickers: a
collection indexed with one is offered and searched by it, on every tab that picks an
embedder; other specs are refused in the page's words. Real handlers over a real store and
minilm, and one search through a launched page (gradio_client); nothing is mocked."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

gr = pytest.importorskip("gradio")

SPEC = "minilm[instruction_weight=1]"
TEXTS = [
    ("lost", "the card I ordered never arrived in the post"),
    ("declined", "my card payment was declined at the shop"),
    ("top-up", "how do I top up my account with apple pay"),
    ("transfer", "my transfer to a friend has not shown up yet"),
    ("rate", "the exchange rate for euros looks wrong to me"),
    ("twice", "I was charged twice for one coffee"),
]
QUERY, INSTRUCTION = "my new card has not come", "Find messages with the same customer intent"


@pytest.fixture(scope="module")
def indexed(minilm, tmp_path_factory) -> Iterator[tuple[Any, Path]]:
    """A facade over a collection ``c1`` indexed with ``SPEC``, and the allowed root of the
    Index tab (holding a folder ``more``)."""
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.services.indexing import IndexOptions
    from app.settings import FacetSettings

    base = tmp_path_factory.mktemp("picker-specs")
    source = base / "allowed" / "corpus"
    source.mkdir(parents=True)
    (source / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n"
                                                 for i, t in TEXTS))
    (base / "allowed" / "more").mkdir()
    (base / "allowed" / "more" / "note.txt").write_text("a note about a card lost in the post")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=base / "data", ui_allowed_roots=[base / "allowed"],
                                ui_rerankers=["minilm"]), embedders=cache)
    facet.index(source, "c1", IndexOptions(embedder=SPEC))
    assert facet.collection("c1").sources == {"minilm": SPEC}
    yield facet, base
    facet.close()


def handlers(facet: Any, **settings: Any) -> Any:
    from ui.handlers import UiHandlers

    return UiHandlers(facet, facet.settings.model_copy(update=settings))


def search(h: Any, embedder: str, *, collection: str = "c1", rerank: bool = False,
           reranker: str | None = None) -> tuple[str, str]:
    result: tuple[str, str] = h.search(QUERY, INSTRUCTION, collection, embedder, 3, "", rerank,
                                       reranker, False, "dense")
    return result


def finished(facet: Any, job_id: int, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while (job := facet.job(job_id)).state in ("queued", "running"):
        assert time.monotonic() < deadline, f"job {job_id} still {job.state}"
        time.sleep(0.1)
    return job


def refused(call: Any) -> Any:
    with pytest.raises(gr.Error) as caught:
        call()
    return caught.value


def test_search_and_compare_offer_and_take_the_collections_recorded_spec(indexed) -> None:
    """The pickers offered the vector's bare name ("minilm"), hiding that the collection reads
    queries at instruction_weight=1, and refused the spec typed or sent as "not available"."""
    from app.services.search import SearchRequest

    facet, _ = indexed
    h = handlers(facet)
    picker, _examples = h.collection_changed("c1")
    assert (picker["choices"], picker["value"]) == ([SPEC], SPEC)
    html, summary = search(h, SPEC)
    assert "3 results from <b>c1</b>" in summary
    core = facet.search(SearchRequest(query=QUERY, collection="c1", instruction=INSTRUCTION,
                                      top_k=3, embedder=SPEC))
    assert [html.index(r.doc_id) for r in core.results] == sorted(
        html.index(r.doc_id) for r in core.results)  # the core's ranking, in its order
    compared = h.compare(QUERY, INSTRUCTION, "Find messages on the same topic", "c1", SPEC, 3, "")
    assert "lost" in compared


def test_cluster_and_index_offer_and_take_the_recorded_spec(indexed) -> None:
    """The Cluster and Index tabs offered the allowed names only and refused the collection's
    own spec."""
    facet, base = indexed
    h = handlers(facet)
    assert h.embedder_choices(None)["choices"] == h.embedders()
    assert h.embedder_choices("c1")["choices"] == [*h.embedders(), SPEC]
    assert "value" not in h.embedder_choices("c1")  # the Index tab keeps what is picked
    # The Cluster tab picks the collection's own (the CLI's and POST /cluster's with no
    # embedder named): it kept the server's default, minilm, whose plain vectors are not c1's
    # reading (an InstEmb collection was clustered with minilm's).
    picked = h.cluster_embedder_choices("c1")
    assert (picked["choices"], picked["value"]) == ([*h.embedders(), SPEC], SPEC)
    assert facet.collection("c1").default_embedder == "minilm"
    for other in (None, "", "no-such-collection"):
        assert "value" not in h.cluster_embedder_choices(other)
    # Where the collection's embedder is not offered here, the picker is left as it is.
    assert "value" not in handlers(facet, api_models=["backbone-mean"]).cluster_embedder_choices("c1")
    summary, _figure, rows, _csv = h.cluster("collection", "c1", "", 0, None, None, None, None,
                                             None, "What does the customer want?", 2, SPEC, None)
    assert "embedder minilm" in summary and len(rows) == 2
    job_id, *_ = h.index_folder(str(base / "allowed" / "more"), "c1", SPEC)
    job = finished(facet, job_id)
    assert job.state == "completed" and job.docs_indexed == 1
    assert facet.collection("c1").sources == {"minilm": SPEC}


def test_other_specs_are_refused_in_the_pages_words(indexed) -> None:
    """Every spec with options was "not available here; pick one of: ..." (the list holding no
    spec), a malformed one too; the allowed list still bounds the collection's spec."""
    facet, _ = indexed
    h = handlers(facet)
    # Each spec loads another copy of the model: only the recorded one, or one listed exactly.
    other = refused(lambda: search(h, "minilm[instruction_weight=0.5]"))
    assert other.title == "Unknown embedder"
    assert ("'minilm[instruction_weight=0.5]' is not available here: minilm is, but with options "
            f"only as c1 recorded it ({SPEC}) or where FACET_API_MODELS lists the spec exactly"
            ) in other.message
    assert other.message.endswith(f"minilm, {SPEC}")  # offered
    malformed = refused(lambda: search(h, "minilm[a=1][b=2]"))
    assert malformed.title == "Check the input"
    assert ("The embedder 'minilm[a=1][b=2]' cannot be read: give the options in one pair of "
            "brackets, name[key=value,key2=value2]; pick one of:") in malformed.message
    reranker = refused(lambda: search(h, SPEC, rerank=True, reranker=SPEC))
    assert "FACET_UI_RERANKERS or FACET_API_MODELS lists the spec exactly" in reranker.message
    # Where minilm may not be loaded, neither may its variant.
    restricted = handlers(facet, api_models=["backbone-mean"])
    assert SPEC not in restricted.embedder_choices("c1")["choices"]
    assert refused(lambda: search(restricted, SPEC)).message == (
        f"The embedder '{SPEC}' is not available here; pick one of: backbone-mean")
    # A spec listed exactly loads, and an option the model lacks is named.
    listed = handlers(facet, api_models=["minilm", "minilm[nope=1]"])
    bad = refused(lambda: search(listed, "minilm[nope=1]"))
    assert bad.title == "Check the input"
    assert bad.message == "embedder 'minilm' has no option 'nope'; options: instruction_weight"


def test_a_stopped_job_indexing_with_options_is_resumed_from_the_page(indexed) -> None:
    """Its embedder, the collection's recorded spec, was "not offered here": only the command
    line could go on with it."""
    from app.services.indexing import IndexOptions

    facet, base = indexed
    h = handlers(facet)
    folder = base / "allowed" / "notes"
    folder.mkdir()
    for i in range(3):
        (folder / f"n{i}.txt").write_text(f"Note {i}: the lighthouse keeper's log for day {i}.")

    def stop(_progress: object) -> None:  # the server stops after the first batch
        facet.context.stop_reason = "the server stopping"
        facet.context.stopping.set()

    stopped = facet.index(folder, "notes", IndexOptions(embedder=SPEC, batch_chunks=1),
                          progress=stop)
    facet.context.stopping.clear()
    assert stopped.state == "interrupted"
    row, picker = h.stopped_jobs()
    assert row["visible"] and picker["value"] == stopped.job_id
    job_id, *_ = h.resume_index(stopped.job_id)
    job = finished(facet, job_id)
    assert job.state == "completed" and facet.collection("notes").documents == 3
    assert facet.collection("notes").sources == {"minilm": SPEC}


def test_a_launched_page_takes_the_spec_through_its_picker(indexed) -> None:
    """Through Gradio's own API: the dropdown passes the spec on (``allow_custom_value``) and
    the search runs with it."""
    from gradio_client import Client

    from ui.app import launch_ui

    from .conftest import free_port

    facet, _ = indexed
    demo = launch_ui(facet, port=free_port(), block=False)
    try:
        client = Client(demo.local_url, verbose=False)
        _html, summary = client.predict(QUERY, INSTRUCTION, "c1", SPEC, 3, "", False, "minilm",
                                        False, "dense", api_name="/search")
        assert "3 results from <b>c1</b>" in summary
        client.close()
    finally:
        demo.close()


def test_a_stopped_no_sync_job_is_resumed_without_a_sync(indexed) -> None:
    """Resume started the job again with the folder's default, a sync: a --no-sync job's kept
    documents (their files deleted on purpose) were removed."""
    from app.services.indexing import IndexOptions

    facet, base = indexed
    h = handlers(facet)
    folder = base / "allowed" / "kept"
    folder.mkdir()
    for i in range(3):
        (folder / f"k{i}.txt").write_text(f"Kept note {i}: the harbour master's log for day {i}.")
    assert facet.index(folder, "kept", IndexOptions(sync=False)).state == "completed"
    (folder / "k0.txt").unlink()  # kept in the collection on purpose
    for i in range(3, 6):
        (folder / f"k{i}.txt").write_text(f"Kept note {i}: the harbour master's log for day {i}.")

    def stop(_progress: object) -> None:
        facet.context.stop_reason = "the server stopping"
        facet.context.stopping.set()

    stopped = facet.index(folder, "kept", IndexOptions(sync=False, batch_chunks=1), progress=stop)
    facet.context.stopping.clear()
    assert stopped.state == "interrupted" and facet.job(stopped.job_id).sync is False
    job_id, *_ = h.resume_index(stopped.job_id)
    job = finished(facet, job_id)
    assert job.state == "completed" and job.docs_deleted == 0 and job.sync is False
    assert facet.collection("kept").documents == 6  # k0 kept, k1-k5 indexed

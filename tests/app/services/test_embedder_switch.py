"""Switching or comparing embedders in one collection (a collection holds one named vector per
embedder): a refused run leaves no embedder behind, the default embedder is read the same way
by indexing, searches and listings, a half-filled embedder does not take over searches, a plain
re-run says which embedder still lacks vectors, and two checkpoints of one method are told how
to live side by side. Real minilm and a second real embedder (``notes_embedder``: minilm reading
documents through another prompt), real SQLite and the embedded store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.errors import ConflictError
from app.services.collections import CollectionService
from app.services.context import EmbedderCache, ServiceContext
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService, why_no_results
from embedders.baselines import EncoderMeanEmbedder
from embedders.contract import PromptConfig
from tests.app.services.conftest import locked_by_another_process, write_corpus


def test_a_run_refused_by_a_held_store_leaves_no_embedder_on_the_collection(make_ctx, tmp_path,
                                                                              notes_embedder):
    """`facet index -e causal2vec`, a `facet serve` holding the store, then `facet index -e
    minilm` refused: the collection listed minilm anyway, and every search naming no embedder
    failed on it ("has no vectors from 'minilm'"), for good, with no job row saying why."""
    src = tmp_path / "src"
    write_corpus(src, 3)
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(src, "c", IndexOptions(embedder=notes_embedder))
    with locked_by_another_process(tmp_path / "data", "c", shown_as="facet serve", opened=True), \
            pytest.raises(ConflictError):
        service.index(src, "c", IndexOptions(embedder="minilm"))
    info = CollectionService(ctx).get("c")
    assert list(info.embedders) == ["minilm-notes"]
    hits = SearchService(ctx).search(SearchRequest("bank card", "c", mode="dense"))
    assert hits.embedder == "minilm-notes" and hits.results


def test_a_default_embedder_given_as_a_checkpoint_path_is_what_searches_and_listings_use(
        make_ctx, tmp_path, notes_embedder):
    """FACET_DEFAULT_EMBEDDER written as a checkpoint's path picked that vector for indexing,
    and searches, the UI and listings went on with the collection's first embedder."""
    src = tmp_path / "src"
    write_corpus(src, 3)
    service = IndexService(make_ctx())
    service.index(src, "c")  # minilm first
    service.index(src, "c", IndexOptions(embedder=notes_embedder))
    ctx = make_ctx(default_embedder=notes_embedder)
    hits = SearchService(ctx).search(SearchRequest("bank card", "c", mode="dense"))
    assert hits.embedder == "minilm-notes" and hits.note is None
    info = CollectionService(ctx).get("c")
    assert info.default_embedder == "minilm-notes"
    assert info.embedders_label() == f"minilm (384-d), minilm-notes (384-d, default, from {notes_embedder})"


def test_a_default_naming_a_vector_by_the_name_it_loads_as_is_read_as_dash_e_reads_it(
        make_ctx, tmp_path, notes_embedder):
    """FACET_DEFAULT_EMBEDDER naming a collection's embedder another way than the collection
    recorded (a copy of its checkpoint: the same name; a spec with options) was compared as a
    string: searches and listings went to the first embedder, and an index run naming none
    added the other. `-e` with the same value reached that vector."""
    import shutil

    src = tmp_path / "src"
    write_corpus(src, 3)
    first = make_ctx()
    service = IndexService(first)
    service.index(src, "c", IndexOptions(embedder=notes_embedder))  # minilm-notes first
    service.index(src, "c", IndexOptions(embedder="minilm"))  # then minilm
    first.close()
    copy = str(shutil.copytree(notes_embedder, tmp_path / "notes-copy"))
    ctx = make_ctx(default_embedder=copy)
    hits = SearchService(ctx).search(SearchRequest("bank card", "c", mode="dense"))
    assert (hits.embedder, hits.embedder_spec) == ("minilm-notes", copy)
    assert CollectionService(ctx).get("c").default_embedder == "minilm-notes"
    ctx.close()
    # A spec with options the collection did not record: that vector, read at those options.
    ctx = make_ctx(default_embedder="minilm[instruction_weight=1]")
    hits = SearchService(ctx).search(SearchRequest("bank card", "c", mode="dense",
                                                   instruction="Find the intent"))
    assert (hits.embedder, hits.embedder_spec) == ("minilm", "minilm[instruction_weight=1]")
    assert hits.note is None  # (read in full: no "barely steers")
    assert CollectionService(ctx).get("c").default_embedder == "minilm"
    rerun = IndexService(ctx).index(src, "c")
    assert rerun.docs_indexed == 0 and sorted(CollectionService(ctx).get("c").embedders) == [
        "minilm", "minilm-notes"]
    ctx.close()
    # Another checkpoint of that name, which embeds differently: refused, and the advice is not
    # "or name none" (what was done).
    other = tmp_path / "notes-other"
    shutil.copytree(notes_embedder, other)
    config = json.loads((other / "facet_config.json").read_text())
    config["prompts"]["document"] = "other: {instruction}{text}"
    (other / "facet_config.json").write_text(json.dumps(config))
    ctx = make_ctx(default_embedder=str(other))
    with pytest.raises(ConflictError) as refused:
        SearchService(ctx).search(SearchRequest("bank card", "c", mode="dense"))
    assert "search with the embedder 'minilm-notes', or set FACET_DEFAULT_EMBEDDER to it" \
        in str(refused.value), refused.value
    assert "name none" not in str(refused.value)


def test_a_half_filled_default_does_not_take_over_searches_and_a_plain_rerun_says_so(
        make_ctx, tmp_path, notes_embedder):
    """An embedder added part-way (its job stopped, or given one file of the source) took over
    every search naming none from its first batch, the others' documents unfound; a plain
    re-run then said "completed, 6 unchanged", nothing of the other's 5 missing documents."""
    src = tmp_path / "src"
    files = sorted(write_corpus(src, 6))
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(src, "c", IndexOptions(embedder=notes_embedder))  # complete
    service.index(Path(files[0]), "c", IndexOptions(embedder="minilm"))  # the default: 1 of 6
    info = CollectionService(ctx).get("c")
    assert info.vectors_missing == {"minilm": 5}
    hits = SearchService(ctx).search(SearchRequest("bank card", "c", top_k=10, mode="dense"))
    assert hits.embedder == "minilm-notes"
    assert len({r.doc_id for r in hits.results}) == 6
    assert hits.note == ("searched with 'minilm-notes', which has vectors of every document: 'minilm' "
                         "(the default) has none yet for 5 of them; name --embedder minilm (the API's "
                         "\"embedder\") to search with it")
    assert CollectionService(ctx).get("c").default_embedder == "minilm-notes"
    # A threshold that drops every result is what to check, not the collection: with the
    # embedder's choice first in the note, every edge said "the collection holds nothing
    # searchable" (``why_no_results`` reads the note's start).
    above = SearchService(ctx).search(SearchRequest("bank card", "c", mode="dense", score_threshold=0.99))
    assert above.results == [] and above.note is not None
    assert above.note.startswith("no result scored 0.99 or more (score_threshold); the best scored ")
    assert above.note.endswith(hits.note)
    assert why_no_results(above, None) == above.note
    # Named, it is searched, and the note says what it misses, as before.
    named = SearchService(ctx).search(SearchRequest("bank card", "c", mode="dense", embedder="minilm"))
    assert named.embedder == "minilm" and named.note is not None and named.note.startswith(
        "5 of the 6 documents have no 'minilm' vectors yet")

    # The other way round: a plain re-run with the complete one names the incomplete one.
    other = tmp_path / "other"
    files = sorted(write_corpus(other, 4))
    service.index(other, "d")  # minilm
    service.index(Path(files[0]), "d", IndexOptions(embedder=notes_embedder))
    again = service.index(other, "d")
    assert (again.state, again.docs_skipped) == ("completed", 4)
    assert [m for _, m in again.warnings] == [
        f"embedder 'minilm-notes' of collection 'd' still has no vectors for 3 of the 4 documents "
        f"(a job adding it stopped part-way or read other sources, or a run could not load it), "
        "so searches with it cannot find them: `facet index "
        f"{other} -c d -e {notes_embedder}` (with each of their sources) fills them in"]


def test_two_checkpoints_of_one_method_are_told_to_rename_one_and_then_share_the_collection(
        make_ctx, tmp_path, minilm):
    """A second checkpoint of a method (its vectors named after the method, as the first's) was
    refused with "index into a new collection" only; another "name" in its facet_config.json
    makes it an embedder of its own in the same collection."""
    first, second = (EncoderMeanEmbedder(name="minilm", backbone=minilm.backbone, prompts=PromptConfig(
        document=f"{prefix}: {{instruction}}{{text}}")).save(tmp_path / prefix) for prefix in ("one", "two"))
    src = tmp_path / "src"
    write_corpus(src, 2)
    service = IndexService(make_ctx())
    service.index(src, "c", IndexOptions(embedder=str(first)))
    with pytest.raises(ConflictError) as refused:
        service.index(src, "c", IndexOptions(embedder=str(second)))
    config = Path(second) / "facet_config.json"
    assert str(refused.value).endswith(
        f"else index into a new collection; or, to keep both in this collection as two embedders, "
        f"give the new checkpoint another name: set \"name\" in {config} (say \"minilm-2\"), then "
        f"index with --embedder {second} again (searches pick one with --embedder)")
    saved = json.loads(config.read_text())
    saved["name"] = "minilm-2"
    config.write_text(json.dumps(saved))
    cache = EmbedderCache("cpu")  # (a new process: the one above keeps what it loaded)
    cache.put("minilm", minilm)
    ctx = ServiceContext(service.ctx.settings, embedders=cache)
    try:
        IndexService(ctx).index(src, "c", IndexOptions(embedder=str(second)))
        info = CollectionService(ctx).get("c")
    finally:
        ctx.close()
    assert list(info.embedders) == ["minilm", "minilm-2"] and info.vectors_missing == {}
    assert re.search(r"^minilm \(384-d, default, from .*one\), minilm-2 \(384-d, from ", info.embedders_label())

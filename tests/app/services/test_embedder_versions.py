"""A collection remembers which version of each embedder wrote it (``Embedder.identity``).

A retrained checkpoint keeps its registered name, and so does a changed served option
(``max_length``); their vectors are not comparable with the old ones. Indexing more into such
a collection, or searching it, must refuse and say why, rather than mix two models' vectors.
Here a "new version" is MiniLM itself served at another ``max_length``, or reading its
instruction through another prompt format (same name, same backbone, different identity): a real
model, no mock. A different ``max_length`` alone only matters for documents: searching with it
is allowed, indexing is not.
"""

from __future__ import annotations

import json
import re

import pytest

from app.errors import ConflictError
from app.services.collections import CollectionService
from app.services.context import EmbedderCache, ServiceContext
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from app.settings import FacetSettings
from embedders.baselines import EncoderMeanEmbedder
from embedders.contract import PromptConfig
from indexer import metadata as md


@pytest.fixture
def records(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(
        ["My card was declined at the supermarket", "How do I top up with a bank transfer?",
         "The exchange rate you applied was wrong"])))
    return path


def context(tmp_path, model) -> ServiceContext:
    cache = EmbedderCache("cpu")
    cache.put("minilm", model)
    return ServiceContext(FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8),
                          embedders=cache)


def test_a_changed_embedder_cannot_add_to_or_search_a_collection_it_did_not_write(tmp_path, records, minilm):
    first = context(tmp_path, minilm)
    try:
        IndexService(first).index(records, "support")
        assert SearchService(first).search(SearchRequest("card", "support")).results
    finally:
        first.close()

    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"_id": "r9", "text": "Please block my lost card"}) + "\n")
    budget = EncoderMeanEmbedder(name="minilm", max_length=32, backbone=minilm.backbone)
    assert budget.name == minilm.name and budget.identity != minilm.identity
    later = context(tmp_path, budget)
    try:
        with pytest.raises(ConflictError, match=r"different version of .*max_length.*facet delete support"):
            IndexService(later).index(more, "support")
        # A short query reads the same at either budget: the search goes ahead.
        assert SearchService(later).search(SearchRequest("card", "support")).results
    finally:
        later.close()

    prompt = EncoderMeanEmbedder(name="minilm", backbone=minilm.backbone,
                                 prompts=PromptConfig(instruction_format="Task: {instruction} | "))
    assert prompt.name == minilm.name and prompt.identity != minilm.identity
    later = context(tmp_path, prompt)
    try:
        with pytest.raises(ConflictError, match=r"different version of .*prompts"):
            IndexService(later).index(more, "support")
        with pytest.raises(ConflictError, match=r"indexed by a different version of 'minilm' \(prompts"):
            SearchService(later).search(SearchRequest("card", "support"))
        with later.sessions() as session:  # nothing was written: no new job, no document
            coll = md.get_collection(session, "support")
            assert coll is not None and len(md.list_jobs(session, coll.id)) == 1
            assert md.count_documents(session, coll.id) == 3
    finally:
        later.close()

    # The version that wrote it still indexes and searches.
    again = context(tmp_path, minilm)
    try:
        IndexService(again).index(more, "support")
        assert SearchService(again).search(SearchRequest("lost card", "support")).results[0].doc_id == "r9"
    finally:
        again.close()


def test_a_job_queued_before_the_model_changed_is_refused_when_it_runs(tmp_path, records, minilm):
    """The check is made again where the job runs (a background thread, another process, a
    worker that loads the model later), not only when it was queued: here the job is prepared
    against MiniLM and run by a context that serves it at another budget."""
    first = context(tmp_path, minilm)
    try:
        IndexService(first).index(records, "support")
        more = tmp_path / "more.jsonl"
        more.write_text(json.dumps({"_id": "r9", "text": "Please block my lost card"}) + "\n")
        queued = IndexService(first).prepare(more, "support", runner="process")
    finally:
        first.close()

    later = context(tmp_path, EncoderMeanEmbedder(name="minilm", max_length=32, backbone=minilm.backbone))
    try:
        with pytest.raises(ConflictError, match=r"different version of .*max_length"):
            IndexService(later).run(queued)
        with later.sessions() as session:
            job = md.get_job(session, queued.job_id)
            assert job is not None and job.state == "failed" and "max_length" in (job.message or "")
            assert md.count_documents(session, job.collection_id) == 3  # r9 was not written
        assert later.store.count(queued.collection) == 3
    finally:
        later.close()


def test_a_worker_with_another_copy_of_the_checkpoint_fails_its_chunks_writing_nothing(
        tmp_path, records, minilm):
    """Celery's path: the planner and each chunk check the model of the worker that runs them."""
    from app.services.distributed import ChunkedIndexService

    first = context(tmp_path, minilm)
    try:
        queued = IndexService(first).prepare(records, "support", runner="celery")
        service = ChunkedIndexService(first)
        numbers = service.plan(queued, chunk_docs=2)
        assert numbers == [0, 1]
        assert service.run_chunk(queued.job_id, 0).outcome == "done"
        again = IndexService(first).prepare(records, "support", runner="celery")  # queued behind it
    finally:
        first.close()

    other = context(tmp_path, EncoderMeanEmbedder(name="minilm", max_length=32, backbone=minilm.backbone))
    try:
        outcome = ChunkedIndexService(other).run_chunk(queued.job_id, 1)
        # It names the worker's copy, not the collection (deleting it, or indexing into a new
        # one, as the message told, failed the same way).
        assert outcome.outcome == "failed" and re.search(
            r"worker \S+:\d+ loads 'minilm' as a different version of 'minilm' than the one collection "
            r"'support' records \(max_length differ\).*give every worker the same checkpoint files",
            outcome.message or ""), outcome.message
        assert "facet delete" not in (outcome.message or "")
        assert outcome.finished_job
        with other.sessions() as session:
            job = md.get_job(session, queued.job_id)
            assert job is not None and job.docs_indexed == 2 and job.docs_failed == 1
        assert other.store.count("support") == 2  # only the first worker's chunk
        # A planner on such a worker refuses the next job before planning it.
        with pytest.raises(ConflictError, match=r"max_length"):
            ChunkedIndexService(other).plan(again)
        with other.sessions() as session:
            assert md.get_job(session, again.job_id).state == "failed"
    finally:
        other.close()


def test_a_request_option_that_changes_the_vectors_is_refused_one_that_does_not_is_served(tmp_path, records):
    """A search may name the collection's embedder with options. GIRCSE with 2 soft tokens is not
    the GIRCSE (5) that wrote the vectors: refused, saying which option and what to do; its KV
    cache off computes the same vectors (``use_cache`` is comparable across): served, same scores."""
    ctx = ServiceContext(FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8),
                         embedders=EmbedderCache("cpu"))
    try:
        IndexService(ctx).index(records, "support", IndexOptions(embedder="gircse"))
        service = SearchService(ctx)
        plain = service.search(SearchRequest("card", "support", mode="dense"))
        with pytest.raises(ConflictError, match=r"'gircse\[soft_tokens=2\]' embeds differently from 'gircse', "
                                                r"which wrote .*soft_tokens.*search with the embedder"):
            service.search(SearchRequest("card", "support", embedder="gircse[soft_tokens=2]", mode="dense"))
        uncached = service.search(SearchRequest("card", "support", embedder="gircse[use_cache=false]",
                                                mode="dense"))
        assert [r.doc_id for r in uncached.results] == [r.doc_id for r in plain.results]
        assert [r.score for r in uncached.results] == pytest.approx([r.score for r in plain.results], abs=1e-3)
    finally:
        ctx.close()


def test_a_collection_indexed_from_a_checkpoint_directory_is_searched_with_it(tmp_path, records, minilm,
                                                                               minilm_namesake, monkeypatch):
    """A checkpoint directory carries its method's name ("minilm" here; a ``facet train`` or
    ``facet soup`` output is named like the registered checkpoint). The collection records the
    directory, made absolute, so a search that names no embedder, or names the vector, loads it
    from any working directory, not the registered model of that name (it did: the search was
    refused as "a different version" of its own checkpoint)."""
    directory, own = minilm_namesake
    monkeypatch.chdir(directory.parent)
    ctx = context(tmp_path, minilm)  # the registered minilm is loaded in this process too
    try:
        IndexService(ctx).index(records, "support", IndexOptions(embedder=directory.name))  # a relative path
        info = CollectionService(ctx).get("support")
        assert info.sources == {"minilm": str(directory)}
        assert info.embedders_label() == f"minilm (384-d, from {directory})"
        (tmp_path / "elsewhere").mkdir()
        monkeypatch.chdir(tmp_path / "elsewhere")
        service = SearchService(ctx)
        instruction = "Find messages about money transfers"
        for named in (None, "minilm"):
            response = service.search(SearchRequest("top up", "support", instruction=instruction, top_k=3,
                                                    embedder=named, mode="dense"))
            texts = [r.text for r in response.results]
            want = own.encode(texts, role="document") @ own.encode(
                ["top up"], role="query", instruction=instruction)[0]
            assert [r.score for r in response.results] == pytest.approx(list(want), abs=1e-4), named
        other = minilm.encode(["top up"], role="query", instruction=instruction)[0]
        assert float(other @ own.encode(["top up"], role="query", instruction=instruction)[0]) < 0.999
        # Indexing with the registered name is refused (another model), naming the directory to
        # index with: it said "changed since it was indexed ... delete this one".
        with pytest.raises(ConflictError) as refused:
            IndexService(ctx).index(records, "support", IndexOptions(embedder="minilm"))
        assert str(refused.value).startswith(
            f"collection 'support' holds 'minilm' vectors written by '{directory}', and 'minilm' loads "
            "another model of that name (prompts differ): to add to them, index with --embedder "
            f"{directory} (the API's embedder field)")
    finally:
        ctx.close()


def test_a_recorded_checkpoint_that_is_gone_is_named_in_the_error(tmp_path, records, minilm, minilm_namesake):
    """The directory a collection was indexed from was moved away: the search says which one it
    needs, rather than "unknown embedder" for a path the user never typed into the search."""
    import shutil

    from app.errors import UnknownModelError

    first = context(tmp_path, minilm)
    try:
        IndexService(first).index(records, "support", IndexOptions(embedder=str(minilm_namesake[0])))
    finally:
        first.close()
    shutil.rmtree(minilm_namesake[0])
    later = context(tmp_path, minilm)  # a new process: nothing loaded from the directory
    try:
        with pytest.raises(UnknownModelError, match=r"the 'minilm' vectors of collection 'support' were written "
                                                    r"by '.*namesake', which cannot be loaded now .*search "
                                                    r"with an embedder naming a copy"):
            SearchService(later).search(SearchRequest("card", "support", mode="dense"))
    finally:
        later.close()


def test_a_collection_indexed_with_options_before_they_were_recorded_is_told_which(tmp_path, records):
    """A collection indexed with ``gircse[soft_tokens=4]`` by a Facet that recorded the identity
    but not the spec (``source`` NULL, as migration 0003 left such rows) is searched with plain
    ``gircse``: refused, naming the spec that reads it (the same weights), not "delete it and
    index them again"; that spec searches it, and one `facet index` with it records it."""
    from sqlalchemy import update

    ctx = ServiceContext(FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8),
                         embedders=EmbedderCache("cpu"))
    try:
        IndexService(ctx).index(records, "support", IndexOptions(embedder="gircse[soft_tokens=4]"))
        with ctx.sessions() as session:
            session.execute(update(md.CollectionEmbedder).values(source=None))
            session.commit()
        service = SearchService(ctx)
        with pytest.raises(ConflictError) as refused:
            service.search(SearchRequest("card", "support", mode="dense"))
        message = str(refused.value)
        assert re.search(r"indexed by 'gircse\[soft_tokens=4\]'.*soft_tokens differ.*--embedder "
                         r"'gircse\[soft_tokens=4\]'.*`facet index`", message), message
        assert "delete" not in message and "new collection" not in message
        named = service.search(SearchRequest("card", "support", embedder="gircse[soft_tokens=4]", mode="dense"))
        assert named.results

        IndexService(ctx).index(records, "support", IndexOptions(embedder="gircse[soft_tokens=4]"))
        assert CollectionService(ctx).get("support").sources == {"gircse": "gircse[soft_tokens=4]"}
        plain = SearchService(ctx).search(SearchRequest("card", "support", mode="dense"))
        assert [r.doc_id for r in plain.results] == [r.doc_id for r in named.results]
    finally:
        ctx.close()


def test_a_companion_left_out_is_filled_in_even_after_the_content_came_back(tmp_path, minilm):
    """A collection of two embedders; the second's checkpoint is away while a file is edited
    (its vectors of that file are left out, with a warning) and edited back. Its hash still
    named the original content, so when the checkpoint came back its run read the file as
    "unchanged" and the vector stayed missing for good (searches with it never found the file).
    Each step is a new process's context (its own embedder cache)."""
    import shutil

    notes = tmp_path / "notes"
    EncoderMeanEmbedder(name="minilm-notes", backbone=minilm.backbone,
                        prompts=PromptConfig(document="note: {instruction}{text}")).save(notes)
    src = tmp_path / "src"
    src.mkdir()
    (src / "volcano.txt").write_text("Lava flows from the volcano.")
    (src / "cats.txt").write_text("Cats sleep most of the day.")
    log = " ".join(f"line {i} of the volcano log, lava measured." for i in range(120))
    (src / "log.txt").write_text(log)  # over stream_document_mb: read in a stream
    settings = FacetSettings(data_dir=tmp_path / "data", stream_document_mb=0.004)

    def run(options=None):
        cache = EmbedderCache("cpu")
        cache.put("minilm", minilm)
        ctx = ServiceContext(settings, embedders=cache)
        try:
            return IndexService(ctx).index(src, "c", options), CollectionService(ctx).get("c")
        finally:
            ctx.close()

    run()
    assert run(IndexOptions(embedder=str(notes)))[1].vectors_missing == {}
    shutil.move(notes, tmp_path / "away")
    (src / "volcano.txt").write_text("Lava flows from the volcano. It erupted twice.")
    (src / "log.txt").write_text(log + " The end.")
    edited, info = run()
    assert [k for k, _ in edited.warnings] == ["embedder minilm-notes"]
    # The listing says which vectors are missing (it showed both embedders as if complete).
    assert info.vectors_missing == {"minilm-notes": 2}
    assert info.embedders_label() == (f"minilm (384-d, default), minilm-notes (384-d, from {notes}; "
                                      "no vectors for 2 of the 3 documents)")
    (src / "volcano.txt").write_text("Lava flows from the volcano.")
    (src / "log.txt").write_text(log)
    assert run()[0].docs_indexed == 2
    shutil.move(tmp_path / "away", notes)
    ctx = ServiceContext(settings, embedders=EmbedderCache("cpu"))
    try:
        # A search with the embedder that lacks them says so (it returned the others as all).
        hits = SearchService(ctx).search(SearchRequest("volcano lava", "c", top_k=50, mode="dense",
                                                       embedder=str(notes)))
        assert {r.doc_id for r in hits.results} == {str(src / "cats.txt")}
        assert hits.note == (f"2 of the 3 documents have no 'minilm-notes' vectors yet, so this search "
                             f"cannot find them: `facet index` of their sources with --embedder {notes} "
                             "(the API's POST /jobs) fills them in")
    finally:
        ctx.close()

    filled, info = run(IndexOptions(embedder=str(notes)))

    assert (filled.docs_indexed, filled.docs_skipped) == (2, 1)
    assert info.vectors_missing == {}
    ctx = ServiceContext(settings, embedders=EmbedderCache("cpu"))
    try:
        hits = SearchService(ctx).search(SearchRequest("volcano lava", "c", top_k=50, mode="dense",
                                                       embedder=str(notes)))
        assert {r.doc_id for r in hits.results} == {str(src / n) for n in ("cats.txt", "log.txt", "volcano.txt")}
        assert hits.note is None
    finally:
        ctx.close()


def test_a_collection_indexed_before_an_option_existed_is_told_the_spec_that_reads_it(
        tmp_path, records, tiny_inbedder_dir):
    """InstEmb's checkpoint now serves ``text_quotes=drop``, an option its collections indexed
    earlier do not record (they read ``keep``, its default). A search loading the checkpoint as
    it is now is refused, as the vectors differ for a quoted text, but the message named no way
    on ("delete it and index them again"); it names the spec that reads as the collection was
    indexed, which searches it."""
    import shutil

    from sqlalchemy import select, update

    checkpoint = tmp_path / "ckpt"
    shutil.copytree(tiny_inbedder_dir, checkpoint)
    settings = FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8)
    first = ServiceContext(settings, embedders=EmbedderCache("cpu"))
    try:
        IndexService(first).index(records, "support", IndexOptions(embedder=str(checkpoint)))
        with first.sessions() as session:  # recorded as a Facet before the option did
            row = session.scalars(select(md.CollectionEmbedder)).one()
            identity = json.loads(row.identity)
            assert identity["config"].pop("text_quotes") == "keep"
            session.execute(update(md.CollectionEmbedder).values(identity=json.dumps(identity, sort_keys=True)))
            session.commit()
    finally:
        first.close()
    config_file = checkpoint / "facet_config.json"
    saved = json.loads(config_file.read_text())
    saved["config"]["text_quotes"] = "drop"
    config_file.write_text(json.dumps(saved))
    later = ServiceContext(settings, embedders=EmbedderCache("cpu"))  # a new process
    try:
        service = SearchService(later)
        with pytest.raises(ConflictError) as refused:
            service.search(SearchRequest("card", "support", mode="dense"))
        message = str(refused.value)
        spec = f"{checkpoint}[text_quotes=keep]"
        assert message.startswith(
            f"collection 'support' was indexed by '{checkpoint}' before its option text_quotes "
            f"existed, so as '{spec}' reads it; this search loads '{checkpoint}', which now sets it "
            f"otherwise (text_quotes differ); search it with --embedder '{spec}'"), message
        assert "new collection to read them as it does now" in message and "delete" not in message
        assert "FACET_API_MODELS lists it" in message and "--search-embedder" in message
        # Naming the new reading outright is refused too, and names the same spec (it said
        # "search with the embedder 'inbedder' (or name none)", refused as well).
        with pytest.raises(ConflictError, match=re.escape(f"search with the embedder '{spec}', which reads "
                                                          "as they were made")):
            service.search(SearchRequest("card", "support", embedder=f"{checkpoint}[text_quotes=drop]",
                                         mode="dense"))
        assert service.search(SearchRequest("card", "support", embedder=spec, mode="dense")).results
        # Adding to it names the same spec; indexing with it records it, and a search naming no
        # embedder then loads it.
        more = records.with_name("more.jsonl")
        more.write_text(json.dumps({"_id": "r9", "text": 'My "virtual" card was blocked'}) + "\n")
        with pytest.raises(ConflictError, match=re.escape(f"Index with --embedder '{spec}' (the API's "
                                                          "embedder field), which reads as they were made")):
            IndexService(later).index(more, "support", IndexOptions(embedder=str(checkpoint)))
        IndexService(later).index(more, "support", IndexOptions(embedder=spec))
        assert service.search(SearchRequest("card", "support", mode="dense")).results
    finally:
        later.close()

"""Two processes on one data folder (as a `facet serve` and the CLI beside it), simulated by two
service contexts over the same folder; a holder of a collection's shard by a real process.

1. A server kept a deleted collection's embedder spec after another process created it again
   under the same name with another spec (same vector name and size: the store never
   disagreed), and searched it with the old one: wrong scores, no warning, until a restart.
2. A background submission (`facet index --background`, POST /jobs) of a collection another
   process held open was accepted (exit 0, 202) and failed seconds later; a foreground run is
   refused at once.
Real minilm, edge store, SQLite; nothing is mocked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core import Facet
from app.errors import ConflictError
from app.services.collections import CollectionService
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService

from .conftest import locked_by_another_process, write_corpus

NEW_SPEC = "minilm[instruction_weight=0.5]"
TEXTS = ["my card was declined at the shop", "how do I top up with apple pay",
         "the exchange rate was wrong", "my transfer has not arrived"]


def _records(path: Path) -> Path:
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    return path


def test_a_collection_recreated_by_another_process_is_searched_with_its_new_spec(make_ctx, tmp_path) -> None:
    source = _records(tmp_path / "records.jsonl")
    server, other = make_ctx(), make_ctx()  # one data folder, as two processes
    IndexService(other).index(source, "s1")
    other.store.release("s1")
    request = SearchRequest("card declined", "s1", instruction="find fraud", top_k=2)
    searching = SearchService(server)
    assert searching.search(request).embedder_spec == "minilm"
    server.store.release("s1")  # let go (or its search was refused): the CLI may now write
    CollectionService(other).delete("s1")
    IndexService(other).index(source, "s1", IndexOptions(embedder=NEW_SPEC))
    other.store.release("s1")

    after = searching.search(request)
    server.store.release("s1")
    fresh = SearchService(make_ctx()).search(request)
    assert fresh.embedder_spec == NEW_SPEC
    assert after.embedder_spec == NEW_SPEC
    assert [r.doc_id for r in after.results] == [r.doc_id for r in fresh.results]
    assert [r.score for r in after.results] == pytest.approx([r.score for r in fresh.results], abs=1e-5)


def test_a_background_submission_of_a_collection_another_process_holds_is_refused(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    write_corpus(tmp_path / "more", 3)
    ctx = make_ctx(store_wait_s=0.2)
    IndexService(ctx).index(tmp_path / "src", "c")
    ctx.store.release("c")
    facet = Facet(context=ctx)
    try:
        with locked_by_another_process(ctx.settings.data_dir, "c", opened=True,
                                       shown_as="facet serve") as holder:
            # A job for the workers (`facet index --background` in the full stack) too: it was
            # queued, sat "running" with nothing said, and failed three minutes later.
            for submit in (lambda: IndexService(ctx).prepare(tmp_path / "more", "c", runner="process"),
                           lambda: IndexService(ctx).prepare(tmp_path / "more", "c", runner="celery"),
                           lambda: facet.submit_index(tmp_path / "more", "c")):
                with pytest.raises(ConflictError, match=f"collection 'c' is open in pid {holder.pid}"):
                    submit()
            assert len(facet.jobs("c")) == 1  # nothing queued to fail later
        # This process holding it (a server running its own queue) is no reason to refuse.
        assert SearchService(ctx).search(SearchRequest("bank card", "c", mode="dense")).results
        job = facet.submit_index(tmp_path / "more", "c")
        assert facet.job_runner.join(timeout=120)
        assert facet.job(job.id).state == "completed", facet.job(job.id)
    finally:
        facet.close()


def test_a_search_during_this_process_own_job_that_finds_nothing_says_why(make_ctx, tmp_path) -> None:
    """A server's search of a collection its own job was still writing (the first batch)
    returned no results and a null note, though the collection listing showed the writer."""
    from app.services.indexing import IndexService, Progress
    from app.services.search import SearchRequest, SearchService

    from .conftest import write_corpus

    write_corpus(tmp_path / "src", 40)  # more chunks than one encode: its pieces are told
    ctx = make_ctx()
    seen: list = []

    def during(progress: Progress) -> None:
        if not seen and progress.chunks_written == 0 and (progress.stage or "").startswith("encoding"):
            seen.append(SearchService(ctx).search(SearchRequest("ferry", "docs", mode="lexical")))

    report = IndexService(ctx).index(tmp_path / "src", "docs", progress=during)
    assert seen, "no progress before the first write"
    assert seen[0].results == []
    assert seen[0].note == (f"collection 'docs' is being indexed (job {report.job_id}): a search "
                            "finds only what it has written so far")
    # Once it ended: a search that finds nothing says nothing of a job, only why nothing was
    # found (a word search's note, since 2026-12-01, for the API and LangChain too).
    after = SearchService(ctx).search(SearchRequest("zzzqqq", "docs", mode="lexical"))
    assert after.results == [] and after.note == "no indexed word of the query is in it"


def test_a_clustering_of_a_collection_its_job_is_writing_says_why_it_has_too_few(make_ctx,
                                                                               tmp_path) -> None:
    """The UI's Cluster tab, picking the collection its Index tab's job was writing, said only
    "clustering needs at least 2 texts, got 0" (the UI exploration of the fourth session of
    2026-12-07); a search said the job, and the API only that nothing was indexed. Said in the
    core now, for every edge, with ``param`` the collection."""
    from app.errors import InvalidRequestError
    from app.services.clustering import ClusterRequest, ClusterService
    from app.services.indexing import IndexService, Progress

    from .conftest import write_corpus

    write_corpus(tmp_path / "src", 40)
    ctx = make_ctx()
    refused: list[InvalidRequestError] = []

    def during(progress: Progress) -> None:
        if not refused and progress.chunks_written == 0 and (progress.stage or "").startswith("encoding"):
            with pytest.raises(InvalidRequestError) as e:
                ClusterService(ctx).cluster(ClusterRequest("topic", collection="docs"))
            refused.append(e.value)

    report = IndexService(ctx).index(tmp_path / "src", "docs", progress=during)
    assert refused, "no progress before the first write"
    assert str(refused[0]) == (f"clustering needs at least 2 texts, got 0: collection 'docs' is "
                               f"being indexed (job {report.job_id}): a clustering reads only what "
                               "it has written so far")
    assert refused[0].param == "collection"


def test_documents_failed_in_the_batch_being_encoded_are_counted_with_their_errors(make_ctx,
                                                                                   tmp_path) -> None:
    """The job row's errors went out with the encoding step's commit, its counts only with the
    batch's end: the UI's bar read "0/13 documents seen, 0 failed" for minutes above an errors
    table listing the empty and the binary file (the UI exploration of the fourth session of
    2026-12-07)."""
    from app.services.collections import CollectionService
    from app.services.indexing import IndexService, Progress

    from .conftest import write_corpus

    write_corpus(tmp_path / "src", 40)  # more chunks than one encode: its pieces are told
    (tmp_path / "src" / "a-empty.txt").write_text("")
    (tmp_path / "src" / "b-binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    ctx = make_ctx()
    during: list = []

    def read_row(progress: Progress) -> None:
        if not during and (progress.stage or "").startswith("encoding"):
            [job] = CollectionService(ctx).jobs("docs")  # what the API and the UI read
            during.append(CollectionService(ctx).job(job.id))

    report = IndexService(ctx).index(tmp_path / "src", "docs", progress=read_row)
    assert during, "no encoding step"
    job = during[0]
    assert job.state == "running" and job.docs_indexed == 0, job
    assert sorted(e["document"].rsplit("/", 1)[-1] for e in job.errors) == ["a-empty.txt", "b-binary.txt"]
    assert (job.docs_failed, job.docs_seen) == (2, 2), job
    assert (report.docs_failed, report.docs_indexed, report.docs_seen) == (2, 40, 42)


def test_a_job_cancelled_at_its_first_encoding_step_counts_the_failed_documents_it_listed(
        make_ctx, tmp_path, monkeypatch) -> None:
    """The batch's errors go out with step 1's commit, before any encoding step: a cancel taken
    at the first one rolled back and left "0 failed" beside two listed errors for good (the
    verification round of the fourth session of 2026-12-07)."""
    import sys

    from app.services.collections import CollectionService
    from app.services.indexing import IndexService

    from .conftest import write_corpus

    write_corpus(tmp_path / "src", 40)
    (tmp_path / "src" / "a-empty.txt").write_text("")
    (tmp_path / "src" / "b-binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    ctx = make_ctx()
    asked = IndexService._cancel_asked

    def at_encoding(self: IndexService, job_id: int) -> bool:  # a cancel asked then, not before
        return sys._getframe(1).f_code.co_name == "encoding" or asked(self, job_id)

    monkeypatch.setattr(IndexService, "_cancel_asked", at_encoding)
    report = IndexService(ctx).index(tmp_path / "src", "docs")
    job = CollectionService(ctx).job(report.job_id)
    assert (job.state, job.docs_indexed) == ("cancelled", 0), job
    assert sorted(e["document"].rsplit("/", 1)[-1] for e in job.errors) == ["a-empty.txt", "b-binary.txt"]
    assert (job.docs_failed, job.docs_seen) == (2, 2), job


def test_a_job_beside_a_background_job_still_starting_is_refused(make_ctx, tmp_path) -> None:
    """Two `facet index --background` into one collection at once both answered "queued"
    (exit 0): the second's detached process met the first's and failed "never started". A job
    queued by `--background` whose process is alive but holds no lease yet is a writer about to
    start: refused as one (the multi-process exploration of the fourth session of 2026-12-07).
    A real live process stands for the detached `facet run-job`."""
    import subprocess
    import sys

    from app.services.indexing import IndexService
    from indexer import metadata as md

    from .conftest import write_corpus

    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx()
    first = IndexService(ctx).prepare(tmp_path / "src", "z", runner="process")
    starting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with ctx.sessions() as session:
            md.get_job(session, first.job_id).pid = starting.pid
            session.commit()
        for runner in ("process", "inline", "thread"):
            with pytest.raises(ConflictError, match=rf"collection 'z' has job {first.job_id} queued by "
                                                    rf"`facet index --background` \(pid {starting.pid}\)"):
                IndexService(ctx).prepare(tmp_path / "src", "z", runner=runner)
        # Queued over a minute ago, its pid alive (another process's now, the job's killed
        # before it ran): no writer starting, nothing held for good (the verification round).
        import datetime

        with ctx.sessions() as session:
            md.get_job(session, first.job_id).queued_at = md.utcnow() - datetime.timedelta(minutes=2)
            session.commit()
        later = IndexService(ctx).prepare(tmp_path / "src", "z", runner="thread")
        assert later.job_id != first.job_id
        IndexService(ctx).abandon_queued(later.job_id)
    finally:
        starting.kill()
        starting.wait()
    # Its process gone (killed before it ran): no writer, the job may be sent again.
    again = IndexService(ctx).prepare(tmp_path / "src", "z", runner="inline")
    assert again.job_id != first.job_id

"""A collection deleted and indexed again under the same name while other clients search it and
another job indexes it (the soak test's delete/re-create race, left open by its verification
round): searches racing it got transient wrong errors that blamed the request, a 400 "keeps no
term vectors" and a 400 "has no vectors from ..." (the old collection's mode and embedder read
against the new one), and a 404 saying the vector store held none of a collection "although job
N completed" (its files lost?) while it was only being deleted; a job racing the delete failed
with SQLAlchemy's StaleDataError, its rows deleted under it although it held the lease.

A search during a delete/re-create answers from the old or the new collection, or says honestly
that the collection is gone or being deleted (a retryable ``BusyError``); a delete that meets a
job which took the collection's lease or queued after its first look is refused, as one that
came after.

Deterministic: each race is run at the point between two steps of one call (a hook on the
path), with real SQLite and the real edge store; the embedders are hashed words (no model).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core import Facet
from app.errors import BusyError, ConflictError, FacetError, NotFoundError
from app.services.search import SearchRequest
from app.settings import FacetSettings
from embedders.registry import register_embedder, unregister_embedder

from .test_instruction_unread import WordHash


class Words(WordHash):
    """Hashed words, ``dim`` wide: one dimension per word (modulo)."""

    def __init__(self, name: str, dim: int) -> None:
        super().__init__(name)
        self.dim = dim

    @property
    def identity(self) -> str:
        return json.dumps({"method": "words", "name": self.name, "dim": self.dim})


@pytest.fixture
def facet(tmp_path: Path) -> Iterator[Facet]:
    """A facade whose default embedder is ``words-a`` (another one: ``words-b``)."""
    register_embedder("words-a", lambda device=None, **kw: Words("words-a", 32), "race test")
    register_embedder("words-b", lambda device=None, **kw: Words("words-b", 24), "race test")
    facet = Facet(FacetSettings(data_dir=tmp_path / "data", default_embedder="words-a",
                                chunk_tokens=64, chunk_overlap=8))
    try:
        yield facet
    finally:
        facet.close()
        for name in ("words-a", "words-b"):
            unregister_embedder(name)


def _source(root: Path, topic: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(3):
        (root / f"{topic}{i}.txt").write_text(f"{topic} note {i}: cats and dogs in the {topic}")
    return root


def _indexed(facet: Facet, tmp_path: Path) -> tuple[Path, Path]:
    """``race`` indexed from an old source; a new source to index it again from."""
    old, new = _source(tmp_path / "old", "garden"), _source(tmp_path / "new", "kitchen")
    facet.index(old, "race")
    return old, new


def _after_lookup(facet: Facet, monkeypatch: pytest.MonkeyPatch, race: Any) -> list[int]:
    """Run ``race()`` once, in the search's own thread, right after it looked the collection's
    name up (its embedders from the metadata) and before its first call into the store."""
    fired: list[int] = []
    looked_up = facet.searching._collection_embedder

    def hooked(request: SearchRequest) -> Any:
        found = looked_up(request)
        if not fired:
            fired.append(1)
            race()
        return found

    monkeypatch.setattr(facet.searching, "_collection_embedder", hooked)
    return fired


def _say(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _honest(error: FacetError) -> None:
    """An error a search racing a delete/re-create may answer: the collection gone (not found)
    or being replaced (busy, retry), saying so; never one that blames the request or the data."""
    assert isinstance(error, NotFoundError | BusyError), _say(error)
    text = str(error)
    assert "term vectors" not in text and "has no vectors from" not in text, text
    assert "holds none of it" not in text and "restored apart" not in text, text
    if isinstance(error, BusyError):
        assert "deleted" in text and "again" in text, text


# ---------------------------------------------------------------- the word search's 400


def test_a_word_search_meeting_a_re_created_collection_answers_from_the_new_one(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deleted after the search looked its name up; created again between the store's look for
    the term vectors' side file (gone with the old collection) and its look for the collection
    (there again): "collection 'race' keeps no term vectors ... indexed before they existed", a
    400, of a collection created a moment before with them."""
    _, new = _indexed(facet, tmp_path)
    store = facet.context.store
    require = store._require
    recreated: list[int] = []

    def hooked_require(collection: str) -> None:
        if not recreated and sys._getframe(1).f_code.co_name == "lexical_version":
            recreated.append(1)
            facet.index(new, "race")
        require(collection)

    monkeypatch.setattr(store, "_require", hooked_require)
    fired = _after_lookup(facet, monkeypatch, lambda: facet.delete_collection("race"))
    try:
        response = facet.search(SearchRequest("kitchen", "race", mode="lexical"))
    except FacetError as e:
        _honest(e)
        raise
    assert fired and recreated
    # The new collection's answer, which holds the word (the old one did not).
    assert response.results and {r.source for r in response.results} <= {str(p) for p in new.iterdir()}


def test_the_edge_store_reads_the_term_vectors_of_a_collection_made_between_its_looks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store alone: its look for the term vectors' side file found none (the collection
    dropped), the collection was made anew with them before its look for the collection, and
    it said the collection kept none."""
    from indexer import lexical as lex
    from indexer.store import EdgeStore

    store = EdgeStore(tmp_path / "edge")
    try:
        store.ensure_collection("c", {"v": 4}, lexical=True)
        store.drop_collection("c")
        require = store._require

        def made_meanwhile(collection: str) -> None:
            monkeypatch.setattr(store, "_require", require)
            store.ensure_collection("c", {"v": 4}, lexical=True)
            require(collection)

        monkeypatch.setattr(store, "_require", made_meanwhile)
        assert store.lexical_version("c") == lex.LEXICAL_VERSION
    finally:
        store.close()


def test_each_drop_and_creation_is_a_new_generation_of_the_name(tmp_path: Path) -> None:
    """What a search compares to tell the collection it looked up from one that replaced it."""
    from indexer.store import EdgeStore

    store = EdgeStore(tmp_path / "edge")
    try:
        seen = [store.generation("c")]
        store.ensure_collection("c", {"v": 4}, lexical=True)
        seen.append(store.generation("c"))
        store.ensure_collection("c", {"v": 4, "w": 2}, lexical=True)  # (the same collection)
        assert store.generation("c") == seen[-1]
        store.drop_collection("c")
        seen.append(store.generation("c"))
        assert not store.drop_collection("c") and store.generation("c") == seen[-1]
        store.ensure_collection("c", {"v": 4}, lexical=True)
        seen.append(store.generation("c"))
        assert seen[0] == 0 and len(set(seen)) == 4, seen
    finally:
        store.close()


# ------------------------------------------------------ the old embedder against the new


def test_a_search_whose_collection_was_re_created_with_another_embedder_is_not_a_400(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deleted and indexed again with another embedder after the search looked it up: the old
    collection's vector name searched in the new one, "collection 'race' has no vectors from
    'words-a' ...: index it with --embedder words-a", a 400 blaming the request (which named
    no embedder)."""
    from app.services.indexing import IndexOptions

    _, new = _indexed(facet, tmp_path)

    def race() -> None:
        facet.delete_collection("race")
        facet.index(new, "race", IndexOptions(embedder="words-b"))

    fired = _after_lookup(facet, monkeypatch, race)
    for mode in ("auto", "dense"):
        fired.clear()
        try:
            response = facet.search(SearchRequest("kitchen", "race", mode=mode))
        except FacetError as e:
            _honest(e)
            raise
        assert fired
        # Answered from the new collection, with its embedder (searched once more, re-read).
        assert response.embedder == "words-b", response
        assert response.results and all("kitchen" in r.text for r in response.results)
        facet.delete_collection("race")
        facet.index(tmp_path / "old", "race")


# ------------------------------------------------------------ the 404 naming a job


class _HeldDelete:
    """``facet.delete_collection("race")`` in a thread of its own, held once it has dropped the
    vectors (``dropped`` set; its rows flushed, not committed) until ``go_on`` is set."""

    def __init__(self, facet: Facet, monkeypatch: pytest.MonkeyPatch) -> None:
        self.dropped, self.go_on = threading.Event(), threading.Event()
        self.outcome: list[BaseException | None] = []
        drop = facet.context.store.drop_collection

        def held_drop(collection: str) -> bool:
            try:
                return drop(collection)
            finally:
                self.dropped.set()
                self.go_on.wait(30)  # (the delete commits after this returns)

        def delete() -> None:
            try:
                facet.delete_collection("race")
                self.outcome.append(None)
            except BaseException as e:  # (said by the tests' assertions)
                self.outcome.append(e)

        monkeypatch.setattr(facet.context.store, "drop_collection", held_drop)
        self.thread = threading.Thread(target=delete)

    def at_the_first_generation_read(self, store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """Started (and its vectors dropped) when the search first reads the name's store
        generation (``store.generation``, hooked), so that the search reads the one after the drop."""
        generation = store.generation

        def hooked_generation(collection: str) -> int:
            if not self.thread.is_alive() and not self.dropped.is_set():  # the first read
                self.start()
            return generation(collection)

        monkeypatch.setattr(store, "generation", hooked_generation)

    def searched_meanwhile(self, facet: Facet) -> FacetError:
        """What a dense search of ``race`` raised, made while this delete runs as the test's
        hooks hold and release it (released at the end, whatever the search did)."""
        try:
            with pytest.raises(FacetError) as raised:
                facet.search(SearchRequest("garden", "race", mode="dense"))
        finally:
            self.finish()
        return raised.value

    def start(self) -> None:
        """Start it and wait until it has dropped the vectors."""
        self.thread.start()
        assert self.dropped.wait(30)

    def finish(self) -> None:
        self.go_on.set()
        if self.thread.is_alive():
            self.thread.join(30)


def test_a_search_during_a_delete_does_not_say_the_vectors_were_lost(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deleted by another thread between the search's read of the collection's row and its look
    into the store, the delete's rows flushed and its vectors dropped but not yet committed:
    "collection 'race' has nothing searchable yet: the vector store holds none of it although
    job 1 completed (its store folder removed, or the metadata restored apart from it?)", a 404
    naming a job that had written, and a data loss that was none."""
    _indexed(facet, tmp_path)
    store = facet.context.store
    exists = store.collection_exists
    deleting = _HeldDelete(facet, monkeypatch)

    def hooked_exists(collection: str) -> bool:
        if not deleting.thread.is_alive() and not deleting.dropped.is_set() and \
                sys._getframe(1).f_code.co_name == "_vector_names":
            deleting.start()
        return exists(collection)

    monkeypatch.setattr(store, "collection_exists", hooked_exists)
    raised = deleting.searched_meanwhile(facet)
    assert deleting.dropped.is_set()
    _honest(raised)
    # Searched once more, it met the delete still in flight: being deleted, search again.
    assert isinstance(raised, BusyError), _say(raised)
    assert deleting.outcome == [None]  # the delete went through
    with pytest.raises(NotFoundError, match="unknown collection 'race'"):
        facet.search(SearchRequest("garden", "race", mode="dense"))


def test_a_search_meeting_a_delete_that_ends_before_its_look_says_the_collection_is_gone(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The delete dropped the vectors before the search read the name's generation, and
    committed and ended (no longer "being deleted") between the search's read of the row and
    its look into the store: nothing told the search it had raced a delete, and it said the
    store "holds none of it although job 1 completed" or "no job has written to it" (the
    verification round saw 3 in 4,100 searches of a PostgreSQL stress test). The collection's
    row is read again before either is said: gone, the search runs once more and finds it gone."""
    _indexed(facet, tmp_path)
    store = facet.context.store
    exists = store.collection_exists
    deleting = _HeldDelete(facet, monkeypatch)

    def hooked_exists(collection: str) -> bool:
        if deleting.dropped.is_set() and not deleting.go_on.is_set() and \
                sys._getframe(1).f_code.co_name == "_vector_names":
            deleting.finish()  # committed and ended before the store is looked into
        return exists(collection)

    deleting.at_the_first_generation_read(store, monkeypatch)
    monkeypatch.setattr(store, "collection_exists", hooked_exists)
    raised = deleting.searched_meanwhile(facet)
    assert deleting.outcome == [None]  # the race ran; the delete went through
    _honest(raised)
    assert "no job has written" not in str(raised)
    assert isinstance(raised, NotFoundError), _say(raised)
    assert "unknown collection 'race'" in str(raised)


@pytest.mark.parametrize("look", ["the row read again", "the store's second look"])
def test_a_search_meeting_a_delete_that_ends_at_its_second_look_says_the_collection_is_gone(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, look: str) -> None:
    """The delete dropped the vectors before the search read the name's generation, and
    committed and ended at the search's second look: (1) right after the search read the row
    again (still there to it, uncommitted), when the search then asked whether a delete was in
    flight, found none, and said "has nothing searchable yet: no job has written to it" (the
    verification round of the fourth session of 2026-12-05: the flag is asked before that read
    now); (2) at the second run's look into the store, both runs having met the delete: a 429
    "deleted ... while this search ran; search again", where the name simply names no
    collection any more (a third run answers for it now)."""
    from indexer import metadata as md

    _indexed(facet, tmp_path)
    store = facet.context.store
    deleting = _HeldDelete(facet, monkeypatch)
    owner, attribute = ((md, "get_collection") if look == "the row read again" else
                        (store, "collection_exists"))
    original = getattr(owner, attribute)
    looks: list[str] = []

    def hooked(*args: Any) -> Any:
        result = original(*args)
        if sys._getframe(1).f_code.co_name == "_vector_names":
            looks.append(args[-1])
            if len(looks) == 2:
                deleting.finish()  # committed and ended just after the second look
        return result

    deleting.at_the_first_generation_read(store, monkeypatch)
    monkeypatch.setattr(owner, attribute, hooked)
    raised = deleting.searched_meanwhile(facet)
    assert deleting.outcome == [None] and len(looks) >= 2, looks  # the race ran
    _honest(raised)
    assert isinstance(raised, NotFoundError), _say(raised)
    assert "unknown collection 'race'" in str(raised)


# ------------------------------------------------------- the job's StaleDataError


def test_a_delete_meeting_a_job_that_took_the_lease_after_its_look_is_refused(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A delete looked for a writer (none), then a job of another client queued and took the
    collection's lease, then the delete removed the rows, the job's among them: the job's next
    write failed with "StaleDataError: UPDATE statement on table 'index_jobs' expected to update
    1 row(s); 0 were matched", its vectors dropped under it. The delete is refused as when the
    job came first; the job completes."""
    _, new = _indexed(facet, tmp_path)
    leased, deleted = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def job() -> None:
        try:
            results["job"] = facet.index(new, "race")
        except BaseException as e:  # (said by the assertions below)
            results["job"] = e
        finally:
            leased.set()  # (refused before its lease: the delete must not wait for ever)

    take_lease = facet.indexing.take_lease

    def hooked_take_lease(session: Any, coll: Any, job_row: Any) -> None:
        take_lease(session, coll, job_row)
        leased.set()
        deleted.wait(30)

    info = facet.catalog._info
    writer = threading.Thread(target=job)

    def hooked_info(session: Any, coll: Any) -> Any:
        found = info(session, coll)
        if sys._getframe(1).f_code.co_name == "delete" and not writer.is_alive():
            writer.start()  # after the delete's look for a writer and for queued jobs
            assert leased.wait(30)
        return found

    monkeypatch.setattr(facet.indexing, "take_lease", hooked_take_lease)
    monkeypatch.setattr(facet.catalog, "_info", hooked_info)
    try:
        facet.delete_collection("race")
        results["delete"] = None
    except FacetError as e:
        results["delete"] = e
    finally:
        deleted.set()
        writer.join(60)
    assert not writer.is_alive()
    job_end, delete_end = results["job"], results["delete"]
    assert not isinstance(job_end, BaseException), _say(job_end)
    assert job_end.state == "completed", job_end
    assert isinstance(delete_end, ConflictError), delete_end
    assert f"being indexed by job {job_end.job_id}" in str(delete_end)
    # The collection is whole: the old source's documents and the new one's, searchable.
    info_after = facet.collection("race")
    assert info_after.documents == 6, info_after
    hits = facet.search(SearchRequest("kitchen", "race", mode="dense", top_k=3)).results
    assert hits and all("kitchen" in h.text for h in hits)


def _before_delete_lock(facet: Facet, monkeypatch: pytest.MonkeyPatch, race: Any,
                        at: str = "_lock_row") -> None:
    """Run ``race()`` once, in another thread, after the first delete looked at the collection
    and before it locked the row (where another request's delete, and a re-creation, fit):
    at its lock (``_lock_row``) or at its first look for writers (``_refuse_writers``, before
    the lease's look reloads the row)."""
    step = getattr(facet.catalog, at)
    ran: list[bool] = []

    def hooked(*args: Any) -> Any:
        if not ran:
            ran.append(True)
            other = threading.Thread(target=race)
            other.start()
            other.join(60)
            assert not other.is_alive()
        return step(*args)

    monkeypatch.setattr(facet.catalog, at, hooked)


RACE_POINTS = ["_lock_row", "_refuse_writers"]


@pytest.mark.parametrize("at", RACE_POINTS)
def test_a_delete_overlapping_another_delete_and_a_re_creation_deletes_nothing(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: str) -> None:
    """Two deletes of one collection overlapped, and the name was indexed again between them:
    the later delete's lock (by id, which SQLite gave the new row again) took the new
    collection and deleted it, and both deletes answered 200. It is refused now, the new
    collection whole."""
    _, new = _indexed(facet, tmp_path)

    def delete_and_recreate() -> None:
        facet.delete_collection("race")
        facet.index(new, "race")

    _before_delete_lock(facet, monkeypatch, delete_and_recreate, at)
    with pytest.raises(ConflictError, match="deleted by another request and created again"):
        facet.delete_collection("race")
    after = facet.collection("race")
    assert after.documents == 3, after
    hits = facet.search(SearchRequest("kitchen", "race", mode="dense", top_k=3)).results
    assert hits and all("kitchen" in h.text for h in hits)


@pytest.mark.parametrize("at", RACE_POINTS)
def test_a_delete_overlapping_another_delete_says_the_collection_is_gone(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: str) -> None:
    """The later of two overlapping deletes answered 200 as if it had deleted something; it is
    a 404, as for a delete that came after."""
    _indexed(facet, tmp_path)
    _before_delete_lock(facet, monkeypatch, lambda: facet.delete_collection("race"), at)
    with pytest.raises(NotFoundError, match="unknown collection 'race'"):
        facet.delete_collection("race")
    assert [c.name for c in facet.collections()] == []


def test_a_search_of_a_collection_whose_first_job_is_being_queued_says_so(
        facet: Facet, tmp_path: Path) -> None:
    """`facet index` / POST /jobs commit a new collection, then its job: a search between was a
    404 "has nothing searchable yet: no job has written to it (index into it, or delete it)" (52
    in the verification round's 90 s of searches beside a delete/index loop). Now no results and
    a note, as while the job is queued; an old collection with no job still says the 404."""
    import datetime as dt

    from indexer import metadata as md

    with facet.context.sessions() as s:
        coll = md.create_collection(s, "young", backend=facet.context.store.backend,
                                    chunk_size=64, chunk_overlap=8, tokenizer="minilm")
        s.commit()
        coll_id = coll.id
    response = facet.search(SearchRequest("garden", "young", mode="dense"))
    assert response.results == []
    assert response.note == ("collection 'young' was created a moment ago and its first job is "
                             "being queued: nothing searchable yet"), response.note
    with facet.context.sessions() as s:
        old = s.get(md.Collection, coll_id)
        assert old is not None
        old.created_at = md.utcnow() - dt.timedelta(minutes=5)
        s.commit()
    with pytest.raises(NotFoundError, match="no job has written to it"):
        facet.search(SearchRequest("garden", "young", mode="dense"))


def test_a_search_meeting_its_collections_creation_does_not_call_it_unknown(
        facet: Facet, monkeypatch: pytest.MonkeyPatch) -> None:
    """Created between the search's read of the name and its list of the known ones: "unknown
    collection 'race' (known: c1, race)" (the verification round). Searched once more, it is
    the new collection, its first job being queued."""
    from indexer import metadata as md

    listed = md.list_collections
    made: list[int] = []

    def creating_first(session: Any) -> Any:
        if not made and sys._getframe(1).f_code.co_name == "_vector_names":
            with facet.context.sessions() as other:
                coll = md.create_collection(other, "born", backend=facet.context.store.backend,
                                            chunk_size=64, chunk_overlap=8, tokenizer="minilm")
                other.commit()
                made.append(coll.id)
        return listed(session)

    monkeypatch.setattr(md, "list_collections", creating_first)
    response = facet.search(SearchRequest("garden", "born", mode="dense"))
    assert made and response.results == []
    assert "was created a moment ago and its first job is being queued" in (response.note or "")


def test_the_stores_words_are_not_a_searchs_answer_when_a_delete_commits_at_its_look(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm search (the collection's names cached) met the store without the collection, the
    delete that dropped it committing right after the search read the row (still there to it):
    the store's "no collection 'race' in the edge store (collections: ...); create it with
    `facet index ...`" was the answer (the verification round, under `facet serve`)."""
    from indexer import metadata as md

    _indexed(facet, tmp_path)
    facet.search(SearchRequest("garden", "race", mode="dense"))  # warm: names cached
    store = facet.context.store
    deleting = _HeldDelete(facet, monkeypatch)
    deleting.at_the_first_generation_read(store, monkeypatch)
    get_collection = md.get_collection

    def hooked(session: Any, name: str) -> Any:
        row = get_collection(session, name)
        if sys._getframe(1).f_code.co_name == "_store_lost":
            deleting.finish()  # committed and ended right after the read
        return row

    monkeypatch.setattr(md, "get_collection", hooked)
    raised = deleting.searched_meanwhile(facet)
    assert deleting.outcome == [None]
    _honest(raised)
    assert "create it with" not in str(raised), _say(raised)
    assert isinstance(raised, NotFoundError) and "unknown collection 'race'" in str(raised)

"""A ``Facet`` dropped without ``close()`` lets go of its data folder at once (CPython's
reference counting, no garbage collection), and a collection two facades of one process both
want, one of them the shared one (``Facet.shared()``, the LangChain classes' default), is
refused saying how to share one (``Facet.set_shared``, ``facet=``). Real minilm, edge store,
SQLite in a temp folder."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core import Facet
from app.errors import ConflictError, InvalidRequestError
from app.services.search import SearchRequest
from app.settings import FacetSettings


@pytest.fixture
def settings(tmp_path: Path) -> FacetSettings:
    return FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    for name, text in {"card": "My card was declined at the shop.",
                       "rate": "The exchange rate you applied was wrong.",
                       "pin": "I forgot the PIN of my card."}.items():
        (root / f"{name}.txt").write_text(text)
    return root


@pytest.fixture
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector off: only reference counting frees a dropped facade."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@pytest.fixture
def no_shared() -> Iterator[None]:
    Facet.set_shared(None)
    yield
    Facet.set_shared(None)


def _wait_gone(threads: list[threading.Thread], within_s: float = 5.0) -> list[str]:
    deadline = time.monotonic() + within_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [t.name for t in threads if t.is_alive()]


def test_a_dropped_facet_lets_go_of_the_folder_and_its_threads(cache, settings, notes,
                                                                no_gc) -> None:
    """Re-running a notebook cell `facet = Facet.open(); facet.search(...)` was refused the
    second time ("open in another store of this process"): the first facade, dropped, stayed
    alive (its job runner's callbacks referred back to it) with the collection open, until a
    gc.collect()."""
    before = set(threading.enumerate())
    first = Facet.for_serving(settings, embedders=cache)  # its encoder has a model thread
    job = first.submit_index(notes, "notes")  # starts the job thread
    assert first.job_runner.join(60)  # type: ignore[attr-defined]
    assert first.job(job.id).state == "completed"
    assert first.search(SearchRequest("card declined", "notes", top_k=1)).results
    started = [t for t in threading.enumerate() if t not in before]
    assert {"facet-jobs", "facet-encoder"} <= {t.name for t in started}
    gone = weakref.ref(first)
    del first
    assert gone() is None, "a dropped Facet stayed alive (a reference cycle)"
    assert _wait_gone(started) == []
    second = Facet.open(settings, embedders=cache)
    try:
        hits = second.search(SearchRequest("card declined", "notes", top_k=1)).results
        assert hits[0].text == "My card was declined at the shop."
    finally:
        second.close()


def test_a_notebook_cell_run_twice_searches_both_times(cache, settings, notes, no_gc) -> None:
    with Facet.open(settings, embedders=cache) as facet:
        facet.index(notes, "notes")
    for _ in range(2):  # the name bound to a new facade drops the old one
        facet = Facet.open(settings, embedders=cache)
        assert facet.search(SearchRequest("exchange rate", "notes", top_k=1)).results
    facet.close()


def test_a_dropped_facet_finishes_its_running_job_first(cache, settings, notes, no_gc) -> None:
    """A facade with a job in its thread stays alive until the job ends (not interrupted), and
    is closed then: `Facet.open().submit_index(...)` in a cell of its own indexes it all."""
    before = set(threading.enumerate())
    facet = Facet.open(settings, embedders=cache)
    job_id = facet.submit_index(notes, "notes").id
    started = [t for t in threading.enumerate() if t not in before]
    gone = weakref.ref(facet)
    del facet
    deadline = time.monotonic() + 60
    while gone() is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gone() is None, "the facade outlived its job"
    assert _wait_gone(started) == []
    with Facet.open(settings, embedders=cache) as after:
        done = after.job(job_id)
        assert (done.state, done.docs_indexed) == ("completed", 3), done
        assert after.search(SearchRequest("PIN", "notes", top_k=1)).results


def test_the_shared_facet_refused_says_to_pass_yours(cache, settings, notes, no_shared) -> None:
    """Your own facade holds the collection; the LangChain classes' default (the shared one)
    was refused saying only "open one Facet per data folder per process and share it"."""
    with Facet.open(settings, embedders=cache) as mine, \
            Facet.open(settings, embedders=cache) as shared:
        mine.index(notes, "notes")
        mine.search(SearchRequest("card", "notes"))  # holds it open
        Facet.set_shared(shared)  # as Facet.shared() opens it on the LangChain classes' first use
        with pytest.raises(ConflictError) as refused:
            Facet.shared().search(SearchRequest("card", "notes"))
        said = str(refused.value)
        assert "open in another store of this process" in said
        assert "this one is the process's shared Facet (Facet.shared(), which FacetRetriever " \
               "and FacetEmbeddings use when given no facet=)" in said
        assert "pass yours to them as facet=" in said and "Facet.set_shared(facet)" in said


def test_your_facet_refused_names_the_shared_one(cache, settings, notes, no_shared) -> None:
    with Facet.open(settings, embedders=cache) as shared, \
            Facet.open(settings, embedders=cache) as mine:
        Facet.set_shared(shared)
        shared.index(notes, "notes")
        Facet.shared().search(SearchRequest("card", "notes"))  # a default retriever searched
        for call in (lambda: mine.search(SearchRequest("card", "notes")),
                     lambda: mine.index(notes, "notes")):  # (a service's own conflict)
            with pytest.raises(ConflictError) as refused:
                call()
            said = str(refused.value)
            assert "the process's shared Facet (Facet.shared(), which FacetRetriever and " \
                   "FacetEmbeddings use when given no facet=) has it open" in said, said
            assert "Facet.set_shared(facet)" in said and "Facet.shared().close()" in said


def test_two_facets_of_one_process_say_how_to_share(cache, settings, notes, no_shared) -> None:
    """Neither the shared one: the store's message, naming set_shared and facet= too."""
    with Facet.open(settings, embedders=cache) as first, \
            Facet.open(settings, embedders=cache) as second:
        first.index(notes, "notes")
        first.search(SearchRequest("card", "notes"))
        with pytest.raises(ConflictError, match="open in another store of this process") as e:
            second.search(SearchRequest("card", "notes"))
        assert "Facet.set_shared(facet)" in str(e.value) and "facet=" in str(e.value)


def test_the_langchain_default_refused_says_to_pass_facet(cache, settings, notes,
                                                          no_shared) -> None:
    pytest.importorskip("langchain_core")
    from app.integrations.langchain import FacetRetriever

    with Facet.open(settings, embedders=cache) as mine, \
            Facet.open(settings, embedders=cache) as shared:
        mine.index(notes, "notes")
        mine.search(SearchRequest("card", "notes"))
        Facet.set_shared(shared)
        with pytest.raises(ConflictError, match=r"pass yours to them as facet=, or make it the "
                                                r"shared one with Facet\.set_shared\(facet\)"):
            FacetRetriever(collection="notes", k=1).invoke("card")
        Facet.set_shared(mine)  # the advice, followed
        assert FacetRetriever(collection="notes", k=1).invoke("card declined")


def test_set_shared_closes_the_shared_facet_it_replaces_when_shared_opened_it(
        cache, settings, notes, no_shared, monkeypatch) -> None:
    """Following the advice looped: the LangChain default (``Facet.shared()``, opened by it)
    held the collection, ``Facet.set_shared(mine)`` replaced it but left it open (the user's
    ``s = Facet.shared()`` still referenced it), and ``mine`` was refused again with advice to
    call ``set_shared``. The one ``shared()`` opened is closed when replaced; one a caller gave
    ``set_shared`` stays theirs."""
    monkeypatch.setattr(Facet, "for_serving", classmethod(
        lambda cls: cls.open(settings, embedders=cache)))
    with Facet.open(settings, embedders=cache) as indexer:
        indexer.index(notes, "notes")
    default = Facet.shared()  # the LangChain classes' first use
    default.search(SearchRequest("card", "notes"))  # holds it
    with Facet.open(settings, embedders=cache) as mine:
        Facet.set_shared(mine)
        assert default._closed
        assert mine.search(SearchRequest("card", "notes")).results
        with Facet.open(settings, embedders=cache) as theirs:
            Facet.set_shared(theirs)  # a facade a caller gave: not closed by the next one
            Facet.set_shared(mine)
            assert not theirs._closed


def test_set_shared_lets_the_replaced_facets_jobs_finish_and_says_why_it_closed(
        cache, settings, notes, tmp_path, no_shared, monkeypatch) -> None:
    """set_shared closed the replaced shared facade at once: its running index job ended
    "interrupted (its Facet closing)", and a user still holding it read only "this Facet is
    closed". Its jobs now finish first, then it closes, and its refusal says set_shared did it."""
    monkeypatch.setattr(Facet, "for_serving", classmethod(
        lambda cls: cls.open(settings, embedders=cache)))
    more = tmp_path / "more"
    more.mkdir()
    for i in range(40):
        (more / f"m{i}.txt").write_text(f"Note {i}: my card payment number {i} was declined twice.")
    default = Facet.shared()
    job = default.submit_index(more, "more")
    with Facet.open(settings.model_copy(update={"data_dir": tmp_path / "other"}),
                    embedders=cache) as mine:
        Facet.set_shared(mine)
        assert Facet.shared() is mine
        deadline = time.monotonic() + 120
        while not default._closed and time.monotonic() < deadline:
            time.sleep(0.1)
        assert default._closed, "the replaced facade was not closed once its job ended"
    with Facet.open(settings, embedders=cache) as reader:
        assert reader.job(job.id).state == "completed"
    with pytest.raises(InvalidRequestError, match=r"this Facet is closed \(Facet.set_shared "
                                                  r"replaced it as the process's shared Facet"):
        default.search(SearchRequest("card", "more"))


def test_set_shared_refuses_what_is_no_facet(no_shared) -> None:
    """``set_shared("x")`` was taken; the next ``Facet.shared()`` (a LangChain class's first
    use) failed with AttributeError "'str' object has no attribute '_closed'"."""
    with pytest.raises(InvalidRequestError, match="set_shared takes a Facet or None, got str"):
        Facet.set_shared("x")  # type: ignore[arg-type]
    assert Facet._shared is None


def test_a_collection_another_facet_of_this_process_has_open_is_not_deleted_under_it(
        cache, settings, notes, tmp_path) -> None:
    """Reads were refused ("open in another store of this process"), a delete was not: its
    folder went from under the first facade, which went on serving the deleted documents (and
    lost its writes), and the second re-made the collection beside it."""
    with Facet.open(settings, embedders=cache) as first, Facet.open(settings, embedders=cache) as second:
        first.index(notes, "notes")
        before = [r.text for r in first.search(SearchRequest("card", "notes")).results]
        with pytest.raises(ConflictError, match="open in another store of this process"):
            second.delete_collection("notes")
        assert [r.text for r in first.search(SearchRequest("card", "notes")).results] == before
        assert (Path(settings.data_dir) / "qdrant-edge" / "notes").is_dir()
    with Facet.open(settings, embedders=cache) as alone:  # the first one closed: deleted
        alone.delete_collection("notes")
        assert [c.name for c in alone.collections()] == []


def test_a_wal_file_removed_while_a_facet_opens_is_not_said_unwritable(cache, settings, notes,
                                                                      monkeypatch) -> None:
    """Another facade closing on the folder removes the database's -wal file: one opening in
    that moment saw the file, then read it as not writable (os.access of a missing file), and
    refused "holds files this user cannot write (after a `sudo facet ...`?)" (a flake of the
    set_shared test above, 2026-12-07). Made exact here: the file goes just before the check."""
    import os

    from app.services import context

    with Facet.open(settings, embedders=cache) as first:
        first.index(notes, "notes")
    wal = Path(settings.data_dir) / "facet.db-wal"
    wal.write_bytes(b"")  # (as a facade still open keeps it)
    real = os.access

    def closing_meanwhile(path, mode, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path).endswith("-wal"):
            Path(path).unlink(missing_ok=True)
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(context.os, "access", closing_meanwhile)
    with Facet.open(settings, embedders=cache) as second:
        assert second.search(SearchRequest("card", "notes")).results

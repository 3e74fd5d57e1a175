"""A listing beside another process that holds collections open (a `facet serve` that searched
them) says where each is open at once: it waited ``FACET_STORE_WAIT_S`` for each such collection
first (3 s by default: 25 s beside a server holding 8 of them)."""

from __future__ import annotations

import time

from app.services.collections import CollectionService
from app.services.indexing import IndexService

from .conftest import locked_by_another_process, write_corpus


def test_collections_held_by_another_process_are_listed_without_waiting(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    writer = make_ctx()
    for name in ("a", "b", "free"):
        IndexService(writer).index(tmp_path / "src", name)
        writer.store.release(name)
    data = writer.settings.data_dir
    # A long wait: each held collection would cost it.
    lister = make_ctx(data_dir=data, store_wait_s=20)
    with locked_by_another_process(data, "a", shown_as="facet serve") as a, \
            locked_by_another_process(data, "b", shown_as="facet serve") as b:
        t0 = time.monotonic()
        listed = {c.name: c for c in CollectionService(lister).list_all()}
        elapsed = time.monotonic() - t0
    assert elapsed < 10, f"the listing waited for the holders: {elapsed:.1f} s"
    assert (listed["a"].points, listed["a"].open_in) == (None, f"pid {a.pid} on host {_host()}")
    assert (listed["b"].points, listed["b"].open_in) == (None, f"pid {b.pid} on host {_host()}")
    assert listed["free"].open_in is None and listed["free"].points == listed["free"].chunks > 0
    # Once let go, counted as before.
    again = {c.name: c for c in CollectionService(lister).list_all()}
    assert again["a"].open_in is None and again["a"].points == again["a"].chunks


def _host() -> str:
    import socket

    return socket.gethostname()

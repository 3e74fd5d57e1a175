"""A listing's counts are cached (``CollectionService._shard_state``), but where a collection is
open (``open_in``) is not: it is read at each listing.

The cache knew another process had the collection open only because that process's load
rewrote some of the shard's files. A process holding the folder lock whose files had not
changed (one still loading a large shard, or a load that rewrites nothing) was not seen: the
listing showed the old count and no ``open_in``.
"""

from __future__ import annotations

import os

from app.services.collections import CollectionService
from app.services.indexing import IndexService

from .conftest import locked_by_another_process, write_corpus


def test_a_cached_listing_says_where_the_collection_is_open_now(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx(store_wait_s=0.2)
    IndexService(ctx).index(tmp_path / "src", "c")
    ctx.store.release("c")
    service = CollectionService(ctx)  # one service for all listings, as a server keeps it
    first = service.get("c")
    assert (first.points, first.open_in) == (2, None)  # counted, and that count kept
    host = os.uname().nodename
    with locked_by_another_process(ctx.settings.data_dir, "c") as holder:
        held = service.get("c")
        assert (held.writer, held.points) == (None, None), held
        assert held.open_in == f"pid {holder.pid} on host {host}", held
    # Open (and loaded) in another process: so at every listing, not only the first.
    with locked_by_another_process(ctx.settings.data_dir, "c", opened=True) as holder:
        for info in (service.get("c"), next(i for i in service.list_all() if i.name == "c")):
            assert (info.points, info.open_in) == (None, f"pid {holder.pid} on host {host}"), info
    # Closed again: counted, with no stale ``open_in``; then from the cache, still without.
    for _ in range(2):
        after = service.get("c")
        assert (after.points, after.open_in) == (2, None), after
    assert not ctx.store.is_open("c")

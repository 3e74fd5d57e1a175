"""A collection deleted the moment its background job reads `completed` (a client polling
`GET /jobs/N`, then `DELETE /collections/NAME`) was refused as "being indexed by job N": a run
commits the job's end, then closes its shard, then releases its lease, and the delete read the
lease in between (the uploads test that deletes after a job hit it about one run in three on a
loaded box). A holder whose job row has ended is now given a moment to let go. The window is
made wide here: job 1's row says `completed` while its lease is held, released by a thread half
a second later. Real facade, SQLite, minilm."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app.errors import ConflictError
from app.services import leases
from indexer import metadata as md


def _indexed(facet, tmp_path: Path) -> int:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("the tide comes in twice a day")
    facet.index(src, "tides")
    with facet.context.sessions() as session:
        coll = md.get_collection(session, "tides")
        assert coll is not None and leases.acquire(session, coll.id, 1, 60) is None
        assert session.get(md.IndexJob, 1).state == "completed"
        return coll.id


def test_a_delete_waits_for_an_ended_jobs_lease_to_go(facet, tmp_path: Path) -> None:
    coll_id = _indexed(facet, tmp_path)

    def release_later() -> None:
        time.sleep(0.5)
        with facet.context.sessions() as session:
            leases.release(session, coll_id, 1)

    thread = threading.Thread(target=release_later)
    thread.start()
    try:
        deleted = facet.delete_collection("tides")
    finally:
        thread.join()
    assert deleted.name == "tides" and [c.name for c in facet.collections()] == []


def test_a_lease_an_ended_job_keeps_is_still_refused_after_the_moment(facet, tmp_path: Path) -> None:
    _indexed(facet, tmp_path)
    started = time.monotonic()
    with pytest.raises(ConflictError, match=r"collection 'tides' is being indexed by job 1"):
        facet.delete_collection("tides")
    assert time.monotonic() - started >= leases.ENDING_WAIT_S
    assert [c.name for c in facet.collections()] == ["tides"]

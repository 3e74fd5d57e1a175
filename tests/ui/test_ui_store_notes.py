"""The Collections tab's points cell says what the listing's store notes say (``store_note``):
a collection whose store files this process cannot open read "missing" (as if its vectors were
gone, while `facet collections` said "store files unreadable: ..."), and one whose store holds
fewer points than it has chunks showed the count alone, as if it were all of them."""

from __future__ import annotations

import errno
import os

from app.services.collections import CollectionInfo, _unreadable_text
from indexer.errors import StoreUnavailableError
from ui.render import COLLECTION_COLUMNS, collection_rows

POINTS = COLLECTION_COLUMNS.index("points")
FOLDER = "/data/qdrant-edge/notes"


def _info(points: int | None, chunks: int = 47, **fields: object) -> CollectionInfo:
    return CollectionInfo(name="notes", backend="edge", embedders={"minilm": 384}, chunk_size=200,
                          chunk_overlap=32, documents=5, documents_indexed=5, documents_failed=0,
                          chunks=chunks, points=points, created_at="2026-01-01 00:00:00",
                          **fields)  # type: ignore[arg-type]


def test_unreadable_store_files_are_said_not_missing() -> None:
    # As the listing words them: from the store's own error, and from a bare OSError.
    refused = PermissionError(errno.EACCES, os.strerror(errno.EACCES), f"{FOLDER}/facet_vectors.json")
    store = StoreUnavailableError(
        f"collection 'notes': Permission denied: {FOLDER}/facet_vectors.json; give its files back "
        f"to this user (chown -R me {FOLDER}) or make them readable (chmod -R u+rwX {FOLDER}), "
        "or run as their owner")
    for error in (refused, store):
        why = _unreadable_text("notes", error)
        info = _info(None, store_unreadable=why)
        assert info.store_note is not None and info.store_note.startswith("store files unreadable")
        [row] = collection_rows([info])
        assert row[POINTS] == (f"? (store files unreadable: Permission denied: {FOLDER}/"
                               "facet_vectors.json; give them to this user, or run as their owner)")


def test_a_store_short_of_points_says_how_many_are_missing() -> None:
    short, whole = collection_rows([_info(40, points_missing=7), _info(47)])
    again = "index its sources again, or delete it again if a delete was cut short"
    assert short[POINTS] == f"40 (7 chunks of 47 missing from the store: {again})"
    assert whole[POINTS] == 47
    [one] = collection_rows([_info(1_200, chunks=1_201, points_missing=1)])
    assert one[POINTS] == f"1,200 (1 chunk of 1,201 missing from the store: {again})"


def test_damaged_store_files_are_said_not_missing() -> None:
    damaged = (f"{FOLDER}/facet_vectors.json is damaged (JSONDecodeError: Expecting value). "
               f"Restore the folder {FOLDER} from a backup, or delete the collection")
    [row] = collection_rows([_info(None, store_damaged=damaged)])
    assert row[POINTS] == (f"? (store files damaged: {FOLDER}/facet_vectors.json is damaged "
                           "(JSONDecodeError: Expecting value); restore them, or delete it and "
                           "index it again)")


def test_a_store_that_lacks_the_collection_still_reads_missing() -> None:
    [row] = collection_rows([_info(None, store_missing=True)])
    assert row[POINTS] == "missing"

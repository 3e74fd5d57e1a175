"""Closing a ``Facet`` while another thread searches it: the search in flight ends with the
facade's "this Facet is closed", and the collection is free for the next ``Facet`` of the same
process. It was left locked for the rest of the process ("open in another store of this
process ... close() the other one first"): the edge store's close emptied its shards, and the
search in flight opened the shard again (its folder lock too) in a store nobody would close.
Real minilm, edge store, SQLite in a temp folder."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app.core import Facet
from app.errors import InvalidRequestError
from app.services.search import SearchRequest
from app.settings import FacetSettings

ROUNDS = 12


@pytest.fixture
def settings(tmp_path: Path) -> FacetSettings:
    return FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    for name, text in {"card": "My card was declined at the shop.",
                       "rate": "The exchange rate you applied was wrong.",
                       "refund": "My refund has not arrived yet.",
                       "pin": "I forgot the PIN of my card."}.items():
        (root / f"{name}.txt").write_text(text)
    return root


def test_closing_a_facet_mid_search_leaves_the_collection_free(cache, settings, notes) -> None:
    with Facet(settings, embedders=cache) as facet:
        facet.index(notes, "notes")
    for round_ in range(ROUNDS):
        facet = Facet(settings, embedders=cache)
        assert facet.search(SearchRequest("warm", "notes")).results
        errors: list[BaseException] = []
        searched = threading.Event()

        def loop(facet: Facet = facet, errors: list[BaseException] = errors,
                 searched: threading.Event = searched) -> None:
            while True:
                try:
                    facet.search(SearchRequest("refund", "notes"))
                except BaseException as e:  # (what ended it is asserted below)
                    errors.append(e)
                    return
                searched.set()

        thread = threading.Thread(target=loop, name=f"closerace-{round_}")
        thread.start()
        assert searched.wait(30)
        time.sleep(0.002 * (round_ % 6))  # close at another point of a search each round
        facet.close()
        thread.join(30)
        assert not thread.is_alive()
        # The search in flight ends with the facade's own refusal, not a store error.
        assert len(errors) == 1 and isinstance(errors[0], InvalidRequestError), errors
        assert "this Facet is closed" in str(errors[0])
        with Facet(settings, embedders=cache) as again:  # the same process, the same folder
            found = again.search(SearchRequest("refund", "notes", top_k=1)).results
            assert [Path(hit.doc_id).name for hit in found] == ["refund.txt"], round_


"""Texts the embedder's tokenizer reads as mostly unknown tokens (all-MiniLM: Thai, emoji) embed
nearly alike and cluster together whatever they say; search and indexing said so, clustering
did not (a browser run of the UI put four scripts in one cluster with no word why). Now the
result's ``note`` says how many, on every edge, and a reused clustering still says it."""

from __future__ import annotations

from app.encoding import UNREAD_MARK
from app.services.clustering import ClusterRequest, ClusterService

from .test_progress import THAI

ENGLISH = ["My card was declined at the shop", "How do I top up with a bank transfer?",
           "The weather will be sunny tomorrow", "Rain is expected over the coast"]
INSTRUCTION = "What is the topic of this text?"


def test_unreadable_texts_are_said_in_the_note_and_again_when_reused(make_ctx) -> None:
    service = ClusterService(make_ctx())
    first = service.cluster(ClusterRequest(INSTRUCTION, texts=ENGLISH + THAI, k=3))
    expected = f"4 of 8 texts {UNREAD_MARK} minilm (a script or symbols it does not read"
    assert first.note is not None and expected in first.note, first.note
    again = service.cluster(ClusterRequest(INSTRUCTION, texts=ENGLISH + THAI, k=2))
    assert again.encode_reused and again.note is not None and expected in again.note
    plain = service.cluster(ClusterRequest(INSTRUCTION, texts=ENGLISH, k=2))
    assert plain.note is None or UNREAD_MARK not in plain.note

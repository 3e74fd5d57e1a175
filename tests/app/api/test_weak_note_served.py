"""The "instruction barely steers" note offers `instemb` and `minilm[instruction_weight=1]`;
over HTTP the second is a 404 unless FACET_API_MODELS lists it, and the note offered it all the
same. It now says which of them this server does not serve."""

from __future__ import annotations

from tests.app.api.conftest import COLLECTION


def test_the_note_says_which_offered_embedder_this_server_refuses(client) -> None:
    sent = client.post("/search", json={"query": "card payment", "collection": COLLECTION, "k": 3,
                                         "instruction": "Find the intent", "mode": "dense"})
    assert sent.status_code == 200, sent.text
    note = sent.json()["note"]
    assert note.startswith("the instruction barely steers: minilm mixes it in at 0.25"), note
    assert note.endswith("read it in full: docs/indexing.md; this server does not serve "
                         "minilm[instruction_weight=1]: FACET_API_MODELS sets what it serves)"), note
    # What it offers is refused, as the note now says.
    refused = client.post("/search", json={"query": "card", "collection": COLLECTION,
                                            "embedder": "minilm[instruction_weight=1]"})
    assert refused.status_code == 404
    clustered = client.post("/cluster", json={"instruction": "Group by topic", "k": 2,
                                              "texts": ["card declined", "loan rates", "pin reset"]})
    assert clustered.status_code == 200, clustered.text
    assert "this server does not serve minilm[instruction_weight=1]" in clustered.json()["note"]


def test_a_server_that_serves_both_keeps_the_note_as_it_is() -> None:
    from app.services.search import served_note, weak_instruction_note

    note = weak_instruction_note(["minilm"])
    assert note is not None
    assert served_note(note, "minilm", lambda name: True) == note
    assert served_note("some other note", "minilm", lambda name: False) == "some other note"
    both = served_note(note, "minilm", lambda name: False)
    assert both is not None and "does not serve instemb or minilm[instruction_weight=1]" in both


def test_a_search_whose_note_offers_no_name_reads_no_collection_for_it(client, facet, monkeypatch) -> None:
    """The served check read the collection (a query) on every served search; it is asked only
    where the note offers names."""
    asked: list[str | None] = []
    recorded = facet.recorded_specs

    def counting(collection, allowed):
        asked.append(collection)
        return recorded(collection, allowed)

    monkeypatch.setattr(facet, "recorded_specs", counting)
    plain = client.post("/search", json={"query": "card payment", "collection": COLLECTION, "k": 3})
    assert plain.status_code == 200 and asked == [], asked
    steered = client.post("/search", json={"query": "card payment", "collection": COLLECTION, "k": 3,
                                           "instruction": "Find the intent", "mode": "dense"})
    assert steered.status_code == 200 and asked == [COLLECTION], asked


def test_a_name_no_embedder_loads_as_is_not_sent_to_facet_api_models(tmp_path) -> None:
    """With no instemb checkpoint (FACET_CHECKPOINT_DIR of one's own checkpoints), the note
    said "this server does not serve instemb ...: FACET_API_MODELS sets what it serves", and
    listing it there is refused: no embedder loads as instemb."""
    from app.services.search import served_note, weak_instruction_note
    from embedders.registry import set_checkpoint_dir

    note = weak_instruction_note(["minilm"])
    assert note is not None
    (tmp_path / "empty").mkdir()
    set_checkpoint_dir(tmp_path / "empty")
    try:
        said = served_note(note, "minilm", lambda name: False)
    finally:
        set_checkpoint_dir(None)
    assert said is not None and said.endswith(
        "docs/indexing.md; this server does not serve minilm[instruction_weight=1]: "
        "FACET_API_MODELS sets what it serves; instemb is not installed here (no such checkpoint "
        "in FACET_CHECKPOINT_DIR))"), said

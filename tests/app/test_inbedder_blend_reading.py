"""InBedder reads a text under the instruction given and under its default one (a blend, at
its ``instruction_weight``): what is said of its cuts and of the instruction follows both
readings (the verification round of the fourth session of 2026-12-07).

* ``Facet.count_cut`` (``/v1/embeddings``' ``X-Facet-Inputs-Cut``) counted the instructed
  reading alone: an instruction shorter than the default was said to cut nothing where the
  encoder, reading the default's longer prompt too, cut every text.
* ``embed`` under the default instruction itself (the same vectors as under none) said it
  "barely steers".

A real InBedder (``tiny_inbedder_dir``: SmolLM2 cut to two layers, a fresh LoRA), served at
``instruction_weight=0.25`` as the packaged checkpoint is."""

from __future__ import annotations

from app.core import Facet
from app.encoding import EmbedderCache
from app.settings import FacetSettings
from embedders import load_embedder
from embedders.contract import Role

SHORT = "Topic?"


def test_a_blends_cuts_and_notes_follow_both_of_its_readings(tiny_inbedder_dir, tmp_path) -> None:
    spec = f"{tiny_inbedder_dir}[instruction_weight=0.25]"
    model = load_embedder(spec, device="cpu")
    default = model.config.default_instruction
    read = model._tokenize
    for role in (Role.DOCUMENT, Role.QUERY):
        budget = read.text_budget(role, default)
        assert read.text_budget(role, SHORT) > budget  # the default's prompt is the longer
        texts = ["word " * (budget + 1), "short text"]  # the first cut by the default's reading
        encoder_cuts = max(read(texts, role, default).truncated, read(texts, role, SHORT).truncated)
        assert encoder_cuts == 1
        assert Facet.count_cut(model, texts, role, SHORT) == 1, role
    cache = EmbedderCache("cpu")
    cache.put(spec, model)
    with Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache) as facet:
        bare = facet.embed(["a card declined at the shop"], embedder=spec, instruction=default)
        assert (bare.instruction_read, bare.note) == (None, None)
        steered = facet.embed(["a card declined at the shop"], embedder=spec, instruction=SHORT)
        assert steered.instruction_read is True
        assert (steered.note or "").startswith(f"the instruction barely steers: {spec} mixes it in "
                                               "at 0.25"), steered.note


def test_a_search_or_clustering_under_the_default_instruction_is_not_said_to_barely_steer(
        tiny_inbedder_dir, tmp_path) -> None:
    """Under InBedder's own default instruction the vectors are those read without one: a
    search and a clustering said it "barely steers", advising instruction_weight=1, which gives
    the same vectors (only ``embed`` asked ``reads_bare``). Another instruction still says so."""
    import json

    from app.services.clustering import ClusterRequest
    from app.services.indexing import IndexOptions
    from app.services.search import SearchRequest

    spec = f"{tiny_inbedder_dir}[instruction_weight=0.25]"
    model = load_embedder(spec, device="cpu")
    default = model.config.default_instruction
    cache = EmbedderCache("cpu")
    cache.put(spec, model)
    source = tmp_path / "docs.jsonl"
    texts = ["my card was declined", "the exchange rate is wrong", "I forgot my PIN", "reset my PIN"]
    source.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    with Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache) as facet:
        facet.index(source, "bank", IndexOptions(embedder=spec))
        for instruction, weak in ((default, False), (f"  {default} ", False), (SHORT, True)):
            found = facet.search(SearchRequest("card declined", "bank", instruction, mode="dense",
                                               embedder=spec))
            clustered = facet.cluster(ClusterRequest(instruction, texts=texts, k=2, embedder=spec))
            for note in (found.note, clustered.note):
                assert ("barely steers" in (note or "")) is weak, (instruction, note)

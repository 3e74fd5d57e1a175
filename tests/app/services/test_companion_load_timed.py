"""A collection with two embedders: a run that writes a changed document encodes it with both,
and loads the other one's model for that. That load was counted as encoding ("1 chunk in 4.7s
(+ 1.3s loading minilm)": 4.5 s of the 4.7 were the second model's load, which nothing named;
the CLI exploration of the third session of 2026-12-07). Real models: the session's minilm,
and a second embedder saved as a checkpoint of its own, loaded from disk by the run; its
weights are shared with minilm's, already in memory, so the load is made to take a second, as
a model read from a slow disk does (the one stand-in here)."""

from __future__ import annotations

import time
from pathlib import Path

from app.core import Facet
from app.encoding import EmbedderCache
from app.services.indexing import IndexOptions
from app.settings import FacetSettings


def test_a_second_embedders_load_is_timed_apart_and_named(tmp_path: Path, minilm) -> None:
    from embedders.baselines import EncoderMeanEmbedder
    from embedders.contract import PromptConfig

    other = EncoderMeanEmbedder(name="minilm-notes", backbone=minilm.backbone,
                                prompts=PromptConfig(document="note: {text}"))
    spec = str(other.save(tmp_path / "notes"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("Card fees rise in May for foreign payments.")
    (src / "b.txt").write_text("The bank opens a new branch downtown.")
    settings = FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8)

    class SlowDisk(EmbedderCache):
        def _load(self, name: str):
            if name == spec:
                time.sleep(1.0)
            return super()._load(name)

    def fresh_cache() -> EmbedderCache:  # a new process's: minilm given, the other not loaded
        cache = SlowDisk("cpu")
        cache.put("minilm", minilm)
        return cache

    with Facet(settings, embedders=fresh_cache()) as facet:
        facet.index(src, "c")
        facet.index(src, "c", IndexOptions(embedder=spec))
    (src / "a.txt").write_text("Card fees fall in June for foreign payments.")
    with Facet(settings, embedders=fresh_cache()) as facet:
        report = facet.index(src, "c")
    assert (report.embedder, report.docs_indexed) == ("minilm", 1), report
    assert list(report.loads) == ["minilm-notes"] and report.loads["minilm-notes"] >= 1.0, report.loads
    assert report.timings["load_model"] == report.loads["minilm-notes"], report.timings
    # One chunk by two small encoders: the load's second was counted in it.
    assert report.timings["encode"] < 0.5, report.timings
    assert report.elapsed_s < 1.0, report.elapsed_s

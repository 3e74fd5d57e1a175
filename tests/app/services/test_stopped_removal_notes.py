"""A removal stopped part-way read, in the listing and a search's note, as a store "restored
from another time" whose advice (`facet index`) added back the documents being removed; its
rerun hint asked for "all 6 keys it was given" that its job row did not record; an emptied
jsonl said its records were kept only the first time; and `facet eval --collection` said
documents without the embedder's vectors "count as not found" where only dense searches miss
them. Real minilm, real SQLite, Qdrant edge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.encoding import EmbedderCache
from app.services.collections import CollectionService
from app.services.context import ServiceContext
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from app.settings import FacetSettings
from indexer import metadata as md

TOPICS = ["bank card", "mortgage rate", "weather forecast", "football match", "python code",
          "cooking pasta", "train delay", "hotel booking"]


def _stopped_removal(make_ctx, tmp_path: Path, n: int, removed: int,
                     monkeypatch) -> tuple[ServiceContext, list[str]]:
    """Collection ``c`` of ``n`` small files, and a removal of the first ``removed`` stopped
    (Ctrl-C) after the store's points were deleted, before the metadata rows."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(n):
        (src / f"doc{i}.txt").write_text(f"{TOPICS[i % 8]} note {i}, a short one.")
    ctx = make_ctx()
    IndexService(ctx).index(src, "c")
    keys = sorted(str(p) for p in src.iterdir())

    def stop(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(md, "delete_documents", stop)
    with pytest.raises(KeyboardInterrupt):
        IndexService(ctx).remove_documents("c", keys[:removed])
    monkeypatch.undo()
    return ctx, keys[:removed]


def test_points_a_stopped_removal_deleted_are_said_to_be_its_not_a_restore(make_ctx, tmp_path,
                                                                             monkeypatch) -> None:
    ctx, keys = _stopped_removal(make_ctx, tmp_path, 3, 2, monkeypatch)
    catalog = CollectionService(ctx)
    [job] = [j for j in catalog.jobs("c") if j.source.startswith("remove: ")]
    assert job.state == "interrupted"
    [info] = catalog.list_all()
    assert info.points_missing == 2, info
    note = info.store_note or ""
    assert f"a removal (job {job.id}) stopped part-way" in note, note
    assert f"`facet delete c --document {keys[0]} --document {keys[1]}`" in note, note
    assert "index its sources again" not in note and "facet index" not in note, note
    assert info.stopped_removal is not None

    response = SearchService(ctx).search(SearchRequest("note", "c", top_k=3))
    assert f"a removal (job {job.id}) stopped part-way" in (response.note or ""), response.note
    assert "facet index" not in (response.note or ""), response.note


def test_a_stopped_removal_records_every_key_and_its_hint_names_them(make_ctx, tmp_path,
                                                                    monkeypatch) -> None:
    ctx, keys = _stopped_removal(make_ctx, tmp_path, 7, 6, monkeypatch)
    catalog = CollectionService(ctx)
    [listed] = [j for j in catalog.jobs("c") if j.source.startswith("remove: ")]
    job = catalog.job(listed.id)
    assert (job.removed_keys, job.removed_keys_total) == (keys, len(keys)), job
    assert not [e for e in job.errors if e["kind"] == "removing"], job.errors
    message = job.message or ""
    shown = " ".join(f"--document {k}" for k in keys[:5])
    assert f"run `facet delete c {shown} …`" in message, message
    assert f"with all 6 keys it was given (`facet jobs {job.id}` lists them all)" in message, message

    report = IndexService(ctx).remove_documents("c", keys)  # following it finishes the removal
    assert report.docs_deleted == 6
    [info] = catalog.list_all()
    assert (info.documents, info.points_missing, info.stopped_removal) == (1, 0, None)


@pytest.mark.parametrize("folder", [False, True])
def test_an_emptied_record_file_says_its_records_are_kept_on_every_run(make_ctx, tmp_path,
                                                                      folder) -> None:
    src = tmp_path / "src"
    src.mkdir()
    path = src / "r.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": f"record {i} about trains"}) + "\n"
                            for i in range(3)))
    ctx = make_ctx()
    service = IndexService(ctx)
    source = src if folder else path
    options = IndexOptions(sync=True) if folder else None
    service.index(source, "recs", options)
    path.write_text("")
    for _ in range(3):
        report = service.index(source, "recs", options)
        [(key, message)] = report.errors
        assert key == str(path)
        assert "its 3 indexed records are kept and stay searchable" in message, message
    response = SearchService(ctx).search(SearchRequest("trains", "recs", top_k=3))
    assert len(response.results) == 3


def test_eval_says_missing_vectors_miss_only_dense_searches(tmp_path, minilm) -> None:
    from app.core import Facet
    from app.evaluation.collection import evaluate_collection, summary
    from app.evaluation.loaders import load_beir
    from embedders.baselines import EncoderMeanEmbedder
    from embedders.contract import PromptConfig

    docs = {f"d{i}": f"a short note number {i} about {w}"
            for i, w in enumerate(("apples", "bananas", "cherries", "dates"))}
    notes = str(EncoderMeanEmbedder(name="minilm-notes", backbone=minilm.backbone, prompts=PromptConfig(
        document="note: {instruction}{text}")).save(tmp_path / "minilm-notes"))
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)

    def jsonl(path: Path, rows: dict[str, str]) -> Path:
        path.write_text("".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n"
                                for k, v in rows.items()))
        return path

    corpus = jsonl(beir / "corpus.jsonl", docs)
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "cherries"}) + "\n"
                                        + json.dumps({"_id": "q2", "text": "apples"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td0\t1\n")
    subset = jsonl(tmp_path / "subset.jsonl", {"d0": docs["d0"]})
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    warned: list[str] = []
    with Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache) as facet:
        facet.index(corpus, "half", IndexOptions(embedder="minilm"))
        facet.index(subset, "half", IndexOptions(embedder=notes))
        report = evaluate_collection(facet, "half", load_beir(beir), modes=("dense", "lexical"),
                                     embedder=notes, warn=warned.append)
    text = "\n".join(warned)
    assert "dense searches cannot find them" in text, text
    assert "count as not found by dense searches" in text, text
    assert "the others count as not found" not in text, text
    assert "minilm-notes's dense searches can find" in summary(report), summary(report)
    assert "dense searches cannot find them" in (report.missing_text() or "")

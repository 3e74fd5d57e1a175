"""``facet eval --collection`` of a collection with two embedders: the embedder the search ran
is the one reported (not the collection's first), one half-filled (its job stopped part-way)
is said to be so, and the reports of two embedders are kept apart. Real minilm, and a second
real embedder (minilm reading documents through another prompt, its own named vector)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.app.cli_runner import invoke_cli

DOCS = {f"d{i}": f"a short note number {i} about {w}"
        for i, w in enumerate(("apples", "bananas", "cherries", "dates", "elderflowers", "figs"))}
QUERIES = {"q1": "apples", "q2": "cherries", "q3": "figs"}
QRELS = {"q1": "d0", "q2": "d2", "q3": "d5"}


def _jsonl(path: Path, docs: dict[str, str]) -> Path:
    path.write_text("".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items()))
    return path


@pytest.fixture(scope="module")
def two(tmp_path_factory, minilm) -> tuple[Path, Path]:
    """(data folder, BEIR folder): collection ``both``, indexed first with minilm-notes then
    with minilm (both complete; its first embedder is not the default one), and collection
    ``half``, indexed with minilm then with minilm-notes for two of its six documents only."""
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.services.indexing import IndexOptions
    from app.settings import FacetSettings
    from embedders.baselines import EncoderMeanEmbedder
    from embedders.contract import PromptConfig

    root = tmp_path_factory.mktemp("evalemb")
    notes = str(EncoderMeanEmbedder(name="minilm-notes", backbone=minilm.backbone, prompts=PromptConfig(
        document="note: {instruction}{text}")).save(root / "minilm-notes"))
    beir = root / "beir"
    (beir / "qrels").mkdir(parents=True)
    corpus = _jsonl(beir / "corpus.jsonl", DOCS)
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n"
                                                for q, t in QUERIES.items()))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t1\n" for q, d in QRELS.items()))
    subset = _jsonl(root / "subset.jsonl", dict(list(DOCS.items())[:2]))  # d0, d1
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    with Facet(FacetSettings(data_dir=root / "data"), embedders=cache) as facet:
        for source, name, embedder in ((corpus, "both", notes), (corpus, "both", "minilm"),
                                       (corpus, "half", "minilm"), (subset, "half", notes)):
            assert facet.index(source, name, IndexOptions(embedder=embedder)).state == "completed"
        assert facet.collection("half").vectors_missing == {"minilm-notes": 4}
        assert next(iter(facet.collection("both").embedders)) == "minilm-notes"
    return root / "data", beir


def _eval(data: Path, *args: str):
    return invoke_cli("eval", "--no-progress", *args, env={"FACET_DATA_DIR": str(data), "OMP_NUM_THREADS": "1"})


def test_a_half_filled_embedder_is_said_not_comparable_and_its_coverage_counts_what_it_finds(
        two, tmp_path) -> None:
    data, beir = two
    done = _eval(data, "--collection", "half", "--task", f"beir:{beir}", "--mode", "dense", "--json",
                 "--out", str(tmp_path / "o"), "minilm-notes")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["embedder"] == "minilm-notes"
    assert report["documents_without_vectors"] == 4 and report["comparable"] is False
    # Of the judged d0, d2, d5 only d0 has minilm-notes vectors: 1 of 3 can be found.
    assert (report["judged_in_collection"], report["judged_searchable"]) == (3, 1)
    assert report["coverage"] == pytest.approx(1 / 3, abs=1e-4)
    assert any("4 of the 6 documents have no 'minilm-notes' vectors" in n for n in report["notes"]), report
    assert "have no 'minilm-notes' vectors" in done.stderr and "not comparable" in done.stderr, done.stderr
    assert "only 1 of the 3 judged documents" in done.stderr, done.stderr
    saved = json.loads((tmp_path / "o" / "results.json").read_text())
    assert saved["documents_without_vectors"] == 4 and saved["notes"] == report["notes"]
    md = (tmp_path / "o" / "results.md").read_text()
    assert "embedder minilm-notes" in md and "not comparable" in md and "have no 'minilm-notes' vectors" in md


def test_no_embedder_named_reports_the_one_searched_and_each_gets_its_own_folder(
        two, tmp_path, monkeypatch) -> None:
    data, beir = two
    monkeypatch.chdir(tmp_path)  # the default --out is under results/ of the current folder
    plain = _eval(data, "--collection", "both", "--task", f"beir:{beir}", "--mode", "dense")
    assert plain.returncode == 0, plain.stderr
    # The search ran minilm (the default embedder); its first embedder, minilm-notes, was said.
    assert "embedder minilm," in plain.stdout and "| dense | dense |" in plain.stdout \
        and "| minilm |\n" in plain.stdout, plain.stdout
    first = tmp_path / "results" / "both-collection-minilm"
    assert json.loads((first / "results.json").read_text())["embedder"] == "minilm"
    assert "# facet eval: collection both, embedder minilm" in (first / "results.md").read_text()
    other = _eval(data, "--collection", "both", "--task", f"beir:{beir}", "--mode", "dense", "minilm-notes")
    assert other.returncode == 0, other.stderr
    second = tmp_path / "results" / "both-collection-minilm-notes"
    assert json.loads((second / "results.json").read_text())["embedder"] == "minilm-notes"
    # Both reports kept: the first was not moved to .bak by the second.
    assert json.loads((first / "results.json").read_text())["embedder"] == "minilm"
    assert not list(first.glob("*.bak")) and "moved" not in other.stderr, other.stderr


def test_one_out_folder_for_two_embedders_says_whose_report_was_moved(two, tmp_path) -> None:
    data, beir = two
    out = tmp_path / "shared"
    args = ("--collection", "both", "--task", f"beir:{beir}", "--mode", "dense", "--out", str(out))
    assert _eval(data, *args).returncode == 0
    again = _eval(data, *args)  # the same evaluation: its figures refreshed in place
    assert again.returncode == 0 and "moved" not in again.stderr and not list(out.glob("*.bak")), again.stderr
    other = _eval(data, *args, "minilm-notes")
    assert other.returncode == 0, other.stderr
    assert (f"note: the earlier report in {out} (collection 'both', embedder minilm) was moved to "
            f"{out / 'results.json.bak'}") in other.stderr, other.stderr
    assert json.loads((out / "results.json.bak").read_text())["embedder"] == "minilm"
    assert json.loads((out / "results.json").read_text())["embedder"] == "minilm-notes"

"""Every task kind fails, with one reason, for an embedder that returns NaN, as STS does.

The embedder is the real minilm with the rows of chosen texts replaced by NaN (as a model
whose half-precision activations overflowed returns them): retrieval scored the arbitrary
ranking NaN gives, rerank kept an arbitrary order, and clustering and classification ended
the run with sklearn's "Input X contains NaN".
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from app.evaluation import loaders
from app.evaluation.cache import EmbeddingCache
from app.evaluation.runner import EvalRunner, write_report
from app.evaluation.tasks import (
    ClassificationTask,
    ClusteringTask,
    EvalContext,
    MultiViewClusteringTask,
    RerankTask,
    RetrievalTask,
    StsTask,
    Task,
)
from embedders import Embedder, Role


class NanFor:
    """``inner`` with every element of the rows of ``bad`` texts set to ``value``."""

    def __init__(self, inner: Embedder, bad: set[str], value: float = math.nan, name: str = "nan-minilm") -> None:
        self.inner, self.bad, self.value, self.name = inner, bad, value, name

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def identity(self) -> str:
        return json.dumps({"nan_for": sorted(self.bad), "inner": self.inner.identity})

    def encode(
        self,
        texts: Sequence[str],
        *,
        role: Role | str = Role.DOCUMENT,
        instruction: str | None = None,
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> np.ndarray:
        out = np.array(self.inner.encode(texts, role=role, instruction=instruction, batch_size=batch_size))
        for i, text in enumerate(texts):
            if text in self.bad:
                out[i] = self.value
        return out


def _ctx(embedder: Embedder, **others: Embedder) -> EvalContext:
    return EvalContext(embedder, EmbeddingCache(None), show_progress=False, load_embedder=lambda n: others[n])


DOCS = {
    "d1": "Aspirin reduces the risk of heart attack in adults.",
    "d2": "Vitamin D deficiency is linked to bone fractures.",
    "d3": "Smoking increases lung cancer incidence.",
    "d4": "Exercise improves insulin sensitivity.",
}
QUERIES = {"q1": "Aspirin prevents heart attacks.", "q2": "Smoking causes lung cancer."}


def _beir() -> loaders.BeirData:
    return loaders.BeirData(
        {k: ("", v) for k, v in DOCS.items()}, dict(QUERIES), {"q1": {"d1": 1.0}, "q2": {"d3": 1.0}}
    )


TEXTS = [
    "The team won the cup.",
    "Shares rose today.",
    "The striker scored.",
    "Banks cut rates.",
    "The keeper saved a penalty.",
    "Bond yields fell.",
]
TOPIC = [0, 1, 0, 1, 0, 1]


def _views() -> list[loaders.ClusteringView]:
    return [
        loaders.ClusteringView("topic", list(TEXTS), TOPIC, "cluster by topic"),
        loaders.ClusteringView("tone", list(TEXTS), [0, 0, 1, 1, 0, 1], "cluster by tone"),
    ]


def _classification() -> ClassificationTask:
    train = loaders.LabelledTexts(TEXTS[:4], ["sport", "money", "sport", "money"])
    test = loaders.LabelledTexts(TEXTS[4:], ["sport", "money"])
    return ClassificationTask("cls", lambda: train, lambda: test)


def _failed(task: Task, ctx: EvalContext, error: str) -> None:
    result = task.run(ctx)
    assert result.error == error, result.error
    assert math.isnan(result.main_score), result.scores
    assert result.to_dict()["scores"][result.main_metric] is None


def test_retrieval_with_nan_queries_or_documents_fails_and_says_how_many(minilm) -> None:
    task = RetrievalTask("r", _beir, instruction=None)
    assert task.run(_ctx(minilm)).scores["ndcg@10"] == pytest.approx(1.0)  # minilm itself ranks both right
    _failed(
        task,
        _ctx(NanFor(minilm, {QUERIES["q2"]})),
        "the embedder returned NaN for 1 of 2 queries (the first: 'Smoking causes lung cancer.')",
    )
    _failed(
        task,
        _ctx(NanFor(minilm, {QUERIES["q1"], DOCS["d2"], DOCS["d4"]})),
        "the embedder returned NaN for 1 of 2 queries and 2 of 4 documents "
        "(the first: 'Aspirin prevents heart attacks.')",
    )
    result = task.run(_ctx(NanFor(minilm, {DOCS["d3"]})))
    assert result.info["queries"] == 2 and result.info["documents"] == 4  # the info as far as it got


def test_rerank_fails_for_a_nan_reranker_or_first_stage(minilm) -> None:
    retrieval = RetrievalTask("rr", _beir, instruction=None)
    nan_doc = NanFor(minilm, {DOCS["d3"]})
    _failed(
        RerankTask("rr", retrieval, first_stage="first", top_n=2),
        _ctx(nan_doc, first=minilm),
        "the embedder returned NaN for 1 of 3 candidate documents "
        "(the first: 'Smoking increases lung cancer incidence.')",
    )
    task = RerankTask("rr", retrieval, first_stage="first", top_n=2)
    result = task.run(_ctx(minilm, first=nan_doc))
    assert result.error == (
        "the first-stage embedder 'first' returned NaN for 1 of 4 documents "
        "(the first: 'Smoking increases lung cancer incidence.')"
    )
    assert result.info["first_stage"] == "first" and result.info["top_n"] == 2
    # A first stage that fails is not kept: with a sound one the same task scores.
    assert task.run(_ctx(minilm, first=minilm)).error is None


def test_clustering_and_multiview_fail_instead_of_raising(minilm) -> None:
    nan = NanFor(minilm, {TEXTS[1], TEXTS[4]})
    _failed(
        ClusteringTask("c", lambda: _views()[0]),
        _ctx(nan),
        "the embedder returned NaN for 2 of 6 texts (the first: 'Shares rose today.')",
    )
    _failed(
        MultiViewClusteringTask("mv", _views),
        _ctx(nan),
        "the embedder returned NaN for 2 of 6 texts under the topic instruction and 2 of 6 texts "
        "under the tone instruction (the first: 'Shares rose today.')",
    )
    infinite = NanFor(minilm, {TEXTS[0]}, value=math.inf)
    _failed(
        ClusteringTask("c", lambda: _views()[0]),
        _ctx(infinite),
        "the embedder returned NaN or infinite values for 1 of 6 texts (the first: 'The team won the cup.')",
    )
    assert ClusteringTask("c", lambda: _views()[0]).run(_ctx(minilm)).error is None


def test_classification_fails_instead_of_raising(minilm) -> None:
    _failed(
        _classification(),
        _ctx(NanFor(minilm, {TEXTS[5]})),
        "the embedder returned NaN for 1 of 2 test texts (the first: 'Bond yields fell.')",
    )
    assert _classification().run(_ctx(minilm)).error is None


def test_report_says_which_task_failed_and_why_and_the_rest_is_scored(minilm, tmp_path: Path) -> None:
    """results.md showed `nan` for a failed task and never the reason."""
    sts = [
        loaders.StsPair("A man plays a guitar.", "A man is playing the guitar.", 4.8),
        loaders.StsPair("A dog runs in the park.", "A cat sleeps on a sofa.", 0.4),
        loaders.StsPair("Two kids ride bikes.", "Children are riding bicycles.", 4.2),
    ]
    tasks = [
        RetrievalTask("scifact", _beir, instruction=None),
        StsTask("sts", lambda: sts),
        ClusteringTask("clusters", lambda: _views()[0]),
    ]
    models = {"broken": NanFor(minilm, {QUERIES["q1"], TEXTS[2]}, name="broken"), "minilm": minilm}
    report = EvalRunner(models.__getitem__, EmbeddingCache(None), show_progress=False).run(
        "broken", ["minilm"], tasks, "quick"
    )
    assert [r.error is None for r in report.runs[0].results] == [False, True, False]
    assert all(r.error is None for r in report.runs[1].results)
    json_path, md_path = write_report(report, tmp_path / "out")
    md = md_path.read_text()
    assert "| scifact | **ndcg@10** | failed [1] | 100.00 |" in md
    assert "| scifact | recall@100 | failed [1] | 100.00 |" in md  # not a blank cell
    assert "| clusters | **v_measure** | failed [2] | " in md
    assert "\n2 task(s) failed (no score, counted in no figure):\n\n" in md
    assert (
        "- [1] broken on scifact: the embedder returned NaN for 1 of 2 queries "
        "(the first: 'Aspirin prevents heart attacks.')"
    ) in md
    assert (
        "- [2] broken on clusters: the embedder returned NaN for 1 of 6 texts (the first: 'The striker scored.')" in md
    )
    assert not [line for line in md.splitlines() if line.startswith("|") and "nan" in line]  # no NaN figure
    results = json.loads(json_path.read_text())["runs"][0]["results"]
    assert results[0]["scores"] == {"ndcg@10": None} and "1 of 2 queries" in results[0]["error"]
    assert isinstance(results[1]["scores"]["spearman"], float)


def test_a_score_that_comes_out_nan_is_a_failure_not_a_figure(minilm) -> None:
    """The backstop for a task kind without its own check: its NaN was reported as `nan`."""

    class NanScore(Task):
        kind, main_metric = "custom", "score"

        def evaluate(self, ctx: EvalContext) -> tuple[dict[str, float], dict[str, object]]:
            return {"score": 0.5, "spread": math.nan}, {"texts": 2}

    result = NanScore("custom").run(_ctx(minilm))
    assert result.error == "spread came out NaN or infinite"
    assert math.isnan(result.main_score) and result.info == {"texts": 2}


def test_eval_command_writes_the_report_and_exits_4_for_a_nan_embedder(
    minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --task beir run by an embedder returning NaN for a query scored a number and exited 0."""
    import embedders
    from app.cli import cli

    monkeypatch.setattr(embedders, "load_embedder", lambda name, **kw: NanFor(minilm, {QUERIES["q2"]}, name=name))
    beir = tmp_path / "mybeir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in DOCS.items())
    )
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in QUERIES.items()))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\n")
    out = tmp_path / "o"
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "minilm",
            "--task",
            f"beir:{beir}",
            "--baselines",
            "",
            "--no-cache",
            "--no-progress",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 4, result.output
    assert "1 task(s) have no score (minilm beir:mybeir)" in result.output
    run = json.loads((out / "results.json").read_text())["runs"][0]
    assert run["results"][0]["error"] == (
        "the embedder returned NaN for 1 of 2 queries (the first: 'Smoking causes lung cancer.')"
    )
    assert "| beir:mybeir (2 queries, 4 docs) | **ndcg@10** | failed [1] |" in (out / "results.md").read_text()


def test_a_plugins_contract_error_fails_its_task_and_the_run_goes_on(minilm, tmp_path: Path) -> None:
    """A plugin's model returning NaN is refused by the registry's wrapper (a ``PluginError``)
    before the task sees the NaN: `facet eval` ended with exit 1 and wrote nothing, the figures
    of the embedders already scored included (the plugin exploration of the sixth session of
    2026-12-02). The plugin's task fails with that reason, as a packaged model's NaN does."""
    from embedders import load_embedder, register_embedder
    from embedders.registry import unregister_embedder

    sts = [
        loaders.StsPair("A man plays a guitar.", "A man is playing the guitar.", 4.8),
        loaders.StsPair("A dog runs in the park.", "A cat sleeps on a sofa.", 0.4),
        loaders.StsPair("Two kids ride bikes.", "Children are riding bicycles.", 4.2),
    ]
    register_embedder("nan-plugin", lambda device=None, **kw: NanFor(minilm, {sts[1].sentence1}, name="nan-plugin"),
                      "NaN for one text")
    try:
        models = {"nan-plugin": load_embedder("nan-plugin"), "minilm": minilm}
        report = EvalRunner(models.__getitem__, EmbeddingCache(None), show_progress=False).run(
            "minilm", ["nan-plugin"], [StsTask("sts", lambda: sts)], "quick")
    finally:
        unregister_embedder("nan-plugin")
    assert report.runs[0].results[0].error is None
    failed = report.runs[1].results[0]
    assert failed.error is not None and "'nan-plugin'" in failed.error and "non-finite" in failed.error, failed.error
    json_path, _md = write_report(report, tmp_path / "out")
    runs = json.loads(json_path.read_text())["runs"]
    assert isinstance(runs[0]["results"][0]["scores"]["spearman"], float)
    assert runs[1]["results"][0]["scores"] == {"spearman": None}

"""scripts/paired_bootstrap.py: paired resampling of test items for two embedders."""

from __future__ import annotations

import numpy as np
import pytest

from app.evaluation import loaders
from app.evaluation.cache import EmbeddingCache
from app.evaluation.dev import scifact_dev
from app.evaluation.tasks import ClusteringTask, EvalContext, RetrievalTask, StsTask
from tests.scripts import load_script


@pytest.fixture(scope="module")
def tasks(shared_data):
    dev_csv = shared_data / "stsb_en" / "stsb-en-dev.csv"
    return [StsTask("stsb-dev", lambda: loaders.load_sts_csv(dev_csv), sample=40, seed=0),
            RetrievalTask("scifact-dev", lambda: scifact_dev(shared_data), instruction="Retrieve abstracts",
                          doc_max_words=32, n_queries=8, n_docs=30, seed=0)]


@pytest.fixture(scope="module")
def prompteol_cut(smollm2_cut):
    """backbone-prompteol over SmolLM2 cut to two layers: B need only be another real embedder
    (its scores differ from minilm's); encoding with all 30 layers took most of this file's time."""
    from embedders import load_embedder

    return load_embedder("backbone-prompteol", device="cpu", backbone_name=smollm2_cut)


def test_observed_scores_are_the_evaluation_scores(tasks, minilm, prompteol_cut, tmp_path):
    bootstrap = load_script("paired_bootstrap.py")
    cache = EmbeddingCache(tmp_path)
    ctx_a = EvalContext(minilm, cache, show_progress=False)
    ctx_b = EvalContext(prompteol_cut, cache, show_progress=False)
    result = bootstrap.paired_bootstrap(tasks, ctx_a, ctx_b, resamples=200, seed=0)
    for task in tasks:
        row = result["tasks"][task.name]
        assert row["a"] == round(100 * task.run(ctx_a).main_score, 2)
        assert row["b"] == round(100 * task.run(ctx_b).main_score, 2)
        assert row["a_minus_b"] == pytest.approx(row["a"] - row["b"], abs=0.011)
        low, high = row["ci95"]
        assert low <= high and 0.0 <= row["p_a_ahead"] <= 1.0
    assert result["mean"]["a_minus_b"] == pytest.approx(
        np.mean([r["a"] - r["b"] for r in result["tasks"].values()]), abs=0.011)
    # The same seed draws the same resamples.
    assert bootstrap.paired_bootstrap(tasks, ctx_a, ctx_b, resamples=200, seed=0) == result


def test_an_embedder_against_itself_never_differs(tasks, minilm, tmp_path):
    ctx = EvalContext(minilm, EmbeddingCache(tmp_path), show_progress=False)
    result = load_script("paired_bootstrap.py").paired_bootstrap(tasks, ctx, ctx, resamples=50)
    for row in [*result["tasks"].values(), result["mean"]]:
        assert row["a_minus_b"] == 0 and row["ci95"] == [0, 0] and row["p_a_ahead"] == 0


def test_other_task_kinds_are_refused(minilm, tmp_path):
    task = ClusteringTask("c", lambda: None)
    ctx = EvalContext(minilm, EmbeddingCache(tmp_path), show_progress=False)
    with pytest.raises(ValueError, match="only STS and retrieval"):
        load_script("paired_bootstrap.py").paired_bootstrap([task], ctx, ctx, resamples=5)


def test_the_command_compares_on_a_users_sts_file(shared_data, tmp_path, monkeypatch, capsys):
    """`--task sts:FILE` resamples the pairs of that file (e.g. a dev split) instead of the suite."""
    import json
    import sys

    rows = (shared_data / "stsb_en" / "stsb-en-dev.csv").read_text().splitlines()[:30]
    csv = tmp_path / "pairs.csv"
    csv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "r.json"
    monkeypatch.setattr(sys, "argv", ["paired_bootstrap.py", "minilm", "minilm", "--task", f"sts:{csv}",
                                      "--resamples", "20", "--out", str(out)])
    load_script("paired_bootstrap.py").main()
    result = json.loads(out.read_text())
    assert result["suite"] == "user" and result["user_tasks"] == [f"sts:{csv}"]
    (row,) = result["tasks"].values()
    assert row["items"] == 30 and row["a"] == row["b"] and row["a_minus_b"] == 0
    assert json.loads(capsys.readouterr().out) == result


def test_the_command_refuses_a_user_task_it_cannot_resample(shared_data, tmp_path, monkeypatch, capsys):
    import sys

    folder = shared_data / "goalex_clustering"
    data = next(p.parent for p in sorted(folder.rglob("data.json")))
    monkeypatch.setattr(sys, "argv", ["paired_bootstrap.py", "minilm", "minilm", "--task", f"goalex:{data}"])
    with pytest.raises(SystemExit) as stop:
        load_script("paired_bootstrap.py").main()
    assert stop.value.code == 2
    assert "only STS and retrieval tasks can be resampled" in capsys.readouterr().err
    # a path that does not exist: the same usage error, before any model is loaded
    missing = f"sts:{tmp_path / 'no.csv'}"
    monkeypatch.setattr(sys, "argv", ["paired_bootstrap.py", "minilm", "minilm", "--task", missing])
    with pytest.raises(SystemExit) as stop:
        load_script("paired_bootstrap.py").main()
    assert stop.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_sts_sample_resamples_the_pairs_training_selects_on(shared_data, tmp_path, monkeypatch):
    """`--task sts:<STS-B dev> --sts-sample 400` draws exactly the trainer's 400 STS-B dev pairs."""
    import json
    import sys

    from app.evaluation.dev import build_dev_tasks

    bootstrap = load_script("paired_bootstrap.py")
    captured = {}
    real = bootstrap.paired_bootstrap

    def spy(tasks, *args, **kwargs):
        captured["pairs"] = tasks[0].pairs()
        return real(tasks, *args, **kwargs)

    monkeypatch.setattr(bootstrap, "paired_bootstrap", spy)
    dev_csv = shared_data / "stsb_en" / "stsb-en-dev.csv"
    out = tmp_path / "r.json"
    # A cache: B (minilm again) reads A's 800 vectors instead of encoding them a second time.
    monkeypatch.setattr(sys, "argv", ["paired_bootstrap.py", "minilm", "minilm", "--task", f"sts:{dev_csv}",
                                      "--sts-sample", "400", "--resamples", "5", "--out", str(out),
                                      "--cache-dir", str(tmp_path / "cache")])
    bootstrap.main()
    selected = build_dev_tasks(shared_data, "corpus")[0].pairs()  # what `facet train` scores on
    assert len(selected) == 400 and captured["pairs"] == selected
    result = json.loads(out.read_text())
    assert result["sts_sample"] == 400 and next(iter(result["tasks"].values()))["items"] == 400


def test_sts_sample_needs_a_users_sts_file(shared_data, monkeypatch, capsys):
    import sys

    monkeypatch.setattr(sys, "argv", ["paired_bootstrap.py", "minilm", "minilm", "--sts-sample", "400"])
    with pytest.raises(SystemExit) as stop:
        load_script("paired_bootstrap.py").main()
    assert stop.value.code == 2 and "--sts-sample applies to --task sts:FILE only" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["paired_bootstrap.py", "minilm", "minilm", "--sts-sample", "400",
                                      "--task", f"beir:{shared_data / 'beir_scifact'}"])
    with pytest.raises(SystemExit) as stop:
        load_script("paired_bootstrap.py").main()
    assert stop.value.code == 2 and "--sts-sample applies to --task sts:FILE only" in capsys.readouterr().err


def test_resamples_of_one_gold_score_are_drawn_again_and_counted(tmp_path, monkeypatch, capsys):
    """A 10-pair file of 0/1 gold scores (which `facet eval --task sts:` accepts) crashed with
    "spearman is undefined when one side is constant" at the first resample of one gold value."""
    import json
    import sys

    sentences = ["a man plays a guitar", "a dog runs in the park", "she cooks pasta", "stocks fell today",
                 "a child rides a bike", "the train is late", "it rains in paris", "cats sleep a lot",
                 "he reads a book", "the sun is hot"]
    csv = tmp_path / "binary.csv"
    csv.write_text("".join(f"{s},{s} again,{int(i == 0)}\n" for i, s in enumerate(sentences)))
    out = tmp_path / "r.json"
    monkeypatch.setattr(sys, "argv", ["paired_bootstrap.py", "minilm", "minilm", "--task", f"sts:{csv}",
                                      "--resamples", "40", "--out", str(out)])
    load_script("paired_bootstrap.py").main()
    (row,) = json.loads(out.read_text())["tasks"].values()
    # One gold 1 among ten: a resample misses it with probability 0.9^10 = 0.35.
    assert row["items"] == 10 and row["redrawn"] > 0
    assert row["a_minus_b"] == 0 and row["ci95"] == [0, 0]
    assert json.loads(capsys.readouterr().out)["resamples"] == 40


def test_a_task_without_degenerate_resamples_redraws_none(tasks, minilm, tmp_path):
    ctx = EvalContext(minilm, EmbeddingCache(tmp_path), show_progress=False)
    result = load_script("paired_bootstrap.py").paired_bootstrap(tasks, ctx, ctx, resamples=20)
    assert [row["redrawn"] for row in result["tasks"].values()] == [0, 0]
